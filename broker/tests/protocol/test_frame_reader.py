"""FrameReader cuts any chunking of a byte stream into the same frames as FrameDecoder,
receiving into its own buffers."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from moldau.protocol.errors import ProtocolError
from moldau.protocol.framing import FrameReader, frame


def feed(reader: FrameReader, data: bytes, chunks: list[int]) -> list[bytes]:
    out: list[bytes] = []
    pos = 0
    sizes = iter(chunks)
    while pos < len(data):
        target = reader.get_buffer()
        n = min(len(target), len(data) - pos, max(1, next(sizes, len(data))))
        target[:n] = data[pos:pos + n]
        pos += n
        out.extend(bytes(f) for f in reader.buffer_updated(n))
    return out


@given(st.lists(st.binary(max_size=3000), max_size=20),
       st.lists(st.integers(1, 5000), max_size=200))
def test_any_chunking_gives_the_frames(payloads: list[bytes], chunks: list[int]) -> None:
    reader = FrameReader(max_frame_size=10_000, scratch_size=2048)
    stream = b"".join(frame(p) for p in payloads)
    assert feed(reader, stream, chunks) == payloads
    assert reader.pending == 0


def test_large_frame_is_received_in_place_and_writable() -> None:
    reader = FrameReader(scratch_size=1024)
    payload = bytes(range(256)) * 40
    frames = feed(reader, frame(payload) + frame(b"after"), [700, 3000, 10_000])
    assert frames == [payload, b"after"]


@pytest.mark.parametrize("size", [-1, 10_001])
def test_bad_sizes_raise_before_allocating(size: int) -> None:
    reader = FrameReader(max_frame_size=10_000)
    target = reader.get_buffer()
    target[:4] = struct.pack(">i", size)
    with pytest.raises(ProtocolError):
        reader.buffer_updated(4)
