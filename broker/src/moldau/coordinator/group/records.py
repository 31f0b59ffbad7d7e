"""The records of `__consumer_offsets` in Kafka's key/value schemas (group-coordinator
JSON), so tools that read the topic understand what Moldau writes.

A key is an int16 schema version followed by the key struct: versions 0 and 1 are an
OffsetCommitKey (group, topic, partition), version 2 a GroupMetadataKey (group); later
versions belong to the KIP-848 and share-group records, which the classic coordinator
skips. A value carries its own int16 version; a null value is a tombstone. Kafka 3.9 in
ZooKeeper mode writes OffsetCommitKey v1, OffsetCommitValue v3 (v1 when the commit
carries an explicit expire timestamp), GroupMetadataKey v2 and GroupMetadataValue v3.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import TypeVar

from moldau.protocol._runtime import Message
from moldau.protocol.generated.group_metadata_key import GroupMetadataKey
from moldau.protocol.generated.group_metadata_value import GroupMetadataValue
from moldau.protocol.generated.offset_commit_key import OffsetCommitKey
from moldau.protocol.generated.offset_commit_value import OffsetCommitValue

_VERSION = struct.Struct(">h")
OFFSET_KEY_VERSION = 1
GROUP_KEY_VERSION = 2
OFFSET_VALUE_VERSION = 3
OFFSET_VALUE_VERSION_WITH_EXPIRY = 1
GROUP_VALUE_VERSION = 3

TopicPartition = tuple[str, int]  # (topic, partition) of a committed offset


@dataclass(frozen=True, slots=True)
class OffsetKey:
    group: str
    topic: str
    partition: int


@dataclass(frozen=True, slots=True)
class GroupKey:
    group: str


@dataclass(slots=True)
class OffsetAndMetadata:
    offset: int
    leader_epoch: int = -1  # -1: none
    metadata: str = ""
    commit_timestamp: int = 0
    expire_timestamp: int | None = None  # set only by OffsetCommit v2-v4 retention_time_ms


@dataclass(slots=True)
class MemberRecord:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout: int
    session_timeout: int
    subscription: bytes
    assignment: bytes


@dataclass(slots=True)
class GroupRecord:
    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp: int
    members: list[MemberRecord] = field(default_factory=list)


class RecordFormatError(ValueError):
    """A record of __consumer_offsets that does not decode."""


def java_string_hash(text: str) -> int:
    """Java's String.hashCode (over UTF-16 code units), as a signed 32-bit int."""
    h = 0
    data = text.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + (data[i] << 8 | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def partition_for(group_id: str, partitions: int) -> int:
    """The __consumer_offsets partition of a group: Kafka's Utils.abs(hashCode) % count,
    where Utils.abs maps Integer.MIN_VALUE to 0."""
    h = java_string_hash(group_id)
    return (0 if h == -(1 << 31) else abs(h)) % partitions


# --- encoding -----------------------------------------------------------------------------

def offset_commit_key(group: str, topic: str, partition: int) -> bytes:
    key = OffsetCommitKey(group=group, topic=topic, partition=partition)
    return _VERSION.pack(OFFSET_KEY_VERSION) + key.encode(OFFSET_KEY_VERSION)


def group_metadata_key(group: str) -> bytes:
    return _VERSION.pack(GROUP_KEY_VERSION) + GroupMetadataKey(group=group).encode(
        GROUP_KEY_VERSION)


def offset_commit_value(offset: OffsetAndMetadata) -> bytes:
    if offset.expire_timestamp is not None:
        version = OFFSET_VALUE_VERSION_WITH_EXPIRY
        value = OffsetCommitValue(offset=offset.offset, metadata=offset.metadata,
                                  commit_timestamp=offset.commit_timestamp,
                                  expire_timestamp=offset.expire_timestamp)
    else:
        version = OFFSET_VALUE_VERSION
        value = OffsetCommitValue(offset=offset.offset, leader_epoch=offset.leader_epoch,
                                  metadata=offset.metadata,
                                  commit_timestamp=offset.commit_timestamp)
    return _VERSION.pack(version) + value.encode(version)


def group_metadata_value(group: GroupRecord) -> bytes:
    members = [
        GroupMetadataValue.MemberMetadata(
            member_id=m.member_id, group_instance_id=m.group_instance_id,
            client_id=m.client_id, client_host=m.client_host,
            rebalance_timeout=m.rebalance_timeout, session_timeout=m.session_timeout,
            subscription=m.subscription, assignment=m.assignment)
        for m in group.members
    ]
    value = GroupMetadataValue(protocol_type=group.protocol_type, generation=group.generation,
                               protocol=group.protocol, leader=group.leader,
                               current_state_timestamp=group.current_state_timestamp,
                               members=members)
    return _VERSION.pack(GROUP_VALUE_VERSION) + value.encode(GROUP_VALUE_VERSION)


# --- decoding -----------------------------------------------------------------------------

def _split(data: bytes | memoryview, what: str) -> tuple[int, memoryview]:
    if len(data) < 2:
        raise RecordFormatError(f"a {what} of {len(data)} bytes has no version")
    view = memoryview(data)
    return _VERSION.unpack_from(view)[0], view[2:]


def read_key(data: bytes | memoryview | None) -> OffsetKey | GroupKey | None:
    """The key of a record; None for the record types the classic coordinator does not
    keep (KIP-848 consumer groups, share groups)."""
    if data is None:
        raise RecordFormatError("a record of __consumer_offsets has a null key")
    version, body = _split(data, "key")
    try:
        if version in (0, 1):
            key = OffsetCommitKey.decode(body, version)
            return OffsetKey(key.group, key.topic, key.partition)
        if version == GROUP_KEY_VERSION:
            return GroupKey(GroupMetadataKey.decode(body, version).group)
    except Exception as exc:
        raise RecordFormatError(f"key v{version} does not decode: {exc}") from exc
    if version < 0:
        raise RecordFormatError(f"unknown key version {version}")
    return None


_MessageT = TypeVar("_MessageT", bound=Message)


def _read_value(data: bytes | memoryview, message: type[_MessageT], what: str
                ) -> tuple[int, _MessageT]:
    version, body = _split(data, what)
    if not 0 <= version <= 4:
        raise RecordFormatError(f"unknown {what} version {version}")
    try:
        return version, message.decode(body, version)
    except Exception as exc:
        raise RecordFormatError(f"{what} v{version} does not decode: {exc}") from exc


def read_offset_value(data: bytes | memoryview | None) -> OffsetAndMetadata | None:
    """The committed offset of a value; None for a tombstone."""
    if data is None:
        return None
    version, value = _read_value(data, OffsetCommitValue, "offset value")
    expire = value.expire_timestamp if version == 1 else None
    return OffsetAndMetadata(value.offset, value.leader_epoch, value.metadata,
                             value.commit_timestamp, expire)


def read_group_value(data: bytes | memoryview | None) -> GroupRecord | None:
    """The group metadata of a value; None for a tombstone."""
    if data is None:
        return None
    version, value = _read_value(data, GroupMetadataValue, "group value")
    members = [
        MemberRecord(m.member_id, m.group_instance_id, m.client_id, m.client_host,
                     m.rebalance_timeout if version >= 1 else m.session_timeout,
                     m.session_timeout, bytes(m.subscription), bytes(m.assignment))
        for m in value.members
    ]
    return GroupRecord(value.protocol_type, value.generation, value.protocol, value.leader,
                       value.current_state_timestamp, members)
