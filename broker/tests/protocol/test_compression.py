"""The four Kafka codecs: round trips, the framings real producers write, and bad input."""

import gzip
import os
import struct
import zlib

import cramjam
import lz4.frame
import pytest
import zstandard
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis_budget import examples

from moldau.protocol import compression as c
from moldau.protocol.errors import ProtocolError

CODECS = [c.GZIP, c.SNAPPY, c.LZ4, c.ZSTD]
TEXT = b"".join(b"line %05d of a fairly compressible payload\n" % i for i in range(5000))
SAMPLES = [b"", b"x", os.urandom(3000), TEXT]


@pytest.mark.parametrize("codec", [c.NONE, *CODECS])
@pytest.mark.parametrize("data", SAMPLES, ids=["empty", "one", "random", "text"])
def test_round_trip(codec, data):
    assert c.decompress(codec, c.compress(codec, data)) == data


@pytest.mark.parametrize("codec", CODECS)
def test_round_trip_accepts_memoryview_and_compresses(codec):
    packed = c.compress(codec, memoryview(TEXT))
    assert len(packed) < len(TEXT) // 4
    assert c.decompress(codec, memoryview(packed)) == TEXT


@pytest.mark.parametrize("codec", [c.GZIP, c.LZ4, c.ZSTD])
def test_levels(codec):
    low = c.compress(codec, TEXT, level=1)
    high = c.compress(codec, TEXT, level=9)
    assert c.decompress(codec, low) == c.decompress(codec, high) == TEXT


@settings(max_examples=examples(60), deadline=None)
@given(codec=st.sampled_from(CODECS), data=st.binary(max_size=2000), xerial=st.booleans())
def test_round_trip_property(codec, data, xerial):
    assert c.decompress(codec, c.compress(codec, data, xerial=xerial)) == data


def test_codec_names():
    assert [c.codec_name(i) for i in range(5)] == ["none", "gzip", "snappy", "lz4", "zstd"]
    assert c.codec_id("ZSTD") == c.ZSTD
    assert c.codec_id("uncompressed") == c.NONE
    with pytest.raises(c.UnsupportedCompressionError):
        c.codec_id("brotli")
    with pytest.raises(c.UnsupportedCompressionError):
        c.codec_name(5)


@pytest.mark.parametrize("codec", [5, 6, 7, -1])
def test_unknown_codec_is_a_protocol_error(codec):
    with pytest.raises(ProtocolError, match="unknown compression codec"):
        c.decompress(codec, b"abc")
    with pytest.raises(c.UnsupportedCompressionError):
        c.compress(codec, b"abc")


# --- snappy: raw (librdkafka) and xerial framing (Java) ----------------------------


def test_snappy_default_is_raw_and_option_is_xerial():
    raw = c.compress(c.SNAPPY, TEXT)
    assert not raw.startswith(c.XERIAL_MAGIC)
    assert bytes(cramjam.snappy.decompress_raw(raw)) == TEXT
    framed = c.compress(c.SNAPPY, TEXT, xerial=True)
    assert framed[:16] == c.XERIAL_MAGIC + struct.pack(">ii", 1, 1)
    assert c.decompress(c.SNAPPY, framed) == TEXT


XERIAL_V1 = struct.pack(">ii", 1, 1)


def _xerial(blocks, version=XERIAL_V1):
    out = c.XERIAL_MAGIC + version
    for block in blocks:
        packed = bytes(cramjam.snappy.compress_raw(block))
        out += struct.pack(">i", len(packed)) + packed
    return out


def test_snappy_xerial_several_blocks_by_hand():
    blocks = [TEXT[:32768], TEXT[32768:65536], TEXT[65536:]]
    assert c.decompress(c.SNAPPY, _xerial(blocks)) == TEXT


def test_snappy_xerial_ignores_version_fields():
    # Some producers write the two version ints little-endian; the magic decides.
    data = _xerial([b"hello"], version=struct.pack("<ii", 1, 1))
    assert c.decompress(c.SNAPPY, data) == b"hello"


def test_snappy_xerial_header_only_is_empty():
    assert c.decompress(c.SNAPPY, _xerial([])) == b""


@pytest.mark.parametrize(
    "tail",
    [b"\x00\x00", struct.pack(">i", -5) + b"abc", struct.pack(">i", 1000) + b"abc"],
    ids=["short-length", "negative-length", "length-beyond-input"],
)
def test_snappy_xerial_bad_block_lengths(tail):
    with pytest.raises(ProtocolError, match="xerial"):
        c.decompress(c.SNAPPY, _xerial([b"hello"]) + tail)


def test_snappy_xerial_corrupt_block():
    data = bytearray(_xerial([TEXT[:1000]]))
    data[20:30] = b"\xff" * 10
    with pytest.raises(ProtocolError, match="snappy"):
        c.decompress(c.SNAPPY, bytes(data))


# --- gzip, lz4, zstd variants other producers write ---------------------------------


def test_gzip_reads_python_gzip_zlib_and_concatenated_members():
    assert c.decompress(c.GZIP, gzip.compress(TEXT, mtime=0)) == TEXT
    assert c.decompress(c.GZIP, zlib.compress(TEXT)) == TEXT
    two = gzip.compress(b"first ") + gzip.compress(b"second")
    assert c.decompress(c.GZIP, two) == b"first second"


def test_gzip_output_is_a_gzip_stream():
    assert c.compress(c.GZIP, TEXT)[:2] == b"\x1f\x8b"
    assert gzip.decompress(c.compress(c.GZIP, TEXT)) == TEXT


def test_lz4_reads_linked_blocks_checksums_and_sizes():
    for kwargs in (
        {},
        {"block_linked": True, "content_checksum": True, "store_size": True},
        {"block_size": lz4.frame.BLOCKSIZE_MAX4MB, "block_checksum": True},
    ):
        assert c.decompress(c.LZ4, lz4.frame.compress(TEXT, **kwargs)) == TEXT


def test_lz4_output_uses_independent_blocks():
    frame = c.compress(c.LZ4, TEXT)
    assert frame[:4] == b"\x04\x22\x4d\x18"
    flg = frame[4]
    assert flg & 0x20, "block independence flag must be set for Kafka's Java reader"


def test_zstd_reads_frames_without_content_size_and_several_frames():
    streaming = zstandard.ZstdCompressor(write_content_size=False).compress(TEXT)
    assert zstandard.get_frame_parameters(streaming).content_size == zstandard.CONTENTSIZE_UNKNOWN
    assert c.decompress(c.ZSTD, streaming) == TEXT
    chunked = zstandard.ZstdCompressor().compressobj()
    stream = chunked.compress(TEXT[:70000]) + chunked.compress(TEXT[70000:]) + chunked.flush()
    assert c.decompress(c.ZSTD, stream) == TEXT
    two = zstandard.ZstdCompressor().compress(b"ab") + streaming
    assert c.decompress(c.ZSTD, two) == b"ab" + TEXT


def test_zstd_with_checksum():
    data = zstandard.ZstdCompressor(write_checksum=True).compress(TEXT)
    assert c.decompress(c.ZSTD, data) == TEXT
    broken = bytearray(data)
    broken[-1] ^= 0xFF
    with pytest.raises(ProtocolError, match="zstd"):
        c.decompress(c.ZSTD, bytes(broken))


# --- corrupt input and decompression bombs -----------------------------------------


def _corruptions(packed: bytes):
    flipped = bytearray(packed)
    for i in range(len(flipped) // 3, len(flipped) // 3 + 8):
        flipped[i] ^= 0x5A
    return {
        "truncated-half": packed[: len(packed) // 2],
        "truncated-last-byte": packed[:-1],
        "truncated-header": packed[:3],
        "garbage": b"this is not compressed data at all",
        "zeros": bytes(len(packed)),
        "trailing-junk": packed + b"junk",
        "flipped": bytes(flipped),
        "empty": b"",
    }


CORRUPTIONS = list(_corruptions(b"x" * 40))


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("kind", CORRUPTIONS)
def test_corrupt_input_raises_protocol_error_only(codec, kind):
    bad = _corruptions(c.compress(codec, TEXT))[kind]
    try:
        out = c.decompress(codec, bad)
    except ProtocolError as exc:
        assert c.codec_name(codec) in str(exc)
        return
    # Damage inside raw snappy literals decodes "fine" (no checksum); it must not crash.
    assert isinstance(out, bytes) and kind == "flipped"


@pytest.mark.parametrize("codec", CODECS)
def test_decompression_bomb_is_refused(codec):
    bomb = bytes(20 * 1024 * 1024)
    packed = c.compress(codec, bomb)
    assert len(packed) < 1024 * 1024
    with pytest.raises(ProtocolError, match="more than the limit of 1000000 bytes"):
        c.decompress(codec, packed, max_size=1_000_000)


@pytest.mark.parametrize("codec", CODECS)
def test_limit_is_inclusive(codec):
    packed = c.compress(codec, TEXT)
    assert c.decompress(codec, packed, max_size=len(TEXT)) == TEXT
    with pytest.raises(ProtocolError):
        c.decompress(codec, packed, max_size=len(TEXT) - 1)


def test_xerial_bomb_is_refused_across_blocks():
    data = _xerial([bytes(60000)] * 10)
    with pytest.raises(ProtocolError, match="limit"):
        c.decompress(c.SNAPPY, data, max_size=100_000)


def test_zstd_bomb_without_content_size():
    packed = zstandard.ZstdCompressor(write_content_size=False).compress(bytes(50_000_000))
    with pytest.raises(ProtocolError, match="limit"):
        c.decompress(c.ZSTD, packed, max_size=10_000_000)
