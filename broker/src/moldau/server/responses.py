"""Response frames as lists of parts, so record data can go out with sendfile.

A fetch response carries record data read from segment files. Rather than copying it
into the response, the handler puts a `FileRecords` (a file range) where the records
go; the generated encoder writes its length prefix (it only needs `len()`) and hands the
range to the output buffer's `splice()`, which notes where the bytes belong.
`encode_response_parts` then returns the frame as [bytes, FileRecords, bytes, ...] for
the connection to send.

Every response is encoded into a SpliceBuffer, a bytearray whose appends stay C-level
(only records fields holding a file range call back into Python), with the response
header packed directly and the body's generated encoder looked up once per response
type and version.
"""

from __future__ import annotations

import struct
from collections.abc import Callable

from moldau.protocol._runtime import _ENCODE_FAILURES, Message, encode_failure
from moldau.protocol.errors import ProtocolError
from moldau.protocol.headers import response_header_version

_INT32 = struct.Struct(">i")
_HEADER_V0 = struct.Struct(">ii")  # frame size, correlation id
_HEADER_V1 = struct.Struct(">iiB")  # and an empty tagged-field section


class FileRecords:
    """A byte range of a segment file standing in for a response's records field."""

    __slots__ = ("fd", "position", "size")

    def __init__(self, fd: int, position: int, size: int) -> None:
        self.fd = fd
        self.position = position
        self.size = size

    def __len__(self) -> int:
        return self.size

    def __repr__(self) -> str:
        return f"FileRecords(fd={self.fd}, position={self.position}, size={self.size})"


Part = bytes | bytearray | FileRecords
Parts = list[Part]


class SpliceBuffer(bytearray):
    """A bytearray that records where FileRecords go instead of copying them: the
    generated records writers call splice() for a value that is not bytes-like."""

    splices: list[tuple[int, FileRecords]] | tuple[()] = ()  # set by the first splice

    def splice(self, records: FileRecords | bytes | bytearray | memoryview) -> None:
        if not isinstance(records, FileRecords):
            bytearray.__iadd__(self, records)  # bytes-like, or a TypeError
            return
        if not self.splices:
            self.splices = []
        self.splices.append((len(self), records))


# a generated body encoder: writes the message into the buffer
Encoder = Callable[[Message, bytearray], None]
# (response class, version) -> (whether the response header is v1, the body's encoder)
_ENCODERS: dict[tuple[type[Message], int], tuple[bool, Encoder]] = {}


def _encoder(cls: type[Message], api_key: int, api_version: int) -> tuple[bool, Encoder]:
    plan = _ENCODERS.get((cls, api_version))
    if plan is None:
        encoder: Encoder = cls._ENCODERS[cls._codec_index(api_version)]
        plan = _ENCODERS[(cls, api_version)] = (
            response_header_version(api_key, api_version) == 1, encoder)
    return plan


def encode_response_parts(correlation_id: int, api_key: int, api_version: int,
                          body: Message) -> Parts:
    """A size-prefixed response frame as parts (one part when it holds no file ranges)."""
    flexible_header, encoder = _encoder(type(body), api_key, api_version)
    # the size (filled in below), the correlation id and, in header v1, no tagged fields
    out = SpliceBuffer(_HEADER_V1.pack(0, correlation_id, 0) if flexible_header
                       else _HEADER_V0.pack(0, correlation_id))
    try:
        encoder(body, out)
    except (ProtocolError, *_ENCODE_FAILURES) as exc:
        raise encode_failure(body.NAME, api_version, exc) from None
    splices = out.splices
    if not splices:
        _INT32.pack_into(out, 0, len(out) - 4)
        return [out]
    total = len(out) - 4 + sum(f.size for _, f in splices)
    _INT32.pack_into(out, 0, total)
    parts: Parts = []
    view = memoryview(out)
    start = 0
    for position, records in splices:
        if position > start:
            parts.append(bytes(view[start:position]))
        if records.size:
            parts.append(records)
        start = position
    if start < len(out):
        parts.append(bytes(view[start:]))
    return parts
