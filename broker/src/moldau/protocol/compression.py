"""The compression codecs of Kafka record batches: gzip, snappy, lz4 and zstd.

Codec ids are the values of bits 0-2 of a batch's (or legacy message's) attributes.
Every failure to decompress surfaces as ProtocolError, and every decompression is bounded
by a maximum output size, so a small hostile payload cannot make the broker allocate
gigabytes (a "decompression bomb").

Wire facts this module relies on:
- gzip: Java writes a gzip stream (GZIPOutputStream); decoding also accepts a zlib
  stream and concatenated gzip members, as Java's GZIPInputStream does.
- snappy: the Java client writes the xerial/snappy-java block framing (a 16-byte header
  ``\\x82SNAPPY\\x00`` + version int32 + compatible-version int32, then blocks of
  [int32 length][raw snappy]); librdkafka writes one raw snappy block. The header is
  the only way to tell them apart. Its two version ints are ignored because some
  producers write them little-endian.
- lz4: standard LZ4 frames. Kafka's Java reader supports independent blocks only, so
  frames are written with block linking off.
- zstd: zstd frames, possibly without a content size in the header (streaming
  producers), so decoding streams instead of trusting the header.
"""

import zlib

import cramjam
import lz4.frame
import zstandard

from .errors import ProtocolError

BytesLike = bytes | bytearray | memoryview

NONE = 0
GZIP = 1
SNAPPY = 2
LZ4 = 3
ZSTD = 4

CODEC_NAMES = {NONE: "none", GZIP: "gzip", SNAPPY: "snappy", LZ4: "lz4", ZSTD: "zstd"}
_CODEC_IDS = {name: codec for codec, name in CODEC_NAMES.items()}
_CODEC_IDS["uncompressed"] = NONE  # the spelling of Kafka's compression.type config

# A v2 batch may not exceed message.max.bytes (about 1 MiB by default) compressed;
# 256 MiB of output leaves room for very compressible data without letting one
# request exhaust memory. Callers with a tighter budget pass max_size.
DEFAULT_MAX_DECOMPRESSED_SIZE = 256 * 1024 * 1024

XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = XERIAL_MAGIC + (1).to_bytes(4, "big") + (1).to_bytes(4, "big")
_XERIAL_HEADER_SIZE = 16
_XERIAL_BLOCK_SIZE = 32 * 1024  # snappy-java's default block size

# Output is produced in chunks of this size so that a bomb is noticed early.
_CHUNK = 256 * 1024

_GZIP_OR_ZLIB_WBITS = 32 + zlib.MAX_WBITS  # auto-detect the gzip or zlib header
_GZIP_WBITS = 16 + zlib.MAX_WBITS
_GZIP_MAGIC = b"\x1f\x8b"

_ZSTD_DEFAULT_LEVEL = 3


class UnsupportedCompressionError(ProtocolError):
    """A codec id outside 0-4 (Kafka answers UNSUPPORTED_COMPRESSION_TYPE or CORRUPT_MESSAGE)."""


def codec_name(codec: int) -> str:
    """The Kafka name of a codec id ("none", "gzip", "snappy", "lz4", "zstd")."""
    try:
        return CODEC_NAMES[codec]
    except KeyError:
        raise UnsupportedCompressionError(f"unknown compression codec id {codec}") from None


def codec_id(name: str) -> int:
    """The codec id for a compression.type name (case-insensitive; "uncompressed" = none)."""
    try:
        return _CODEC_IDS[name.lower()]
    except KeyError:
        raise UnsupportedCompressionError(f"unknown compression type {name!r}") from None


def compress(
    codec: int, data: BytesLike, *, level: int | None = None, xerial: bool = False
) -> bytes:
    """Compress data with a codec id; xerial=True writes snappy in snappy-java framing."""
    if codec == NONE:
        return bytes(data)
    if codec == GZIP:
        obj = zlib.compressobj(-1 if level is None else level, zlib.DEFLATED, _GZIP_WBITS)
        return obj.compress(data) + obj.flush()
    if codec == SNAPPY:
        return _snappy_xerial_compress(data) if xerial else bytes(cramjam.snappy.compress_raw(data))
    if codec == LZ4:
        # Independent blocks and no content size: what Kafka's Java reader accepts.
        return lz4.frame.compress(
            data,
            compression_level=0 if level is None else level,
            block_linked=False,
            store_size=False,
        )
    if codec == ZSTD:
        level = _ZSTD_DEFAULT_LEVEL if level is None else level
        return zstandard.ZstdCompressor(level=level).compress(data)
    raise UnsupportedCompressionError(f"unknown compression codec id {codec}")


def decompress(codec: int, data: BytesLike, max_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE) -> bytes:
    """Decompress data; ProtocolError if it is corrupt or would exceed max_size bytes."""
    if codec == NONE:
        return bytes(data)
    try:
        if codec == GZIP:
            return _gzip_decompress(data, max_size)
        if codec == SNAPPY:
            return _snappy_decompress(data, max_size)
        if codec == LZ4:
            return _lz4_decompress(data, max_size)
        if codec == ZSTD:
            return _zstd_decompress(data, max_size)
    except ProtocolError:
        raise
    except (zlib.error, cramjam.DecompressionError, RuntimeError, zstandard.ZstdError) as exc:
        raise ProtocolError(f"corrupt {CODEC_NAMES[codec]} data: {exc}") from exc
    raise UnsupportedCompressionError(f"unknown compression codec id {codec}")


def _too_big(codec: int, max_size: int) -> ProtocolError:
    return ProtocolError(
        f"{CODEC_NAMES[codec]} data decompresses to more than the limit of {max_size} bytes"
    )


def _gzip_decompress(data, max_size: int) -> bytes:
    out = bytearray()
    rest = bytes(data)
    if not rest:
        raise ProtocolError("corrupt gzip data: empty input")
    while True:
        obj = zlib.decompressobj(_GZIP_OR_ZLIB_WBITS)
        chunk = obj.decompress(rest, _CHUNK)
        while True:
            out += chunk
            if len(out) > max_size:
                raise _too_big(GZIP, max_size)
            # zlib may hold pending output even when all input is consumed, so a
            # full chunk means "ask again".
            if obj.eof or (not obj.unconsumed_tail and len(chunk) < _CHUNK):
                break
            chunk = obj.decompress(obj.unconsumed_tail, _CHUNK)
        if not obj.eof:
            raise ProtocolError("corrupt gzip data: the stream is truncated")
        rest = obj.unused_data
        # Concatenated gzip members are one stream for Java's GZIPInputStream.
        if not rest.startswith(_GZIP_MAGIC):
            if rest:
                raise ProtocolError(f"corrupt gzip data: {len(rest)} bytes after the stream end")
            return bytes(out)


def _snappy_raw(block, max_size: int, limit_left: int) -> bytes:
    size = cramjam.snappy.decompress_raw_len(block)
    if size > limit_left:
        raise _too_big(SNAPPY, max_size)
    return bytes(cramjam.snappy.decompress_raw(block))


def _snappy_decompress(data, max_size: int) -> bytes:
    view = memoryview(data)
    if len(view) < _XERIAL_HEADER_SIZE or view[:8] != XERIAL_MAGIC:
        return _snappy_raw(view, max_size, max_size)
    out = bytearray()
    pos = _XERIAL_HEADER_SIZE
    end = len(view)
    while pos < end:
        if pos + 4 > end:
            raise ProtocolError(f"corrupt snappy data: truncated xerial block length at byte {pos}")
        length = int.from_bytes(view[pos : pos + 4], "big", signed=True)
        pos += 4
        if length < 0 or pos + length > end:
            raise ProtocolError(
                f"corrupt snappy data: xerial block of {length} bytes at byte {pos - 4} "
                f"does not fit in the {end} bytes of input"
            )
        out += _snappy_raw(view[pos : pos + length], max_size, max_size - len(out))
        pos += length
    return bytes(out)


def _snappy_xerial_compress(data) -> bytes:
    view = memoryview(data)
    out = bytearray(_XERIAL_HEADER)
    for start in range(0, len(view), _XERIAL_BLOCK_SIZE):
        block = cramjam.snappy.compress_raw(view[start : start + _XERIAL_BLOCK_SIZE])
        out += len(block).to_bytes(4, "big")
        out += block
    return bytes(out)


def _lz4_decompress(data, max_size: int) -> bytes:
    out = bytearray()
    rest = bytes(data)
    if not rest:
        raise ProtocolError("corrupt lz4 data: empty input")
    while rest:
        obj = lz4.frame.LZ4FrameDecompressor()
        chunk = obj.decompress(rest, max_length=_CHUNK)
        while True:
            out += chunk
            if len(out) > max_size:
                raise _too_big(LZ4, max_size)
            if obj.eof or obj.needs_input:
                break
            chunk = obj.decompress(b"", max_length=_CHUNK)
        if not obj.eof:
            raise ProtocolError("corrupt lz4 data: the frame is truncated")
        rest = obj.unused_data  # a further frame, if any
    return bytes(out)


def _zstd_decompress(data, max_size: int) -> bytes:
    # decompressobj, unlike the stream reader, reports whether a frame ended (eof), so
    # truncation is caught. Input is fed in slices sized to the remaining budget: one
    # zstd block (at most 128 KiB of output) takes at least 4 bytes of input, so a
    # slice cannot overshoot the limit by much more than the limit itself.
    view = memoryview(data)
    end = len(view)
    if not end:
        raise ProtocolError("corrupt zstd data: empty input")
    dctx = zstandard.ZstdDecompressor()
    out = bytearray()
    pos = 0
    while pos < end:  # one frame per turn; producers may write several
        obj = dctx.decompressobj()
        while not obj.eof:
            if pos >= end:
                raise ProtocolError("corrupt zstd data: the frame is truncated")
            step = min(max((max_size - len(out)) >> 15, 64), 1 << 20)
            piece = view[pos : pos + step]
            pos += len(piece)
            out += obj.decompress(piece)
            if len(out) > max_size:
                raise _too_big(ZSTD, max_size)
        pos -= len(obj.unused_data)
    return bytes(out)
