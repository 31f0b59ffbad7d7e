"""Size-prefixed frames: every Kafka request and response is an int32 length + payload."""

from __future__ import annotations

import struct

from .errors import ProtocolError

_INT32 = struct.Struct(">i")
DEFAULT_MAX_FRAME = 100 * 1024 * 1024  # Kafka's socket.request.max.bytes default


class FrameDecoder:
    """Cut a byte stream into frames, refusing sizes that are negative or too large.

    feed() may be called with any chunking of the stream; it returns the payloads of the
    frames that became complete, each its own bytearray: the produce path assigns offsets
    by patching record batches in place, and a writable frame spares it a copy. A bad
    size raises ProtocolError before any allocation: the connection must then be closed,
    since the stream can no longer be trusted.
    """

    def __init__(self, max_frame_size: int = DEFAULT_MAX_FRAME):
        self.max_frame_size = max_frame_size
        self._buffer = bytearray()

    def feed(self, data: bytes | bytearray | memoryview) -> list[bytearray]:
        self._buffer += data
        frames: list[bytearray] = []
        buf = self._buffer
        pos = 0
        while len(buf) - pos >= 4:
            (size,) = _INT32.unpack_from(buf, pos)
            if size < 0:
                raise ProtocolError(f"frame size {size} is negative")
            if size > self.max_frame_size:
                raise ProtocolError(
                    f"frame size {size} is larger than the limit of {self.max_frame_size} bytes"
                )
            if len(buf) - pos - 4 < size:
                break
            frames.append(buf[pos + 4 : pos + 4 + size])  # a bytearray slice is a copy
            pos += 4 + size
        if pos:
            del buf[:pos]
        return frames

    @property
    def pending(self) -> int:
        """Bytes received that do not yet form a whole frame."""
        return len(self._buffer)


def frame(payload: bytes | bytearray) -> bytes:
    return _INT32.pack(len(payload)) + payload
