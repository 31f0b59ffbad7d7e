"""Response frames as lists of parts, so record data can go out with sendfile.

A fetch response carries record data read from segment files. Rather than copying it
into the response, the handler puts a `FileRecords` (a file range) where the records
go; the generated encoder writes its length prefix (it only needs `len()`), and
`SpliceBuffer` notes where the bytes belong. `encode_response_parts` then returns the
frame as [bytes, FileRecords, bytes, ...] for the connection to send.
"""

from __future__ import annotations

import struct
from typing import Any

from moldau.protocol.headers import response_header_version
from moldau.protocol.messages.response_header import ResponseHeader

_INT32 = struct.Struct(">i")


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
    """A bytearray that records where FileRecords were 'appended' instead of copying them."""

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.splices: list[tuple[int, FileRecords]] = []

    def __iadd__(self, other: Any) -> SpliceBuffer:  # type: ignore[override]
        if type(other) is FileRecords:
            self.splices.append((len(self), other))
            return self
        return bytearray.__iadd__(self, other)  # type: ignore[return-value]


def encode_response_parts(correlation_id: int, api_key: int, api_version: int,
                          body: Any) -> Parts:
    """A size-prefixed response frame as parts (one part when it holds no file ranges)."""
    out = SpliceBuffer(4)
    ResponseHeader(correlation_id=correlation_id).encode_into(
        out, response_header_version(api_key, api_version))
    body.encode_into(out, api_version)
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

