"""Size-prefixed frames: every Kafka request and response is an int32 length + payload."""

from __future__ import annotations

import struct

from .errors import ProtocolError

_INT32 = struct.Struct(">i")
DEFAULT_MAX_FRAME = 100 * 1024 * 1024  # Kafka's socket.request.max.bytes default


def _frame_size(buf: bytearray, pos: int, limit: int) -> int:
    """The size prefix at pos, refused before anything is allocated for it."""
    (size,) = _INT32.unpack_from(buf, pos)
    if size < 0:
        raise ProtocolError(f"frame size {size} is negative")
    if size > limit:
        raise ProtocolError(f"frame size {size} is larger than the limit of {limit} bytes")
    return size


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
            size = _frame_size(buf, pos, self.max_frame_size)
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


class FrameReader:
    """Frames for an asyncio.BufferedProtocol: the socket is read straight into our
    buffers, so a request's bytes are copied once at most (FrameDecoder copies twice).

    Small frames arrive in a scratch buffer and are copied out whole; a frame larger
    than half the scratch buffer gets its own bytearray, and the rest of it is received
    directly into that. Protocol: `get_buffer()` returns where the next bytes go;
    `buffer_updated(n)` returns the frames completed by those n bytes. A bad size raises
    ProtocolError before anything is allocated for it.
    """

    def __init__(self, max_frame_size: int = DEFAULT_MAX_FRAME,
                 scratch_size: int = 256 * 1024) -> None:
        self.max_frame_size = max_frame_size
        self._scratch = bytearray(scratch_size)
        self._view = memoryview(self._scratch)
        self._start = 0  # unparsed bytes are _scratch[_start:_end]
        self._end = 0
        self._frame: bytearray | None = None  # a large frame being received in place
        self._filled = 0

    def get_buffer(self) -> memoryview:
        if self._frame is not None:
            return memoryview(self._frame)[self._filled:]
        if self._end == len(self._scratch):
            self._compact()
        return self._view[self._end:]

    def _compact(self) -> None:
        pending = self._end - self._start
        if self._start:
            self._view[:pending] = self._view[self._start:self._end]
            self._start, self._end = 0, pending

    def buffer_updated(self, nbytes: int) -> list[bytearray]:
        if self._frame is not None:
            self._filled += nbytes
            if self._filled < len(self._frame):
                return []
            frames = [self._frame]
            self._frame = None
            return frames
        self._end += nbytes
        return self._parse()

    def _parse(self) -> list[bytearray]:
        frames: list[bytearray] = []
        buf, view = self._scratch, self._view
        pos, end = self._start, self._end
        while end - pos >= 4:
            size = _frame_size(buf, pos, self.max_frame_size)
            available = end - pos - 4
            if available >= size:
                frames.append(bytearray(view[pos + 4:pos + 4 + size]))
                pos += 4 + size
                continue
            if size > len(buf) // 2:
                # a large frame: receive the rest of it in place
                frame = bytearray(size)
                frame[:available] = view[pos + 4:end]
                self._frame, self._filled = frame, available
                pos = end
            elif pos + 4 + size > len(buf):
                self._start, self._end = pos, end
                self._compact()  # make room for the rest of a small frame
                return frames
            break
        if pos == end:
            pos = end = 0
        self._start, self._end = pos, end
        return frames

    @property
    def pending(self) -> int:
        """Bytes received that do not yet form a whole frame."""
        # a large frame being received in place: its size prefix was consumed from the
        # scratch buffer, but those 4 bytes belong to the unfinished frame too
        in_place = 0 if self._frame is None else _INT32.size + self._filled
        return self._end - self._start + in_place
