"""Variable-length integers shared by the message codec and the record batch codec.

Kafka uses unsigned varints (LEB128) for compact lengths and tagged fields, and
zigzag-encoded signed varints/varlongs inside records. The fast path (one byte) is
kept inline by callers where it matters; these functions handle every length.
"""

from .errors import ProtocolError

_MAX_VARINT_BYTES = 5
_MAX_VARLONG_BYTES = 10


def read_uvarint(buf, pos: int) -> tuple[int, int]:
    """Read an unsigned 32-bit varint at pos; return (value, new position).

    Unrolled: lengths of records and compact fields of a few KiB take two or three
    bytes, and a loop costs twice as much on that hot path.
    """
    try:
        b = buf[pos]
        if b < 0x80:
            return b, pos + 1
        result = b & 0x7F
        b = buf[pos + 1]
        result |= (b & 0x7F) << 7
        if b < 0x80:
            return result, pos + 2
        b = buf[pos + 2]
        result |= (b & 0x7F) << 14
        if b < 0x80:
            return result, pos + 3
        b = buf[pos + 3]
        result |= (b & 0x7F) << 21
        if b < 0x80:
            return result, pos + 4
        b = buf[pos + 4]
    except IndexError:
        raise ProtocolError(f"truncated varint at byte {pos}") from None
    if b & 0x80:
        raise ProtocolError(f"varint at byte {pos} is longer than {_MAX_VARINT_BYTES} bytes")
    if b > 0x0F:
        raise ProtocolError(f"varint at byte {pos} overflows 32 bits")
    return result | (b << 28), pos + 5


def read_uvarlong(buf, pos: int) -> tuple[int, int]:
    """Read an unsigned 64-bit varint at pos; return (value, new position)."""
    result = 0
    shift = 0
    for i in range(_MAX_VARLONG_BYTES):
        try:
            b = buf[pos + i]
        except IndexError:
            raise ProtocolError(f"truncated varlong at byte {pos}") from None
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            if result > 0xFFFFFFFFFFFFFFFF:
                raise ProtocolError(f"varlong at byte {pos} overflows 64 bits")
            return result, pos + i + 1
        shift += 7
    raise ProtocolError(f"varlong at byte {pos} is longer than {_MAX_VARLONG_BYTES} bytes")


def read_varint(buf, pos: int) -> tuple[int, int]:
    """Read a zigzag-encoded signed 32-bit varint."""
    raw, pos = read_uvarint(buf, pos)
    return (raw >> 1) ^ -(raw & 1), pos


def read_varlong(buf, pos: int) -> tuple[int, int]:
    """Read a zigzag-encoded signed 64-bit varint."""
    raw, pos = read_uvarlong(buf, pos)
    return (raw >> 1) ^ -(raw & 1), pos


def write_uvarint(out: bytearray, value: int) -> None:
    """Append an unsigned varint (any non-negative value below 2**64)."""
    if value < 0x80:
        out.append(value)
        return
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)


def write_varint(out: bytearray, value: int) -> None:
    """Append a zigzag-encoded signed 32-bit varint."""
    write_uvarint(out, ((value << 1) ^ (value >> 31)) & 0xFFFFFFFF)


def write_varlong(out: bytearray, value: int) -> None:
    """Append a zigzag-encoded signed 64-bit varint."""
    write_uvarint(out, ((value << 1) ^ (value >> 63)) & 0xFFFFFFFFFFFFFFFF)


def uvarint_size(value: int) -> int:
    """Number of bytes write_uvarint uses for value."""
    size = 1
    while value >= 0x80:
        value >>= 7
        size += 1
    return size
