"""The checker's record format and its parser.

Every record the checker writes names itself twice, so a record read back can be
attributed without any state from the writer and a mangled one is noticed:

* key: ``mdc1/<run id>/<partition>/<sequence>`` (ASCII). The run id is the writer's
  (one ``ProducerRun``); the sequence counts from 0 per partition, so the order of one
  run's records is checkable within each partition.
* value: a JSON object ``{"mdc": 1, "run": ..., "p": ..., "seq": ..., "ts": ..., "pad": ...}``
  where ``ts`` is the send time (ms since the epoch) and ``pad`` is a string of ``x``
  that brings the value up to the configured record size.

`parse` returns None for a record that is not the checker's (another writer's record in
the same topic) and raises `CorruptRecord` for one that claims to be the checker's but
whose key and value disagree or do not parse.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

MAGIC = "mdc1"  # the key prefix: Moldau durability checker, format 1
FORMAT_VERSION = 1


class CorruptRecord(ValueError):
    """A record with the checker's key prefix that does not parse or contradicts itself."""


@dataclass(frozen=True)
class CheckerRecord:
    run_id: str
    partition: int  # the partition the writer sent it to
    sequence: int  # per (run, partition), from 0
    timestamp_ms: int  # the writer's clock when it handed the record to the client

    def key(self) -> bytes:
        return f"{MAGIC}/{self.run_id}/{self.partition}/{self.sequence}".encode("ascii")


def encode(record: CheckerRecord, size: int = 0) -> tuple[bytes, bytes]:
    """The (key, value) of a record; the value is padded to at least `size` bytes."""
    if "/" in record.run_id or not record.run_id.isascii():
        raise ValueError(f"run id {record.run_id!r}: ASCII without '/' only")
    body = {"mdc": FORMAT_VERSION, "run": record.run_id, "p": record.partition,
            "seq": record.sequence, "ts": record.timestamp_ms, "pad": ""}
    value = json.dumps(body, separators=(",", ":"))
    if len(value) < size:
        body["pad"] = "x" * (size - len(value))
        value = json.dumps(body, separators=(",", ":"))
    return record.key(), value.encode("ascii")


def parse(key: bytes | None, value: bytes | None) -> CheckerRecord | None:
    """The record a (key, value) carries: None if it is not the checker's."""
    if key is None or not key.startswith(MAGIC.encode() + b"/"):
        return None
    try:
        _magic, run_id, partition, sequence = key.decode("ascii").split("/")
        from_key = (run_id, int(partition), int(sequence))
    except (UnicodeDecodeError, ValueError) as exc:
        raise CorruptRecord(f"key {key[:80]!r} does not parse: {exc}") from None
    if value is None:
        raise CorruptRecord(f"key {key!r} has a null value")
    try:
        body = json.loads(value)
        from_value = (body["run"], int(body["p"]), int(body["seq"]))
        timestamp = int(body["ts"])
        version = body["mdc"]
    except (ValueError, KeyError, TypeError) as exc:
        raise CorruptRecord(f"value of key {key!r} does not parse: {exc}") from None
    if version != FORMAT_VERSION:
        raise CorruptRecord(f"key {key!r}: format {version!r}, expected {FORMAT_VERSION}")
    if from_key != from_value:
        raise CorruptRecord(f"key {key!r} says {from_key}, its value says {from_value}")
    return CheckerRecord(run_id, from_key[1], from_key[2], timestamp)
