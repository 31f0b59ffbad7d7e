"""Kafka's small text files in a log directory, read and written byte-compatibly.

- offset checkpoints (`recovery-point-offset-checkpoint`, `replication-offset-checkpoint`,
  `log-start-offset-checkpoint`, `cleaner-offset-checkpoint`), one per log dir::

      0                 <- version
      2                 <- number of entries
      orders 0 1234     <- topic partition offset
      orders 1 987

- `leader-epoch-checkpoint`, one per partition: version 0, count, `epoch start_offset` lines.
- `partition.metadata`, one per partition: `version: 0` and `topic_id: <id>` (no final newline),
  the id in Kafka's Uuid text form (URL-safe base64 of the 16 bytes, unpadded).
- `meta.properties`, one per log dir: a Java properties file; in ZooKeeper mode `version=0`,
  `broker.id` and `cluster.id`.

Writes are atomic and durable (temp file, fsync, rename, fsync of the directory); reads of a
damaged file raise CheckpointError naming the file and the line, so the caller can take the log
directory offline as Kafka does.
"""

from __future__ import annotations

import base64
import os
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import NamedTuple, TypeVar
from uuid import UUID

from moldau import properties
from moldau.storage.files import atomic_write

__all__ = [
    "CLEANER_OFFSET_CHECKPOINT",
    "LEADER_EPOCH_CHECKPOINT",
    "LOG_START_OFFSET_CHECKPOINT",
    "META_PROPERTIES",
    "PARTITION_METADATA",
    "RECOVERY_POINT_CHECKPOINT",
    "REPLICATION_CHECKPOINT",
    "CheckpointError",
    "EpochEntry",
    "InconsistentBrokerIdError",
    "InconsistentClusterIdError",
    "MetaProperties",
    "MetaPropertiesError",
    "PartitionMetadata",
    "check_meta_properties",
    "format_leader_epoch_checkpoint",
    "format_meta_properties",
    "format_offset_checkpoint",
    "format_partition_metadata",
    "kafka_uuid_from_str",
    "kafka_uuid_to_str",
    "read_leader_epoch_checkpoint",
    "read_meta_properties",
    "read_offset_checkpoint",
    "read_partition_metadata",
    "write_leader_epoch_checkpoint",
    "write_meta_properties",
    "write_offset_checkpoint",
    "write_partition_metadata",
]

RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
REPLICATION_CHECKPOINT = "replication-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
CLEANER_OFFSET_CHECKPOINT = "cleaner-offset-checkpoint"
LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"
PARTITION_METADATA = "partition.metadata"
META_PROPERTIES = "meta.properties"

_CHECKPOINT_VERSION = 0
_INT32 = (-(2**31), 2**31 - 1)
_INT64 = (-(2**63), 2**63 - 1)
# Java's Integer.parseInt / Long.parseLong accept an optional sign and decimal digits only.
_JAVA_INT = re.compile(r"[+-]?[0-9]+")
_WHITESPACE = re.compile(r"\s+")

PathLike = str | os.PathLike[str]
T = TypeVar("T")


class CheckpointError(OSError):
    """A checkpoint or metadata file cannot be read (Kafka raises an IOException)."""

    def __init__(self, message: str, path: PathLike, line_no: int | None = None) -> None:
        super().__init__(message)
        self.path = os.fspath(path)
        self.line_no = line_no


class MetaPropertiesError(RuntimeError):
    """meta.properties does not fit this broker; Kafka refuses to start."""


class InconsistentClusterIdError(MetaPropertiesError):
    """The stored cluster.id is not the cluster in ZooKeeper (InconsistentClusterIdException)."""


class InconsistentBrokerIdError(MetaPropertiesError):
    """The stored broker.id is not the configured one (InconsistentBrokerIdException)."""


# -- shared line handling ----------------------------------------------------------------


def _read_lines(path: PathLike) -> list[str]:
    """The file's lines as Java's BufferedReader.readLine sees them (\\n, \\r or \\r\\n)."""
    raw = Path(path).read_bytes()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise CheckpointError(f"{os.fspath(path)} is not valid UTF-8: {exc}", path) from exc
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    if lines[-1] == "":
        lines.pop()  # a terminator ends the last line; it does not start another one
    return lines


def _java_split(line: str) -> list[str]:
    """String.split("\\s+"): leading whitespace yields an empty first field, trailing none."""
    parts = _WHITESPACE.split(line)
    while parts and parts[-1] == "":
        parts.pop()
    return parts


def _parse_int(text: str, bounds: tuple[int, int]) -> int | None:
    if not _JAVA_INT.fullmatch(text):
        return None
    value = int(text)
    return value if bounds[0] <= value <= bounds[1] else None


def _malformed(
    path: PathLike, line_no: int, line: str, kind: str = "checkpoint"
) -> CheckpointError:
    return CheckpointError(
        f"malformed line {line_no} in {kind} file {os.fspath(path)}: {line!r}", path, line_no
    )


# -- version / count / entries files -------------------------------------------------------


def _read_checkpoint(path: PathLike, parse_entry: Callable[[str], T | None]) -> list[T]:
    """Kafka's CheckpointFile.read: a missing or empty file (or one with only a version
    line) holds no entries; the count line must match the number of entry lines."""
    try:
        lines = _read_lines(path)
    except FileNotFoundError:
        return []  # Kafka creates the file empty when it first opens it
    if not lines:
        return []
    version = _parse_int(lines[0], _INT32)
    if version is None:
        raise _malformed(path, 1, lines[0])
    if version != _CHECKPOINT_VERSION:
        raise CheckpointError(
            f"unrecognised version {version} in checkpoint file {os.fspath(path)}"
            f" (expected {_CHECKPOINT_VERSION})",
            path,
            1,
        )
    if len(lines) == 1:
        return []
    expected = _parse_int(lines[1], _INT32)
    if expected is None:
        raise _malformed(path, 2, lines[1])
    entries: list[T] = []
    for line_no, line in enumerate(lines[2:], start=3):
        entry = parse_entry(line)
        if entry is None:
            raise _malformed(path, line_no, line)
        entries.append(entry)
    if len(entries) != expected:
        raise CheckpointError(
            f"expected {expected} entries in checkpoint file {os.fspath(path)},"
            f" but found {len(entries)}",
            path,
        )
    return entries


def _format_checkpoint(lines: list[str]) -> bytes:
    body = [str(_CHECKPOINT_VERSION), str(len(lines)), *lines]
    return ("\n".join(body) + "\n").encode("utf-8")


def _parse_offset_entry(line: str) -> tuple[tuple[str, int], int] | None:
    parts = _java_split(line)
    if len(parts) != 3 or not parts[0]:
        return None
    partition = _parse_int(parts[1], _INT32)
    offset = _parse_int(parts[2], _INT64)
    if partition is None or offset is None:
        return None
    return (parts[0], partition), offset


def read_offset_checkpoint(path: PathLike) -> dict[tuple[str, int], int]:
    """{(topic, partition): offset}; empty for a missing or empty file."""
    return dict(_read_checkpoint(path, _parse_offset_entry))


def format_offset_checkpoint(offsets: Mapping[tuple[str, int], int]) -> bytes:
    """The file's bytes, entries in the mapping's order."""
    lines = []
    for (topic, partition), offset in offsets.items():
        if not topic or _WHITESPACE.search(topic):
            raise ValueError(f"topic {topic!r} cannot be written to an offset checkpoint")
        lines.append(f"{topic} {int(partition)} {int(offset)}")
    return _format_checkpoint(lines)


def write_offset_checkpoint(
    path: PathLike, offsets: Mapping[tuple[str, int], int], *, sync: bool = True
) -> None:
    atomic_write(path, format_offset_checkpoint(offsets), sync=sync)


class EpochEntry(NamedTuple):
    epoch: int
    start_offset: int


def _parse_epoch_entry(line: str) -> EpochEntry | None:
    parts = _java_split(line)
    if len(parts) != 2:
        return None
    epoch = _parse_int(parts[0], _INT32)
    start_offset = _parse_int(parts[1], _INT64)
    if epoch is None or start_offset is None:
        return None
    return EpochEntry(epoch, start_offset)


def read_leader_epoch_checkpoint(path: PathLike) -> list[EpochEntry]:
    """The (epoch, start_offset) entries in file order; empty for a missing or empty file."""
    return _read_checkpoint(path, _parse_epoch_entry)


def format_leader_epoch_checkpoint(entries: Iterable[tuple[int, int]]) -> bytes:
    return _format_checkpoint([f"{int(epoch)} {int(start)}" for epoch, start in entries])


def write_leader_epoch_checkpoint(
    path: PathLike, entries: Iterable[tuple[int, int]], *, sync: bool = True
) -> None:
    atomic_write(path, format_leader_epoch_checkpoint(entries), sync=sync)


# -- Kafka's Uuid text form ------------------------------------------------------------------

_UUID_TEXT = re.compile(r"[A-Za-z0-9_-]{22}(==)?")


def kafka_uuid_to_str(value: UUID) -> str:
    """Kafka's Uuid.toString: URL-safe base64 of the 16 bytes without padding (22 chars)."""
    return base64.urlsafe_b64encode(value.bytes).rstrip(b"=").decode("ascii")


def kafka_uuid_from_str(text: str) -> UUID:
    """Kafka's Uuid.fromString (which also accepts the padded 24-char form)."""
    if not _UUID_TEXT.fullmatch(text):
        raise ValueError(f"{text!r} is not a base64 Kafka Uuid")
    return UUID(bytes=base64.urlsafe_b64decode(text[:22] + "=="))


# -- partition.metadata ------------------------------------------------------------------------

_PARTITION_METADATA_VERSION = 0
_KEY_VALUE = re.compile(r":\s+")


class PartitionMetadata(NamedTuple):
    version: int
    topic_id: UUID


def format_partition_metadata(topic_id: UUID) -> bytes:
    # Kafka writes exactly these two lines and no final newline.
    text = f"version: {_PARTITION_METADATA_VERSION}\ntopic_id: {kafka_uuid_to_str(topic_id)}"
    return text.encode("utf-8")


def write_partition_metadata(path: PathLike, topic_id: UUID, *, sync: bool = True) -> None:
    if topic_id.int == 0:
        raise ValueError("the zero topic id cannot be written to partition.metadata")
    atomic_write(path, format_partition_metadata(topic_id), sync=sync)


def read_partition_metadata(path: PathLike) -> PartitionMetadata:
    """Read partition.metadata; FileNotFoundError if absent, CheckpointError if damaged.

    Like Kafka, any version >= 0 is accepted (downgrade compatibility) and the zero topic
    id is rejected.
    """
    lines = _read_lines(path)
    version_text = _metadata_value(path, lines, 0, "version")
    version = _parse_int(version_text, _INT32)
    if version is None:
        raise _malformed(path, 1, lines[0], "partition metadata")
    if version < _PARTITION_METADATA_VERSION:
        raise CheckpointError(
            f"unrecognised version {version} of partition metadata file {os.fspath(path)}",
            path,
            1,
        )
    try:
        topic_id = kafka_uuid_from_str(_metadata_value(path, lines, 1, "topic_id"))
    except ValueError as exc:
        raise _malformed(path, 2, lines[1], "partition metadata") from exc
    if topic_id.int == 0:
        raise CheckpointError(f"invalid topic id in partition metadata file {path}", path, 2)
    return PartitionMetadata(version, topic_id)


def _metadata_value(path: PathLike, lines: list[str], index: int, key: str) -> str:
    if index >= len(lines):
        raise CheckpointError(
            f"partition metadata file {os.fspath(path)} ends before its {key!r} line",
            path,
            index + 1,
        )
    parts = _KEY_VALUE.split(lines[index], maxsplit=1)
    if len(parts) != 2 or parts[0] != key:
        raise _malformed(path, index + 1, lines[index], "partition metadata")
    return parts[1]


# -- meta.properties --------------------------------------------------------------------------


@dataclass(frozen=True)
class MetaProperties:
    """A log dir's identity. `broker_id` is `broker.id` in version 0, `node.id` in 1 and 2."""

    version: int = 0
    broker_id: int | None = None
    cluster_id: str | None = None
    directory_id: UUID | None = None

    def to_properties(self) -> dict[str, str]:
        props = {"version": str(self.version)}
        if self.cluster_id is not None:
            props["cluster.id"] = self.cluster_id
        if self.broker_id is not None:
            props["broker.id" if self.version == 0 else "node.id"] = str(self.broker_id)
        if self.directory_id is not None:
            props["directory.id"] = kafka_uuid_to_str(self.directory_id)
        return props


def _meta_path(log_dir_or_file: PathLike) -> str:
    path = os.fspath(log_dir_or_file)
    return os.path.join(path, META_PROPERTIES) if os.path.isdir(path) else path


def read_meta_properties(log_dir_or_file: PathLike) -> MetaProperties | None:
    """meta.properties of a log dir (or the file itself); None if there is none yet."""
    path = _meta_path(log_dir_or_file)
    try:
        props = properties.load(path)  # ISO-8859-1, as Properties.load(InputStream)
    except FileNotFoundError:
        return None
    except properties.PropertiesError as exc:
        raise CheckpointError(f"{path}: {exc}", path, exc.line) from exc
    return _meta_from_properties(path, props)


def _meta_from_properties(path: str, props: Mapping[str, str]) -> MetaProperties:
    version = _parse_int(props.get("version", "0").strip(), _INT32)
    if version not in (0, 1, 2):
        raise CheckpointError(f"unknown version {props.get('version')!r} in {path}", path)
    id_key = "broker.id" if version == 0 else "node.id"
    broker_id = None
    if id_key in props:
        broker_id = _parse_int(props[id_key], _INT32)
        if broker_id is None:
            raise CheckpointError(f"{id_key} in {path} is not a base-10 int32", path)
    elif version != 0:
        raise CheckpointError(f"{path} has version {version} but no {id_key}", path)
    directory_id = None
    if "directory.id" in props:
        try:
            directory_id = kafka_uuid_from_str(props["directory.id"])
        except ValueError as exc:
            raise CheckpointError(f"directory.id in {path} is not a Uuid: {exc}", path) from exc
    return MetaProperties(version, broker_id, props.get("cluster.id"), directory_id)


def format_meta_properties(meta: MetaProperties, now: datetime | None = None) -> bytes:
    """Kafka writes it with Properties.store(writer, ""): a `#` line, then the date line."""
    return properties.dumps(meta.to_properties(), comments="", now=now).encode("latin-1")


def write_meta_properties(
    log_dir: PathLike, meta: MetaProperties, *, now: datetime | None = None, sync: bool = True
) -> None:
    atomic_write(
        os.path.join(log_dir, META_PROPERTIES), format_meta_properties(meta, now), sync=sync
    )


def check_meta_properties(
    log_dir: PathLike, broker_id: int, cluster_id: str
) -> MetaProperties | None:
    """Refuse a log dir that belongs to another broker or cluster (ZooKeeper mode rules).

    Returns the stored properties, or None for a dir without meta.properties (the caller
    writes one). A negative `broker_id` means "not configured" and matches any stored id.
    """
    path = _meta_path(log_dir)
    meta = read_meta_properties(path)
    if meta is None:
        return None
    if meta.version != 0:
        raise MetaPropertiesError(
            f"{path} has version {meta.version}, but a ZooKeeper-mode broker only supports"
            " version 0 (also implied when the version key is missing)"
        )
    if meta.cluster_id is not None and meta.cluster_id != cluster_id:
        raise InconsistentClusterIdError(
            f"cluster id {cluster_id} from ZooKeeper differs from cluster.id {meta.cluster_id}"
            f" stored in {path}: this broker is joining the wrong cluster (check"
            " zookeeper.connect and its chroot)"
        )
    if broker_id >= 0 and meta.broker_id is not None and meta.broker_id != broker_id:
        raise InconsistentBrokerIdError(
            f"configured broker.id {broker_id} differs from broker.id {meta.broker_id} stored in"
            f" {path}. If the data was moved here, configure the matching broker.id; to start"
            " a new broker, empty the log directories (log.dirs) first"
        )
    return meta
