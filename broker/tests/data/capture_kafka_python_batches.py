"""Capture record batches and message sets written by kafka-python's own record builders.

kafka-python (kafka.record) is an independent implementation of Kafka's formats, so
its bytes check Moldau's decoders against something Moldau did not write. This script
builds one v2 batch per codec with DefaultRecordBatchBuilder, one transactional batch,
and legacy message sets (magic 0 and 1) with LegacyRecordBatchBuilder, then writes
broker/tests/data/records/kafka-python-*.bin with a .json sidecar of the records that
were appended (the expected result of decoding). Rerun with

    .venv/bin/python broker/tests/data/capture_kafka_python_batches.py

Needs kafka-python and python-snappy (kafka-python's snappy support). The expected
offsets and timestamps in the sidecars follow Kafka's rules and are computed here from
what was appended, not by Moldau's code.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import kafka
import kafka.codec
from kafka.record.default_records import DefaultRecordBatchBuilder
from kafka.record.legacy_records import LegacyRecordBatchBuilder

OUT = Path(__file__).resolve().parent / "records"
CODECS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
# lz4 in magic 0 uses a historical non-standard framing Moldau does not read.
LEGACY_CODECS = {0: ["none", "gzip", "snappy"], 1: ["none", "gzip", "snappy", "lz4"]}
BASE_TIMESTAMP = 1_700_000_123_000
# Larger than snappy-java's 32 KiB block, so xerial snappy data has several blocks.
BIG_VALUE = b"".join(b"moldau record %06d;" % i for i in range(1700))


def sample_records(with_headers: bool) -> list[tuple]:
    """(key, value, headers, timestamp) covering nulls, empties, binary, unicode, sizes."""
    out = [
        (b"key-0", b"hello, Moldau", [("trace", b"abc")], BASE_TIMESTAMP),
        (None, bytes(range(256)), [("empty", b""), ("null", None)], BASE_TIMESTAMP + 1),
        (b"", None, [("ünïcødé", "€".encode())], BASE_TIMESTAMP + 2),
        # an earlier timestamp than the first record: a negative timestamp delta
        (b"\x00\xff", b"early", [], BASE_TIMESTAMP - 5000),
        (b"big", BIG_VALUE, [], BASE_TIMESTAMP + 10),
    ]
    for i in range(5, 25):
        out.append((f"key-{i}".encode(), f"value-{i}-".encode() * 10, [], BASE_TIMESTAMP + i))
    if not with_headers:
        out = [(k, v, [], ts) for k, v, _, ts in out]
    return out


def encode_bytes(data: bytes | None):
    """Sidecar form: null, a UTF-8 string, {"hex": ...}, or {"sha256", "length"} if big."""
    if data is None:
        return None
    if len(data) > 1024:
        return {"sha256": hashlib.sha256(data).hexdigest(), "length": len(data)}
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return {"hex": data.hex()}


def expected(records: list[tuple], offsets: list[int], timestamps: list[int]) -> list[dict]:
    return [
        {
            "offset": offset,
            "timestamp": ts,
            "key": encode_bytes(key),
            "value": encode_bytes(value),
            "headers": [[name, encode_bytes(hv)] for name, hv in headers],
        }
        for (key, value, headers, _), offset, ts in zip(records, offsets, timestamps, strict=True)
    ]


def save(name: str, blob: bytes, sidecar: dict) -> None:
    print(f"{name}: {len(blob)} bytes")
    (OUT / f"{name}.bin").write_bytes(blob)
    text = json.dumps(sidecar, indent=1, ensure_ascii=False)
    (OUT / f"{name}.json").write_text(text + "\n", encoding="utf-8")


def producer_name(builder: str) -> str:
    return f"kafka-python {kafka.__version__} {builder}"


def capture_v2(codec: str, *, transactional: bool = False) -> None:
    records = sample_records(with_headers=True)
    state = (4242, 3, 17) if transactional else (-1, -1, -1)
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=CODECS[codec],
        is_transactional=transactional,
        producer_id=state[0],
        producer_epoch=state[1],
        base_sequence=state[2],
        batch_size=1 << 20,
    )
    for delta, (key, value, headers, ts) in enumerate(records):
        builder.append(delta, timestamp=ts, key=key, value=value, headers=headers)
    blob = bytes(builder.build())
    # kafka-python falls back to no compression when it does not pay: make sure it did.
    assert blob[22] & 0x07 == CODECS[codec], f"{codec}: batch was not compressed"
    name = f"kafka-python-transactional-{codec}" if transactional else f"kafka-python-{codec}"
    sidecar = {
        "producer": producer_name("DefaultRecordBatchBuilder"),
        "codec": codec,
        "magic": 2,
        "batches": 1,
        "count": len(records),
        "batch": {
            "producer_id": state[0],
            "producer_epoch": state[1],
            "base_sequence": state[2],
            "is_transactional": transactional,
        },
        "records": expected(records, list(range(len(records))), [r[3] for r in records]),
    }
    save(name, blob, sidecar)


def capture_legacy(magic: int, codec: str) -> None:
    records = sample_records(with_headers=False)
    builder = LegacyRecordBatchBuilder(magic, CODECS[codec], batch_size=1 << 20)
    for offset, (key, value, _, ts) in enumerate(records):
        builder.append(offset, timestamp=ts, key=key, value=value)
    blob = bytes(builder.build())
    # Magic 0 has no timestamps (-1). A compressed magic 1 wrapper written by
    # kafka-python has offset 0, which Kafka reads as "inner offsets are absolute".
    timestamps = [-1] * len(records) if magic == 0 else [r[3] for r in records]
    sidecar = {
        "producer": producer_name("LegacyRecordBatchBuilder"),
        "codec": codec,
        "magic": magic,
        "batches": 1 if codec != "none" else len(records),
        "count": len(records),
        "records": expected(records, list(range(len(records))), timestamps),
    }
    save(f"kafka-python-magic{magic}-{codec}", blob, sidecar)


def main() -> None:
    if not kafka.codec.has_snappy():
        raise SystemExit("kafka-python's snappy support needs python-snappy installed")
    OUT.mkdir(exist_ok=True)
    for codec in CODECS:
        capture_v2(codec)
    capture_v2("zstd", transactional=True)
    for magic, codecs in LEGACY_CODECS.items():
        for codec in codecs:
            capture_legacy(magic, codec)


if __name__ == "__main__":
    main()
