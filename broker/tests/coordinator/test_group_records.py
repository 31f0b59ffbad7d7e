"""The __consumer_offsets record codec: Kafka's byte layouts, versions and partitioning."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from moldau.coordinator.group.records import (
    GroupKey,
    GroupRecord,
    MemberRecord,
    OffsetAndMetadata,
    OffsetKey,
    RecordFormatError,
    group_metadata_key,
    group_metadata_value,
    java_string_hash,
    offset_commit_key,
    offset_commit_value,
    partition_for,
    read_group_value,
    read_key,
    read_offset_value,
)


def _string(text: str) -> bytes:
    data = text.encode()
    return struct.pack(">h", len(data)) + data


def test_offset_commit_key_is_version_1_with_group_topic_partition() -> None:
    key = offset_commit_key("group", "topic", 7)
    assert key == struct.pack(">h", 1) + _string("group") + _string("topic") + struct.pack(
        ">i", 7)
    assert read_key(key) == OffsetKey("group", "topic", 7)


def test_group_metadata_key_is_version_2() -> None:
    key = group_metadata_key("g")
    assert key == struct.pack(">h", 2) + _string("g")
    assert read_key(key) == GroupKey("g")


def test_offset_value_v3_layout_and_v1_with_an_expire_timestamp() -> None:
    v3 = offset_commit_value(OffsetAndMetadata(42, 5, "meta", 1000))
    assert v3 == (struct.pack(">hqi", 3, 42, 5) + _string("meta") + struct.pack(">q", 1000))
    v1 = offset_commit_value(OffsetAndMetadata(42, 5, "meta", 1000, expire_timestamp=2000))
    assert v1 == struct.pack(">hq", 1, 42) + _string("meta") + struct.pack(">qq", 1000, 2000)
    assert read_offset_value(v1) == OffsetAndMetadata(42, -1, "meta", 1000, 2000)
    assert read_offset_value(None) is None


def test_older_offset_value_versions_decode() -> None:
    v0 = struct.pack(">hq", 0, 9) + _string("") + struct.pack(">q", 77)
    assert read_offset_value(v0) == OffsetAndMetadata(9, -1, "", 77, None)


def test_group_value_round_trip_v3() -> None:
    record = GroupRecord("consumer", 4, "range", "m-1", 123, [
        MemberRecord("m-1", "instance-a", "client", "/127.0.0.1", 300000, 10000, b"sub",
                     b"assign"),
        MemberRecord("m-2", None, "client", "/127.0.0.1", 300000, 10000, b"", b""),
    ])
    value = group_metadata_value(record)
    assert struct.unpack_from(">h", value)[0] == 3
    assert read_group_value(value) == record


def test_group_value_v0_takes_the_session_timeout_as_rebalance_timeout() -> None:
    v0 = (struct.pack(">h", 0) + _string("consumer") + struct.pack(">i", 2)
          + _string("range") + _string("m") + struct.pack(">i", 1) + _string("m")
          + _string("c") + _string("/h") + struct.pack(">i", 5000)
          + struct.pack(">i", 1) + b"s" + struct.pack(">i", 1) + b"a")
    group = read_group_value(v0)
    assert group is not None
    assert group.members[0].rebalance_timeout == 5000
    assert group.members[0].subscription == b"s" and group.members[0].assignment == b"a"


def test_unknown_and_malformed_keys() -> None:
    assert read_key(struct.pack(">h", 3) + b"anything") is None  # KIP-848 records
    with pytest.raises(RecordFormatError):
        read_key(b"\x00")
    with pytest.raises(RecordFormatError):
        read_key(struct.pack(">h", 1) + b"\x00\x05ab")
    with pytest.raises(RecordFormatError):
        read_key(None)
    with pytest.raises(RecordFormatError):
        read_offset_value(struct.pack(">h", 9) + b"\x00" * 20)


def test_java_string_hash_and_the_partition_of_a_group() -> None:
    assert java_string_hash("") == 0
    assert java_string_hash("hello") == 99162322
    assert java_string_hash("Aa") == java_string_hash("BB") == 2112
    assert java_string_hash("polygenelubricants") == -2147483648  # Integer.MIN_VALUE
    assert partition_for("polygenelubricants", 50) == 0  # Kafka's Utils.abs(MIN) is 0
    assert java_string_hash("\U0001F600") == 1772899  # a surrogate pair hashes per unit
    assert partition_for("hello", 50) == 99162322 % 50


@given(st.text(max_size=20), st.text(max_size=20), st.integers(0, 2**31 - 1),
       st.integers(-1, 2**63 - 1), st.text(max_size=50))
def test_offset_records_round_trip(group: str, topic: str, partition: int, offset: int,
                                   metadata: str) -> None:
    assert read_key(offset_commit_key(group, topic, partition)) == OffsetKey(group, topic,
                                                                             partition)
    value = OffsetAndMetadata(offset, 3, metadata, 17)
    assert read_offset_value(offset_commit_value(value)) == value
