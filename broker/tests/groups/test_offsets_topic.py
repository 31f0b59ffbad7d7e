"""`__consumer_offsets` as Kafka 3.9 makes and writes it: created on first use (internal,
compacted, offsets.topic.num.partitions partitions; not at all when its replication factor
cannot be met), each group's records in partition abs(javaHashCode(group)) % partitions,
records that decode with a decoder written here from the group-coordinator JSON schemas
(OffsetCommitKey/Value, GroupMetadataKey/Value; not Moldau's codec), tombstones after
DeleteGroups and offset expiry."""

from __future__ import annotations

import struct
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from broker.raw import connect, create_topic, metadata, server_log
from kafka import KafkaConsumer, TopicPartition

from moldau.client.blocking import BlockingConnection
from moldau.devcluster.brokers import BrokerProcess
from moldau.protocol.generated.describe_configs_request import DescribeConfigsRequest
from moldau.protocol.generated.find_coordinator_request import FindCoordinatorRequest

from .conftest import start_group_broker
from .group_raw import (
    DESCRIBE_CONFIGS,
    FIND_COORDINATOR,
    NONE,
    NOT_COORDINATOR,
    OFFSETS_PARTITIONS,
    Member,
    assignment,
    commit,
    committed,
    delete_groups,
    ensure_coordinator,
    find_coordinator,
    form_group,
    group_name,
    java_hash,
    leave,
    list_groups,
    partition_for,
    subscription,
    wait_for,
)

OFFSETS = "__consumer_offsets"
COORDINATOR_NOT_AVAILABLE, UNKNOWN_TOPIC_OR_PARTITION = 15, 3
TOPIC_CONFIG_SOURCE = 1  # DescribeConfigs: DYNAMIC_TOPIC_CONFIG
TOPIC = "topic-a"


# ---- an independent decoder for the group-coordinator records

class _Reader:
    """Reads the schema types: fixed-width ints, (compact) strings and bytes, arrays,
    tagged fields (flexible versions)."""

    def __init__(self, data: bytes) -> None:
        self.data, self.pos = data, 0

    def take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise ValueError(f"{n} bytes at {self.pos} of {len(self.data)}")
        out = self.data[self.pos:self.pos + n]
        self.pos += n
        return out

    def int16(self) -> int:
        return int(struct.unpack(">h", self.take(2))[0])

    def int32(self) -> int:
        return int(struct.unpack(">i", self.take(4))[0])

    def int64(self) -> int:
        return int(struct.unpack(">q", self.take(8))[0])

    def uvarint(self) -> int:
        value = shift = 0
        while True:
            byte = self.take(1)[0]
            value |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return value
            shift += 7

    def _length(self, flexible: bool, wide: bool) -> int:
        # compact forms store length + 1 (0 = null); classic strings int16, bytes int32
        if flexible:
            return self.uvarint() - 1
        return self.int32() if wide else self.int16()

    def string(self, flexible: bool) -> str:
        n = self._length(flexible, wide=False)
        if n < 0:
            raise ValueError("null in a non-nullable string")
        return self.take(n).decode()

    def nullable_string(self, flexible: bool) -> str | None:
        n = self._length(flexible, wide=False)
        return None if n < 0 else self.take(n).decode()

    def bytes(self, flexible: bool) -> bytes:
        n = self._length(flexible, wide=True)
        if n < 0:
            raise ValueError("null in non-nullable bytes")
        return self.take(n)

    def array_length(self, flexible: bool) -> int:
        n = self._length(flexible, wide=True)
        if n < 0:
            raise ValueError("null array")
        return n

    def tagged_fields(self) -> None:
        for _ in range(self.uvarint()):  # none of these schemas has tagged fields: skip
            self.uvarint()
            self.take(self.uvarint())

    def done(self) -> None:
        if self.pos != len(self.data):
            raise ValueError(f"{len(self.data) - self.pos} bytes left over")


@dataclass
class OffsetKey:
    version: int
    group: str
    topic: str
    partition: int


@dataclass
class GroupKey:
    version: int
    group: str


@dataclass
class OffsetValue:
    version: int
    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp: int
    expire_timestamp: int


@dataclass
class MemberValue:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout: int
    session_timeout: int
    subscription: bytes
    assignment: bytes


@dataclass
class GroupValue:
    version: int
    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp: int
    members: list[MemberValue] = field(default_factory=list)


def decode_key(data: bytes) -> OffsetKey | GroupKey | None:
    """OffsetCommitKey (versions 0-1) or GroupMetadataKey (version 2); keys of other
    record types (the KIP-848 and share-group ones, versions 3+) are None."""
    r = _Reader(data)
    version = r.int16()
    key: OffsetKey | GroupKey
    if version in (0, 1):  # key schemas are never flexible
        key = OffsetKey(version, r.string(False), r.string(False), r.int32())
    elif version == 2:
        key = GroupKey(version, r.string(False))
    else:
        return None
    r.done()
    return key


def decode_offset_value(data: bytes) -> OffsetValue:
    """OffsetCommitValue v0-v4 (v4+ flexible)."""
    r = _Reader(data)
    version = r.int16()
    if not 0 <= version <= 4:
        raise ValueError(f"OffsetCommitValue version {version}")
    flexible = version >= 4
    offset = r.int64()
    leader_epoch = r.int32() if version >= 3 else -1
    meta = r.string(flexible)
    commit_timestamp = r.int64()
    expire_timestamp = r.int64() if version == 1 else -1
    if flexible:
        r.tagged_fields()
    r.done()
    return OffsetValue(version, offset, leader_epoch, meta, commit_timestamp, expire_timestamp)


def decode_group_value(data: bytes) -> GroupValue:
    """GroupMetadataValue v0-v4 (v4+ flexible) with its MemberMetadata structs."""
    r = _Reader(data)
    version = r.int16()
    if not 0 <= version <= 4:
        raise ValueError(f"GroupMetadataValue version {version}")
    flexible = version >= 4
    value = GroupValue(version, r.string(flexible), r.int32(), r.nullable_string(flexible),
                       r.nullable_string(flexible), r.int64() if version >= 2 else -1)
    for _ in range(r.array_length(flexible)):
        member_id = r.string(flexible)
        instance_id = r.nullable_string(flexible) if version >= 3 else None
        client_id, client_host = r.string(flexible), r.string(flexible)
        rebalance_timeout = r.int32() if version >= 1 else -1
        value.members.append(MemberValue(member_id, instance_id, client_id, client_host,
                                         rebalance_timeout, r.int32(), r.bytes(flexible),
                                         r.bytes(flexible)))
        if flexible:
            r.tagged_fields()
    if flexible:
        r.tagged_fields()
    r.done()
    return value


@dataclass
class Record:
    partition: int
    offset: int
    key: OffsetKey | GroupKey
    value: OffsetValue | GroupValue | None  # None: a tombstone


def read_offsets_topic(broker: BrokerProcess) -> list[Record]:
    """Every group-coordinator record of __consumer_offsets, decoded, in log order per
    partition; read with a plain consumer (kafka-python, no group) from the beginning."""
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id=None,
                             enable_auto_commit=False, request_timeout_ms=10_000)
    try:
        parts = [TopicPartition(OFFSETS, p) for p in range(OFFSETS_PARTITIONS)]
        consumer.assign(parts)
        consumer.seek_to_beginning(*parts)
        end = consumer.end_offsets(parts)
        raw: list[Any] = []
        deadline = time.monotonic() + 10
        while any(consumer.position(tp) < end[tp] for tp in parts):
            assert time.monotonic() < deadline, f"could not read {OFFSETS} to {end}"
            for batch in consumer.poll(timeout_ms=200).values():
                raw.extend(batch)
    finally:
        consumer.close()
    records = []
    for m in sorted(raw, key=lambda m: (m.partition, m.offset)):
        key = decode_key(m.key)
        if key is None:
            continue
        value: OffsetValue | GroupValue | None = None
        if m.value is not None:
            value = (decode_offset_value(m.value) if isinstance(key, OffsetKey)
                     else decode_group_value(m.value))
        records.append(Record(m.partition, m.offset, key, value))
    return records


def of_group(records: list[Record], group: str) -> list[Record]:
    return [r for r in records if r.key.group == group]


# ---- fixtures

@dataclass
class FirstUse:
    before: Any  # the Metadata topic answer for __consumer_offsets before any group use


@pytest.fixture(scope="module")
def first_use(broker: BrokerProcess) -> Iterator[FirstUse]:
    """The module broker's offsets topic, made by the first FindCoordinator; what
    Metadata said before (no group request reaches this broker earlier)."""
    with connect(broker) as conn:
        before = metadata(conn, [OFFSETS], allow_auto_topic_creation=False).topics[0]
        create_topic(conn, TOPIC, partitions=3)
        ensure_coordinator(conn)
    yield FirstUse(before)
    log = server_log(broker)
    assert "Traceback" not in log, log[-5000:]


@pytest.fixture
def conn(broker: BrokerProcess, first_use: FirstUse) -> Iterator[BlockingConnection]:
    with connect(broker) as c:
        yield c


# ---- the topic

def test_offsets_topic_is_made_on_first_use(broker: BrokerProcess, first_use: FirstUse,
                                            conn: BlockingConnection) -> None:
    # Kafka 3.9 (KafkaApis.getTopicMetadata): without auto-creation an absent topic is
    # UNKNOWN_TOPIC_OR_PARTITION, internal ones included (flagged internal even then)
    assert first_use.before.error_code == UNKNOWN_TOPIC_OR_PARTITION, first_use.before
    assert first_use.before.is_internal is True, first_use.before
    answer = metadata(conn, None)  # all topics: the internal one is listed, and marked
    topic = next(t for t in answer.topics if t.name == OFFSETS)
    assert topic.error_code == NONE and topic.is_internal is True, topic
    assert sorted(p.partition_index for p in topic.partitions) == list(range(
        OFFSETS_PARTITIONS))
    assert {(p.leader_id, tuple(p.replica_nodes)) for p in topic.partitions} == {(1, (1,))}
    assert not next(t for t in answer.topics if t.name == TOPIC).is_internal

    configs = conn.request(DESCRIBE_CONFIGS, 4, DescribeConfigsRequest(
        resources=[DescribeConfigsRequest.DescribeConfigsResource(
            resource_type=2, resource_name=OFFSETS, configuration_keys=None)],
        include_synonyms=False, include_documentation=False)).results[0]
    assert configs.error_code == NONE, configs
    entries = {c.name: c for c in configs.configs}
    # GroupCoordinator.offsetsTopicConfigs: set on the topic when it is made
    for name, value in (("cleanup.policy", "compact"), ("compression.type", "producer"),
                        ("segment.bytes", str(100 * 1024 * 1024))):
        assert (entries[name].value, entries[name].config_source) == (
            value, TOPIC_CONFIG_SOURCE), entries[name]

    group = group_name("find")
    for version in (0, 3):
        found = find_coordinator(conn, group, version)
        assert (found.error_code, found.node_id, found.port) == (NONE, 1, broker.port)


def test_group_and_offset_records_decode(broker: BrokerProcess,
                                         conn: BlockingConnection) -> None:
    group = group_name("records")
    dynamic = Member(broker, group, client_id="client-d", topics=[TOPIC])
    static = Member(broker, group, client_id="client-s", topics=[TOPIC],
                    instance_id="instance-s")
    plans = {0: assignment({TOPIC: [0, 1]}), 1: assignment({TOPIC: [2]})}
    try:
        started = int(time.time() * 1000)
        form_group(conn, [dynamic, static], plans)
        assert commit(conn, group, {(TOPIC, 0): 100, (TOPIC, 1): 101},
                      generation=dynamic.generation, member_id=dynamic.member_id,
                      metadata={(TOPIC, 0): "meta-0", (TOPIC, 1): ""},
                      leader_epoch=7) == {(TOPIC, 0): NONE, (TOPIC, 1): NONE}
        finished = int(time.time() * 1000)
        generation = dynamic.generation
        records = of_group(read_offsets_topic(broker), group)

        # every record of the group is in its coordinator partition
        assert {r.partition for r in records} == {partition_for(group)}, records
        groups = [r for r in records if isinstance(r.key, GroupKey)]
        offsets = [r for r in records if isinstance(r.key, OffsetKey)]
        assert {r.key.version for r in groups} == {2}
        assert {r.key.version for r in offsets} == {1}

        latest = groups[-1].value
        assert isinstance(latest, GroupValue), groups
        assert latest.version == 3
        assert (latest.protocol_type, latest.generation, latest.protocol, latest.leader) == (
            "consumer", generation, "range", dynamic.member_id), latest
        assert started - 1000 <= latest.current_state_timestamp <= finished + 1000, latest
        members = {m.member_id: m for m in latest.members}
        assert set(members) == {dynamic.member_id, static.member_id}
        for m, instance, plan in ((dynamic, None, plans[0]), (static, "instance-s", plans[1])):
            stored = members[m.member_id]
            assert (stored.group_instance_id, stored.client_id, stored.client_host) == (
                instance, m.client_id, "/127.0.0.1"), stored
            assert (stored.session_timeout, stored.rebalance_timeout) == (
                m.session_ms, m.rebalance_ms), stored
            assert (stored.subscription, stored.assignment) == (subscription([TOPIC]), plan)

        by_partition = {r.key.partition: r for r in offsets if r.key.topic == TOPIC}
        assert set(by_partition) == {0, 1}
        for partition, offset, meta in ((0, 100, "meta-0"), (1, 101, "")):
            value = by_partition[partition].value
            assert isinstance(value, OffsetValue)
            assert (value.version, value.offset, value.metadata, value.leader_epoch) == (
                3, offset, meta, 7), value
            assert started <= value.commit_timestamp <= finished + 1000, value

        # the members leave, the group is deleted: its records get tombstones
        answer = leave(conn, group, [(dynamic.member_id, None),
                                     (static.member_id, "instance-s")])
        assert [m.error_code for m in answer.members] == [NONE, NONE], answer
        assert delete_groups(conn, [group]) == {group: NONE}
    finally:
        dynamic.close()
        static.close()

    def tombstoned() -> list[Record] | None:
        records = of_group(read_offsets_topic(broker), group)
        last = {_identity(r.key): r for r in records}  # the last record of each key
        return records if last and all(r.value is None for r in last.values()) else None

    records = wait_for(tombstoned, f"tombstones for every key of {group}")
    assert {r.partition for r in records} == {partition_for(group)}
    keys = {_identity(r.key) for r in records}
    assert keys == {("group", group), ("offset", group, TOPIC, 0),
                    ("offset", group, TOPIC, 1)}, keys
    # before its tombstone: the group emptied by the leave, one generation later
    values = [r.value for r in records if isinstance(r.key, GroupKey)]
    empty = values[-2]
    assert isinstance(empty, GroupValue), values
    assert (empty.protocol_type, empty.generation, empty.protocol, empty.leader,
            empty.members) == ("consumer", generation + 1, None, None, []), empty


def _identity(key: OffsetKey | GroupKey) -> tuple[Any, ...]:
    if isinstance(key, GroupKey):
        return ("group", key.group)
    return ("offset", key.group, key.topic, key.partition)


def test_coordinator_partition_is_the_java_hash(broker: BrokerProcess,
                                               conn: BlockingConnection) -> None:
    # "polygenelubricants".hashCode() is Integer.MIN_VALUE: Kafka's Utils.abs makes it
    # 0 (partition 0), where a plain abs() would give 2147483648 % 5 = 3
    special = "polygenelubricants"
    assert java_hash(special) == -(1 << 31) and partition_for(special) == 0
    groups = [special] + [group_name(f"hash-{i}") for i in range(8)]
    assert len({partition_for(g) for g in groups}) >= 3, "spread over partitions"
    for i, group in enumerate(groups):
        found = find_coordinator(conn, group)
        assert (found.error_code, found.node_id) == (NONE, 1), found
        assert commit(conn, group, {(TOPIC, 0): i}) == {(TOPIC, 0): NONE}
    records = read_offsets_topic(broker)
    for i, group in enumerate(groups):
        mine = of_group(records, group)
        assert {r.partition for r in mine} == {partition_for(group)}, (group, mine)
        assert [(r.key.topic, r.key.partition, r.value.offset) for r in mine
                if isinstance(r.key, OffsetKey) and isinstance(r.value, OffsetValue)] == [
            (TOPIC, 0, i)]


def test_decoder_reads_every_schema_version() -> None:
    # the decoder itself, on bytes laid out by hand from the JSON schemas, so the
    # versions the broker does not write (v0, v2, v4) are read right too
    def s(text: str) -> bytes:
        return struct.pack(">h", len(text)) + text.encode()

    def cs(text: str | None) -> bytes:  # compact (nullable) string / bytes
        return b"\x00" if text is None else bytes([len(text) + 1]) + text.encode()

    assert decode_key(struct.pack(">h", 0) + s("g") + s("t") + struct.pack(">i", 4)) == \
        OffsetKey(0, "g", "t", 4)
    assert decode_key(struct.pack(">h", 2) + s("g")) == GroupKey(2, "g")
    assert decode_key(struct.pack(">h", 5) + s("x")) is None
    values = {
        0: struct.pack(">hq", 0, 9) + s("m") + struct.pack(">q", 11),
        1: struct.pack(">hq", 1, 9) + s("m") + struct.pack(">qq", 11, 12),
        2: struct.pack(">hq", 2, 9) + s("m") + struct.pack(">q", 11),
        3: struct.pack(">hqi", 3, 9, 5) + s("m") + struct.pack(">q", 11),
        # flexible: compact string, then tagged fields (one unknown tag, skipped)
        4: struct.pack(">hqi", 4, 9, 5) + cs("m") + struct.pack(">q", 11) + b"\x01\x07\x02ab",
    }
    for version, data in values.items():
        value = decode_offset_value(data)
        assert (value.version, value.offset, value.metadata, value.commit_timestamp) == (
            version, 9, "m", 11)
        assert value.leader_epoch == (5 if version >= 3 else -1)
        assert value.expire_timestamp == (12 if version == 1 else -1)

    def member(version: int) -> bytes:
        if version >= 4:
            return (cs("id") + cs(None) + cs("c") + cs("h") + struct.pack(">ii", 3, 4)
                    + cs("S") + cs("A") + b"\x00")
        out = s("id") + (struct.pack(">h", -1) if version >= 3 else b"") + s("c") + s("h")
        out += struct.pack(">i", 3) if version >= 1 else b""
        return out + struct.pack(">ii", 4, 1) + b"S" + struct.pack(">i", 1) + b"A"

    for version in range(5):
        if version >= 4:
            data = (struct.pack(">h", 4) + cs("consumer") + struct.pack(">i", 6) + cs(None)
                    + cs("L") + struct.pack(">q", 8) + b"\x02" + member(4) + b"\x00")
        else:
            data = (struct.pack(">h", version) + s("consumer") + struct.pack(">ih", 6, -1)
                    + s("L") + (struct.pack(">q", 8) if version >= 2 else b"")
                    + struct.pack(">i", 1) + member(version))
        value = decode_group_value(data)
        assert (value.protocol_type, value.generation, value.protocol, value.leader) == (
            "consumer", 6, None, "L"), version
        assert value.current_state_timestamp == (8 if version >= 2 else -1)
        assert value.members == [MemberValue("id", None, "c", "h", 3 if version >= 1 else -1,
                                             4, b"S", b"A")], version
    with pytest.raises(ValueError):
        decode_offset_value(values[3] + b"\x00")  # trailing bytes are an error


# ---- private brokers

def test_expired_offsets_go_and_their_empty_groups_with_them(
        tmp_path_factory: pytest.TempPathFactory, zk_ensemble: Any) -> None:
    # offsets.retention.minutes cannot go below 1 (Kafka: atLeast(1)); a commit expires
    # sooner by an explicit retention (OffsetCommit v2-v4 retention_time_ms: expire
    # timestamp = now + retention) or by a commit timestamp in the past (v1: the
    # retention counts from it)
    process = start_group_broker(tmp_path_factory, zk_ensemble.connect_string, **{
        "offsets.retention.minutes": "1", "offsets.retention.check.interval.ms": "500"})
    try:
        with connect(process) as conn:
            create_topic(conn, TOPIC, partitions=1)
            ensure_coordinator(conn)
            retained, dated, kept = (group_name("exp-retention"), group_name("exp-dated"),
                                     group_name("exp-kept"))
            tp = (TOPIC, 0)
            now = int(time.time() * 1000)
            assert commit(conn, retained, {tp: 1}, version=2, retention_ms=1000) == {tp: NONE}
            assert commit(conn, dated, {tp: 2}, version=1,
                          commit_timestamp=now - 120_000) == {tp: NONE}
            assert commit(conn, kept, {tp: 3}) == {tp: NONE}
            assert committed(conn, retained, TOPIC) == 1  # there before expiring

            records = read_offsets_topic(process)
            value = of_group(records, retained)[0].value
            assert isinstance(value, OffsetValue)
            # an explicit expire timestamp is written as OffsetCommitValue v1
            assert (value.version, value.offset) == (1, 1), value
            assert value.expire_timestamp - value.commit_timestamp == 1000, value
            value = of_group(records, dated)[0].value
            assert isinstance(value, OffsetValue)
            assert (value.version, value.commit_timestamp) == (3, now - 120_000), value

            wait_for(lambda: committed(conn, retained, TOPIC) == -1
                     and committed(conn, dated, TOPIC) == -1, "the offsets to expire",
                     timeout=15)
            wait_for(lambda: not {retained, dated} & set(list_groups(conn)),
                     "the emptied groups to go", timeout=10)
            assert committed(conn, kept, TOPIC) == 3
            assert kept in list_groups(conn)

            def tombstones() -> bool:
                last = {}
                for r in read_offsets_topic(process):
                    if isinstance(r.key, OffsetKey):
                        last[r.key.group] = r.value
                return last.get(retained, 0) is None and last.get(dated, 0) is None

            wait_for(tombstones, "tombstones for the expired offsets")
        log = server_log(process)
        assert "Traceback" not in log, log[-5000:]
    finally:
        assert process.stop() == 0, process.tail()


def test_replication_factor_that_cannot_be_met(tmp_path_factory: pytest.TempPathFactory,
                                               zk_ensemble: Any) -> None:
    process = start_group_broker(tmp_path_factory, zk_ensemble.connect_string,
                                 **{"offsets.topic.replication.factor": "3"})
    try:
        with connect(process) as conn:
            create_topic(conn, TOPIC, partitions=1)
            group = group_name("rf3")
            for _ in range(3):  # it stays so: each attempt fails the same way
                assert find_coordinator(conn, group, 3).error_code == COORDINATOR_NOT_AVAILABLE
                answer = conn.request(FIND_COORDINATOR, 4, FindCoordinatorRequest(
                    key_type=0, coordinator_keys=[group]))
                assert [c.error_code for c in answer.coordinators] == [
                    COORDINATOR_NOT_AVAILABLE], answer
                time.sleep(0.2)
            # without the topic this broker coordinates no group
            assert commit(conn, group, {(TOPIC, 0): 1}) == {(TOPIC, 0): NOT_COORDINATOR}
            joiner = Member(process, group)
            try:
                joiner.send_join()
                assert joiner.read_join().error_code == NOT_COORDINATOR
            finally:
                joiner.close()
            topic = metadata(conn, [OFFSETS], allow_auto_topic_creation=False).topics[0]
            assert topic.error_code == UNKNOWN_TOPIC_OR_PARTITION, topic
            assert OFFSETS not in {t.name for t in metadata(conn, None).topics}
        log = server_log(process)
        assert "Traceback" not in log, log[-5000:]
    finally:
        assert process.stop() == 0, process.tail()
