"""The seed corpus: valid encodings for every target, so the fuzzer starts from inputs that
reach deep into each decoder instead of having to discover the wire format from nothing.

For every request class at every version the broker registers there are two bodies: the
class's defaults, and a populated instance in which every field the version carries
holds a value other than its default (arrays hold one element, nullable fields are
set, tagged fields are written). Requests wrap those bodies in a header; the records
target gets v2 batches in each codec and legacy message sets; the frames target gets
streams of request frames.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any
from uuid import UUID

from request_properties import REQUEST_PAIRS, body_input

from moldau.protocol import compression as codecs
from moldau.protocol import headers, legacy
from moldau.protocol._runtime import FieldSpec, Message, Struct, in_range
from moldau.protocol.framing import frame
from moldau.protocol.generated import ProduceRequest, RequestHeader
from moldau.protocol.records import (
    CONTROL_COMMIT,
    LOG_APPEND_TIME,
    SimpleRecord,
    build_batch,
    build_control_batch,
)

TIMESTAMP = 1_700_000_000_000  # fixed, so the corpus is the same on every run
_RECORDS = [SimpleRecord(b"key", b"value", [("h", b"v"), ("n", None)], TIMESTAMP),
            SimpleRecord(None, b"x" * 40, (), TIMESTAMP + 5),
            SimpleRecord(b"tombstone", None, (), TIMESTAMP + 9)]


def _batch(compression: int = codecs.NONE, **options: Any) -> bytes:
    return build_batch(_RECORDS, compression=compression, **options)


def _scalar(kind: str, default: Any) -> Any:
    """A value of a primitive type that differs from the field's default."""
    if kind in ("int8", "int16", "uint16", "int32", "int64"):
        return 7 if default != 7 else 8
    values: dict[str, Any] = {"bool": not default, "float64": 2.5, "string": "seed",
                              "uuid": UUID(int=0x5EED), "bytes": b"\x00\x01\xfe",
                              "records": _batch()}
    return values[kind]


def _field(spec: FieldSpec, version: int) -> Any:
    if spec.type == "struct":
        assert spec.struct is not None
        return populated(spec.struct, version)
    if spec.type == "array":
        if spec.element == "struct":
            assert spec.struct is not None
            return [populated(spec.struct, version)]
        assert spec.element is not None
        return [_scalar(spec.element, None)]
    return _scalar(spec.type, spec.default)


def populated(cls: type[Struct], version: int) -> Any:
    """An instance of a generated struct or message class with every field the version
    carries set to something other than its default."""
    return cls(**{spec.name: _field(spec, version) for spec in cls.FIELDS
                  if in_range(version, spec.versions)})


def body_seeds(cls: type[Message], version: int) -> list[bytes]:
    return [cls().encode(version), populated(cls, version).encode(version)]


def request_seeds() -> list[bytes]:
    """Request payloads (no size prefix) of every registered key and version, plus an
    ApiVersions probe of a version newer than any the broker knows."""
    seeds: list[bytes] = []
    for cls, version in REQUEST_PAIRS:
        assert cls.API_KEY is not None
        for client_id in ("seed-client", None):
            header = RequestHeader(request_api_key=cls.API_KEY, request_api_version=version,
                                   correlation_id=version + 1, client_id=client_id)
            seeds.extend(headers.encode_request(header, body)[4:]
                         for body in (cls(), populated(cls, version)))
    probe = RequestHeader(request_api_key=18, request_api_version=99, correlation_id=1,
                          client_id="probe")
    seeds.append(probe.encode(2) + b"\x00")
    return seeds


def fast_produce_seeds() -> list[bytes]:
    """Produce requests of the shape the broker's fast path takes (flexible versions, no
    transactional id, one topic with one partition), and a few just outside it."""
    seeds: list[bytes] = []
    for version in (9, 10, 11):
        for acks, client_id, topic in ((1, "rdkafka", "t"), (-1, None, "request-cost"),
                                       (0, "c", "x" * 120)):
            body = ProduceRequest(acks=acks, timeout_ms=30000, topic_data=[
                ProduceRequest.TopicProduceData(name=topic, partition_data=[
                    ProduceRequest.PartitionProduceData(index=version, records=_batch())])])
            header = RequestHeader(request_api_key=0, request_api_version=version,
                                   correlation_id=acks + 7, client_id=client_id)
            seeds.append(headers.encode_request(header, body)[4:])
    body = ProduceRequest(transactional_id="tx", acks=1, topic_data=[])
    header = RequestHeader(request_api_key=0, request_api_version=9, client_id="c")
    seeds.append(headers.encode_request(header, body)[4:])
    return seeds


def record_seeds() -> list[bytes]:
    """Mode byte 0: v2 batches; mode byte 1: legacy message sets."""
    v2 = [_batch(),
          _batch(codecs.GZIP), _batch(codecs.SNAPPY), _batch(codecs.SNAPPY, xerial_snappy=True),
          _batch(codecs.LZ4), _batch(codecs.ZSTD),
          _batch(timestamp_type=LOG_APPEND_TIME, max_timestamp=TIMESTAMP + 100),
          build_control_batch(CONTROL_COMMIT, producer_id=4, producer_epoch=1,
                              coordinator_epoch=2, timestamp=TIMESTAMP),
          _batch() + _batch(codecs.GZIP, base_offset=3),
          build_batch([], base_offset=5)]
    old = [legacy.build_message_set(_RECORDS, magic=0),
           legacy.build_message_set(_RECORDS, magic=1),
           legacy.build_message_set(_RECORDS, magic=0, compression=codecs.GZIP),
           legacy.build_message_set(_RECORDS, magic=1, compression=codecs.SNAPPY),
           legacy.build_message_set(_RECORDS, magic=1, compression=codecs.LZ4),
           legacy.build_message_set(_RECORDS, magic=1, timestamp_type=LOG_APPEND_TIME,
                                    log_append_time=TIMESTAMP + 100)]
    return [b"\x00" + blob for blob in v2] + [b"\x01" + blob for blob in old]


def frame_seeds() -> list[bytes]:
    """Reader settings (scratch 16 + 8 * byte 0, limit 4 * bytes 1-2, chunking byte 3) and
    streams of request frames: small ones, one larger than half the scratch buffer, and
    one over the limit."""
    requests = request_seeds()
    small = b"".join(frame(r) for r in requests[:6])
    large = frame(bytes(range(256)) * 6)
    return [b"\x08\x04\x00\x01" + small,
            b"\x40\x10\x00\x02" + small + large + small[:30],
            b"\x02\x00\x40\x03" + large + small,
            b"\xff\x08\x00\x04" + frame(b"x" * 2000) + small,
            b"\x10\x00\x01\x05" + frame(b"\x00" * 5)]


def seeds(target: str) -> list[bytes]:
    if target == "bodies":
        return [body_input(cls, version, body) for cls, version in REQUEST_PAIRS
                for body in body_seeds(cls, version)]
    if target == "requests":
        return request_seeds()
    if target == "records":
        return record_seeds()
    if target == "frames":
        return frame_seeds()
    if target == "produce_fast":
        return fast_produce_seeds()
    raise ValueError(f"no seeds for target {target!r}")


def write_corpus(target: str, directory: Path) -> int:
    """Write the target's seeds into directory (named by content, as libFuzzer names its
    own finds); returns how many."""
    directory.mkdir(parents=True, exist_ok=True)
    found = seeds(target)
    for data in found:
        (directory / hashlib.sha1(data).hexdigest()).write_bytes(data)
    return len(found)

