"""Size-prefixed frames: every Kafka request and response is an int32 length + payload."""

from __future__ import annotations

import struct

from .errors import ProtocolError

_INT32 = struct.Struct(">i")
DEFAULT_MAX_FRAME = 100 * 1024 * 1024  # Kafka's socket.request.max.bytes default
# An unfinished frame larger than this (or than half the scratch buffer) is received in
# its own bytearray, at the cost of a read for its rest alone; a smaller one's bytes are
# carried over to the next read (two more copies, but that read brings more frames).
# Produce requests of 16 KiB batches cost the same CPU either way (docs/broker.md).
IN_PLACE_FRAME = 64 * 1024


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


class ReceiveBuffer:
    """The scratch buffer the socket is read into: one per event loop, shared by all the
    FrameReaders on it (socket_server.SocketServer holds the broker's).

    An event loop asks a protocol for a buffer, reads the socket into it and hands the
    protocol the byte count in one go, with no other protocol's read between (asyncio's
    selector and SSL transports and uvloop alike), and FrameReader copies every frame
    and the unfinished one's bytes out of it before it returns: so one buffer serves every
    connection, and an idle connection holds no read buffer at all. `owner` is the reader
    that asked last, which checks that the bytes it is told about are its own.
    """

    def __init__(self, size: int = 256 * 1024) -> None:
        self.buffer = bytearray(size)
        self.view = memoryview(self.buffer)
        self.owner: object = None


class FrameReader:
    """Frames for an asyncio.BufferedProtocol: the socket is read straight into our
    buffers, so a large request's bytes are copied once at most (FrameDecoder copies
    twice).

    Reads go into a scratch buffer (`ReceiveBuffer`, shared with the other connections
    of the event loop when given, else the reader's own) and small frames are copied out
    whole, so one read can bring in many frames. An unfinished frame larger than
    IN_PLACE_FRAME (or than half the scratch buffer) gets its own bytearray, and the rest
    of it is received directly into that. What a read leaves of a smaller one is kept by
    the reader (`_carry`) and put back at the start of the scratch buffer before the next
    read. Protocol: `get_buffer()` returns where the next bytes go; `buffer_updated(n)`
    returns the frames completed by those n bytes. A bad size raises ProtocolError before
    anything is allocated for it.
    """

    def __init__(self, max_frame_size: int = DEFAULT_MAX_FRAME,
                 scratch_size: int = 256 * 1024,
                 shared: ReceiveBuffer | None = None) -> None:
        self.max_frame_size = max_frame_size
        self._scratch = shared if shared is not None else ReceiveBuffer(scratch_size)
        self._carry = b""  # the start of an unfinished small frame (or of a size prefix)
        self._frame: bytearray | None = None  # a large frame being received in place
        self._filled = 0

    def get_buffer(self) -> memoryview:
        if self._frame is not None:
            return memoryview(self._frame)[self._filled:]
        scratch = self._scratch
        scratch.owner = self
        carry = self._carry
        if carry:
            scratch.view[:len(carry)] = carry
            return scratch.view[len(carry):]
        return scratch.view

    def buffer_updated(self, nbytes: int) -> list[bytearray]:
        if self._frame is not None:
            self._filled += nbytes
            if self._filled < len(self._frame):
                return []
            frames = [self._frame]
            self._frame = None
            return frames
        scratch = self._scratch
        if scratch.owner is not self:
            raise ProtocolError("bytes were read for another connection's buffer")
        scratch.owner = None
        return self._parse(len(self._carry) + nbytes)

    def _parse(self, end: int) -> list[bytearray]:
        frames: list[bytearray] = []
        buf, view = self._scratch.buffer, self._scratch.view
        in_place = min(len(buf) // 2, IN_PLACE_FRAME)
        pos = 0
        carry = b""
        while end - pos >= 4:
            size = _frame_size(buf, pos, self.max_frame_size)
            available = end - pos - 4
            if available >= size:
                frames.append(bytearray(view[pos + 4:pos + 4 + size]))
                pos += 4 + size
                continue
            if size > in_place:
                # a large frame: receive the rest of it in place
                frame = bytearray(size)
                frame[:available] = view[pos + 4:end]
                self._frame, self._filled = frame, available
                pos = end
            break
        if pos < end:
            carry = bytes(view[pos:end])  # put back before the next read (get_buffer)
        self._carry = carry
        return frames

    @property
    def pending(self) -> int:
        """Bytes received that do not yet form a whole frame."""
        # a large frame being received in place: its size prefix was consumed from the
        # scratch buffer, but those 4 bytes belong to the unfinished frame too
        in_place = 0 if self._frame is None else _INT32.size + self._filled
        return len(self._carry) + in_place
