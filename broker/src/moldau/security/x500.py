"""X.500 distinguished names from DER, written as Java's X500Principal.getName() (RFC 2253)
writes them: the names Kafka's principal mapping rules see. Pure parsing, no I/O.
"""

from __future__ import annotations

from collections.abc import Iterator

# Java's X500Principal.getName() (RFC 2253) writes these attribute types by keyword and
# every other one as a dotted OID with a '#'-hex DER value.
_RFC2253_KEYWORDS = {
    "2.5.4.3": "CN", "2.5.4.6": "C", "2.5.4.7": "L", "2.5.4.8": "ST", "2.5.4.10": "O",
    "2.5.4.11": "OU", "2.5.4.9": "STREET", "0.9.2342.19200300.100.1.25": "DC",
    "0.9.2342.19200300.100.1.1": "UID",
}
# DER string types Java renders as text (AVA.isDerString, non-canonical): UTF8String,
# PrintableString, T61String, IA5String, GeneralString, BMPString. Java 17 decodes the
# content bytes of all of them as UTF-8 (a BMPString comes out garbled: so does it here).
_DER_STRINGS = frozenset({0x0C, 0x13, 0x14, 0x16, 0x1B, 0x1E})
_ESCAPED = frozenset(',=+<>#;"\\')


def _tlv(data: bytes, pos: int, end: int) -> tuple[int, int, int]:
    """(tag, content start, content end) of the DER element at `pos`."""
    if pos + 2 > end:
        raise ValueError("truncated DER")
    tag, length = data[pos], data[pos + 1]
    pos += 2
    if length & 0x80:
        count = length & 0x7F
        if not 1 <= count <= 4 or pos + count > end:
            raise ValueError("bad DER length")
        length = int.from_bytes(data[pos:pos + count], "big")
        pos += count
    if pos + length > end:
        raise ValueError("truncated DER")
    return tag, pos, pos + length


def _children(data: bytes, start: int, end: int) -> Iterator[tuple[int, int, int, int]]:
    """(tag, element start, content start, content end) of each element in a range."""
    pos = start
    while pos < end:
        tag, cstart, cend = _tlv(data, pos, end)
        yield tag, pos, cstart, cend
        pos = cend


def _oid(content: bytes) -> str:
    arcs: list[int] = []
    value = 0
    for byte in content:
        value = (value << 7) | (byte & 0x7F)
        if not byte & 0x80:
            arcs.append(value)
            value = 0
    if not arcs:
        raise ValueError("empty OID")
    first = min(arcs[0] // 40, 2)
    return ".".join(str(a) for a in (first, arcs[0] - 40 * first, *arcs[1:]))


def _ava(data: bytes, start: int, end: int) -> str:
    (_t, _s, ostart, oend), (vtag, vstart, cstart, cend) = list(_children(data, start, end))[:2]
    oid = _oid(data[ostart:oend])
    keyword = _RFC2253_KEYWORDS.get(oid)
    if keyword is None or vtag not in _DER_STRINGS:
        return f"{keyword or oid}=#{data[vstart:cend].hex()}"
    text = data[cstart:cend].decode("utf-8", errors="replace")
    out: list[str] = []
    for ch in text:
        if ch in _ESCAPED:
            out.append("\\" + ch)
        elif ch == "\x00":
            out.append("\\00")
        else:
            out.append(ch)
    chars = "".join(out)
    # leading and trailing spaces (and CRs) are escaped, as Java does
    lead = len(chars) - len(chars.lstrip(" \r"))
    trail = len(chars.rstrip(" \r"))
    return keyword + "=" + "".join(
        "\\" + c if i < lead or i >= trail else c for i, c in enumerate(chars))


def name_to_rfc2253(name_der: bytes) -> str:
    """An X.501 Name (DER) as Java's X500Principal.getName() writes it: RDNs from the last
    to the first, multi-valued RDNs joined with '+', in the order they are encoded."""
    tag, start, end = _tlv(name_der, 0, len(name_der))
    if tag != 0x30:
        raise ValueError("a Name is a SEQUENCE")
    rdns: list[str] = []
    for rtag, _e, rstart, rend in _children(name_der, start, end):
        if rtag != 0x31:
            raise ValueError("an RDN is a SET")
        rdns.append("+".join(_ava(name_der, s, e)
                             for _t, _el, s, e in _children(name_der, rstart, rend)))
    return ",".join(reversed(rdns))


def distinguished_name(cert_der: bytes) -> str:
    """The subject of a DER certificate, RFC 2253 as Java writes it (what Kafka maps)."""
    _t, start, end = _tlv(cert_der, 0, len(cert_der))  # Certificate
    _t, start, end = _tlv(cert_der, start, end)  # TBSCertificate
    fields = list(_children(cert_der, start, end))
    if fields and fields[0][0] == 0xA0:  # [0] version
        fields = fields[1:]
    # serialNumber, signature, issuer, validity, subject
    _tag, element, _cstart, cend = fields[4]
    return name_to_rfc2253(cert_der[element:cend])

