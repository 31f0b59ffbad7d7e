"""The slow paths that rewrite produced batches: recompression to the topic's
compression.type, and the conversion of legacy (magic 0 and 1) message sets to v2."""

from __future__ import annotations

from moldau.errors import CorruptRecordError
from moldau.protocol import legacy
from moldau.protocol.errors import ProtocolError
from moldau.protocol.records import RecordBatch, build_batch

from .batch_checks import check_crc, check_size
from .config import CODEC_IDS as _CODEC_IDS
from .config import LogConfig


def recompress(batches: list[RecordBatch], codec: int, config: LogConfig) -> bytearray:
    """Re-encode every batch with the topic's codec (slow path), keeping producer fields."""
    out = bytearray()
    try:
        for batch in batches:
            # Kafka checks the producer's batch (size, then CRC) before it recompresses.
            check_size(batch, config)
            check_crc(batch)
            records = list(batch.records())
            out += build_batch(
                [(r.key, r.value, r.headers, r.timestamp) for r in records],
                compression=codec,
                timestamp_type=batch.timestamp_type,
                producer_id=batch.producer_id,
                producer_epoch=batch.producer_epoch,
                base_sequence=batch.base_sequence,
                is_transactional=batch.is_transactional,
                offset_deltas=[r.offset - batch.base_offset for r in records],
                compression_level=compression_level(codec, config),
            )
    except ProtocolError as exc:
        raise CorruptRecordError(str(exc)) from None
    return out


def compression_level(codec: int, config: LogConfig) -> int | None:
    """The topic's compression.<codec>.level (KIP-390) for a codec that has levels."""
    if codec == _CODEC_IDS["gzip"]:
        return config.compression_gzip_level  # -1: zlib's default, as Kafka's
    if codec == _CODEC_IDS["lz4"]:
        # Kafka's LZ4 levels run to 17; the lz4 library's high-compression ones stop at 16
        return min(config.compression_lz4_level, 16)
    if codec == _CODEC_IDS["zstd"]:
        return config.compression_zstd_level
    return None


def convert_legacy(records: bytes | bytearray | memoryview, target_codec: int | None) -> bytes:
    """Magic 0/1 message sets from old producers become one v2 batch (Kafka 3.x stores v2),
    compressed like the producer's set unless the topic names a codec (as Kafka's
    LogValidator: the source codec is kept with compression.type=producer)."""
    try:
        if target_codec is None:
            codecs = (entry.compression for entry in legacy.iter_entries(records))
            target_codec = next((c for c in codecs if c), 0)
        return legacy.convert_to_v2(records, compression=target_codec)
    except ProtocolError as exc:
        raise CorruptRecordError(f"invalid legacy message set: {exc}") from None
