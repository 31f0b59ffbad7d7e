"""The classic group protocol at the wire, request by request, against Kafka 3.9's
GroupCoordinator: FindCoordinator, the JoinGroup/SyncGroup/Heartbeat dance (member ids,
protocol vote, static members), LeaveGroup, DescribeGroups, ListGroups, DeleteGroups,
OffsetCommit/OffsetFetch/OffsetDelete and the errors each answers for bad input; and that a
refused request changes nothing."""

from __future__ import annotations

import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from broker.raw import connect, create_topic, server_log
from confluent_kafka.admin import AdminClient

from moldau.client.blocking import BlockingConnection
from moldau.devcluster.brokers import BrokerProcess
from moldau.protocol.generated.find_coordinator_request import FindCoordinatorRequest
from moldau.protocol.generated.offset_fetch_request import OffsetFetchRequest

from .conftest import start_group_broker
from .group_raw import (
    CONSUMER,
    FENCED_INSTANCE_ID,
    FIND_COORDINATOR,
    GROUP_ID_NOT_FOUND,
    GROUP_MAX_SIZE_REACHED,
    GROUP_SUBSCRIBED_TO_TOPIC,
    ILLEGAL_GENERATION,
    INCONSISTENT_GROUP_PROTOCOL,
    INVALID_GROUP_ID,
    INVALID_SESSION_TIMEOUT,
    JOIN_GROUP,
    MEMBER_ID_REQUIRED,
    NON_EMPTY_GROUP,
    NONE,
    OFFSET_FETCH,
    OFFSET_METADATA_TOO_LARGE,
    REBALANCE_IN_PROGRESS,
    SYNC_GROUP,
    UNKNOWN_MEMBER_ID,
    UNKNOWN_TOPIC_OR_PARTITION,
    Member,
    Pending,
    assignment,
    commit,
    committed,
    delete_groups,
    delete_offsets,
    describe,
    ensure_coordinator,
    fetch_offsets,
    find_coordinator,
    form_group,
    group_name,
    heartbeat,
    leave,
    list_groups,
    subscription,
    wait_for,
)

COORDINATOR_NOT_AVAILABLE, INVALID_REQUEST = 15, 42
TOPIC_A, TOPIC_B = "topic-a", "topic-b"  # 3 and 2 partitions, made once per module
METADATA_MAX = 4096  # offset.metadata.max.bytes (Kafka's default)
MakeMember = Callable[..., Member]


@pytest.fixture(scope="module")
def topics(broker: BrokerProcess) -> Iterator[None]:
    # OffsetCommit answers UNKNOWN_TOPIC_OR_PARTITION for topics that do not exist
    with connect(broker) as conn:
        create_topic(conn, TOPIC_A, partitions=3)
        create_topic(conn, TOPIC_B, partitions=2)
        ensure_coordinator(conn)
    yield
    # a handler that raised is a broker bug even when the client saw a sane answer
    log = server_log(broker)
    assert "Traceback" not in log, log[-5000:]


@pytest.fixture
def conn(broker: BrokerProcess, topics: None) -> Iterator[BlockingConnection]:
    """A control connection: heartbeats and queries while members' connections wait."""
    with connect(broker) as c:
        yield c


@pytest.fixture
def member(broker: BrokerProcess, topics: None) -> Iterator[MakeMember]:
    """Members on their own connections, closed after the test."""
    made: list[Member] = []

    def make(group: str, **kwargs: Any) -> Member:
        m = Member(broker, group, **kwargs)
        made.append(m)
        return m

    yield make
    for m in made:
        m.close()


# ---- FindCoordinator

def test_find_coordinator_group_key_in_every_version(broker: BrokerProcess,
                                                     conn: BlockingConnection) -> None:
    group = group_name("fc")
    for version in range(4):  # v0-v3: one key, the answer at the top level
        answer = wait_for(lambda v=version: _found(find_coordinator(conn, group, v)),
                          f"FindCoordinator v{version}")
        assert (answer.node_id, answer.host, answer.port) == (1, "127.0.0.1", broker.port)
    # v4 batches keys: one answer per key, in the request's order
    other = group_name("fc-other")
    answer = conn.request(FIND_COORDINATOR, 4, FindCoordinatorRequest(
        key_type=0, coordinator_keys=[group, other]))
    assert [c.key for c in answer.coordinators] == [group, other], answer
    for c in answer.coordinators:
        assert (c.error_code, c.node_id, c.host, c.port) == (
            NONE, 1, "127.0.0.1", broker.port), answer


def _found(answer: Any) -> Any:
    # the first FindCoordinator may answer COORDINATOR_NOT_AVAILABLE while
    # __consumer_offsets is being created; then it must answer
    return answer if answer.error_code == NONE else None


def test_find_coordinator_transaction_key_is_not_available(conn: BlockingConnection) -> None:
    # no transaction coordinator yet: key type 1 answers COORDINATOR_NOT_AVAILABLE
    for version in (1, 2, 3):
        answer = find_coordinator(conn, "some-transactional-id", version, key_type=1)
        assert answer.error_code == COORDINATOR_NOT_AVAILABLE, answer
    answer = find_coordinator(conn, "some-transactional-id", 4, key_type=1)
    assert [(c.key, c.error_code) for c in answer.coordinators] == [
        ("some-transactional-id", COORDINATOR_NOT_AVAILABLE)], answer


def test_find_coordinator_v6_share_keys_and_kafkas_messages(broker: BrokerProcess,
                                                            conn: BlockingConnection) -> None:
    """v6 (KIP-932) as a 3.9 ZooKeeper broker answers it: a share key (type 2) finds no
    coordinator (15; this broker has no authorizer, so CLUSTER_ACTION is allowed), below v6
    it is INVALID_REQUEST; groups are found as in v4-5. Messages are Kafka's: none in v4+,
    the code's default in v0-3 ("NONE" when found)."""
    share_key = "share-group:AAAAAAAAAAAAAAAAAAAAAA:0"
    answer = find_coordinator(conn, share_key, 6, key_type=2)
    assert [(c.key, c.error_code, c.node_id, c.host, c.port, c.error_message)
            for c in answer.coordinators] == [(share_key, 15, -1, "", -1, None)], answer
    for version in (4, 5):
        answer = find_coordinator(conn, share_key, version, key_type=2)
        assert [(c.error_code, c.node_id) for c in answer.coordinators] == [
            (INVALID_REQUEST, -1)], answer
    answer = find_coordinator(conn, share_key, 3, key_type=2)
    assert (answer.error_code, answer.node_id, answer.host, answer.port) == (
        INVALID_REQUEST, -1, "", -1), answer
    group = group_name("fc6")
    answer = wait_for(lambda: _found_v4(find_coordinator(conn, group, 6)), "FindCoordinator v6")
    assert [(c.key, c.node_id, c.host, c.port, c.error_message)
            for c in answer.coordinators] == [(group, 1, "127.0.0.1", broker.port, None)]
    found = find_coordinator(conn, group, 3)
    assert (found.error_code, found.error_message) == (NONE, "NONE"), found
    missing = find_coordinator(conn, "a-transactional-id", 3, key_type=1)
    assert (missing.error_code, missing.error_message) == (
        COORDINATOR_NOT_AVAILABLE, "The coordinator is not available."), missing
    # an unknown key type fails every key of the request, with the default message
    answer = conn.request(FIND_COORDINATOR, 6, FindCoordinatorRequest(
        key_type=3, coordinator_keys=[group, "other"]))
    assert [(c.key, c.error_code, c.node_id) for c in answer.coordinators] == [
        (group, INVALID_REQUEST, -1), ("other", INVALID_REQUEST, -1)], answer
    assert answer.coordinators[0].error_message.startswith("This most likely occurs")
    assert broker.healthy()


def _found_v4(answer: Any) -> Any:
    return answer if answer.coordinators[0].error_code == NONE else None


# ---- joining by hand

def test_join_sync_heartbeat_and_a_second_member(conn: BlockingConnection,
                                                 member: MakeMember) -> None:
    group = group_name("flow")
    a = member(group, client_id="client-a", topics=[TOPIC_A])
    # v4+: an unknown member must come back with the id the broker hands out
    a.send_join(4)
    first = a.read_join()
    assert first.error_code == MEMBER_ID_REQUIRED, first
    assert first.member_id.startswith("client-a-"), first  # Kafka: clientId-UUID
    assert first.generation_id == -1
    joined = a.join(4)
    assert joined.error_code == NONE, joined
    assert joined.member_id == first.member_id
    assert (joined.generation_id, joined.protocol_name, joined.leader) == (
        1, "range", a.member_id), joined
    assert [(m.member_id, m.metadata) for m in joined.members] == [
        (a.member_id, subscription([TOPIC_A]))]
    plan_a = assignment({TOPIC_A: [0, 1, 2]})
    synced = a.sync({a.member_id: plan_a})
    assert (synced.error_code, synced.assignment) == (NONE, plan_a), synced
    assert (synced.protocol_type, synced.protocol_name) == (CONSUMER, "range"), synced
    assert a.heartbeat() == NONE
    assert a.heartbeat(generation=0) == ILLEGAL_GENERATION

    # a second member: the group rebalances and the first learns it from its heartbeat
    b = member(group, client_id="client-b", topics=[TOPIC_A])
    b.obtain_member_id()
    b.send_join(4)
    wait_for(lambda: a.heartbeat(conn) == REBALANCE_IN_PROGRESS, "REBALANCE_IN_PROGRESS")
    assert describe(conn, group).group_state == "PreparingRebalance"
    a.send_join(4)
    ja, jb = a.read_join(), b.read_join()
    assert (ja.error_code, jb.error_code) == (NONE, NONE), (ja, jb)
    assert ja.generation_id == jb.generation_id == 2
    assert ja.leader == jb.leader == a.member_id  # the old leader stays leader
    assert sorted(m.member_id for m in ja.members) == sorted([a.member_id, b.member_id])
    assert jb.members == []  # followers do not get the member list
    assert describe(conn, group).group_state == "CompletingRebalance"
    assert a.heartbeat(conn) == NONE  # CompletingRebalance: heartbeats are fine

    # the follower's SyncGroup waits for the leader's, then both get their part
    plan = {a.member_id: assignment({TOPIC_A: [0, 1]}), b.member_id: assignment({TOPIC_A: [2]})}
    b.send_sync()
    a.send_sync(plan)
    sa, sb = a.read_sync(), b.read_sync()
    assert (sa.error_code, sa.assignment) == (NONE, plan[a.member_id]), sa
    assert (sb.error_code, sb.assignment) == (NONE, plan[b.member_id]), sb
    assert describe(conn, group).group_state == "Stable"
    assert a.heartbeat() == NONE and b.heartbeat() == NONE
    assert b.heartbeat(generation=1) == ILLEGAL_GENERATION
    # SyncGroup v5 names the protocol: another one than the group's is refused
    wrong = b.sync_request()
    wrong.protocol_name = "roundrobin"
    assert conn.request(SYNC_GROUP, 5, wrong).error_code == INCONSISTENT_GROUP_PROTOCOL
    assert b.sync().assignment == plan[b.member_id]  # Stable: the current assignment again


def test_join_v3_needs_no_member_id_round(member: MakeMember) -> None:
    # before v4 the broker adds an unknown member at once (no MEMBER_ID_REQUIRED)
    a = member(group_name("v3"), client_id="old-client")
    a.send_join(3)
    answer = a.read_join()
    assert answer.error_code == NONE, answer
    assert answer.member_id.startswith("old-client-"), answer
    assert (answer.generation_id, answer.leader) == (1, answer.member_id), answer


def test_protocol_vote_picks_one_every_member_supports(conn: BlockingConnection,
                                                       member: MakeMember) -> None:
    group = group_name("vote")
    meta = {name: subscription([f"t-{name}"]) for name in ("x", "y", "z")}
    # candidates supported by all: {x, y}; votes: a -> x, b -> y, c -> y: y wins
    a = member(group, client_id="a", protocols=[("x", meta["x"]), ("y", meta["y"])])
    b = member(group, client_id="b", protocols=[("y", meta["y"]), ("x", meta["x"])])
    c = member(group, client_id="c",
               protocols=[("y", meta["y"]), ("z", meta["z"]), ("x", meta["x"])])
    responses = form_group(conn, [a, b, c])
    assert {r.protocol_name for r in responses} == {"y"}, responses
    leader = next(r for r in responses if r.members)
    # the leader gets each member's metadata of the chosen protocol
    assert sorted(m.metadata for m in leader.members) == [meta["y"]] * 3
    described = describe(conn, group)
    assert (described.group_state, described.protocol_data) == ("Stable", "y"), described


def test_inconsistent_group_protocol(conn: BlockingConnection, member: MakeMember) -> None:
    group = group_name("incons")
    a = member(group, protocols=[("range", b"r"), ("roundrobin", b"rr")])
    form_group(conn, [a])
    # no protocol in common with the group
    b = member(group, protocols=[("sticky", b"s")])
    b.send_join()
    answer = b.read_join()
    assert answer.error_code == INCONSISTENT_GROUP_PROTOCOL, answer
    # a common protocol but another protocol type
    c = member(group, protocols=[("range", b"r")], protocol_type="connect")
    c.send_join()
    assert c.read_join().error_code == INCONSISTENT_GROUP_PROTOCOL
    # an empty protocol list, even for a new group
    d = member(group_name("incons-empty"), protocols=[])
    d.send_join()
    assert d.read_join().error_code == INCONSISTENT_GROUP_PROTOCOL
    # none of it disturbed the group
    assert a.heartbeat() == NONE
    described = describe(conn, group)
    assert (described.group_state, len(described.members)) == ("Stable", 1), described


def test_session_timeout_outside_the_bounds(conn: BlockingConnection,
                                            member: MakeMember) -> None:
    group = group_name("session")
    # the broker runs with group.min.session.timeout.ms=1000; max is Kafka's 1800000
    for session_ms in (999, 1_800_001):
        m = member(group, session_ms=session_ms)
        m.send_join()
        answer = m.read_join()
        assert answer.error_code == INVALID_SESSION_TIMEOUT, (session_ms, answer)
    assert group not in list_groups(conn), "a refused join must not create the group"
    for session_ms in (1000, 1_800_000):  # the bounds themselves are fine
        m = member(group, session_ms=session_ms)
        m.send_join()
        assert m.read_join().error_code == MEMBER_ID_REQUIRED


def test_silent_member_expires_after_its_session_timeout(conn: BlockingConnection,
                                                         member: MakeMember) -> None:
    group = group_name("expire")
    a = member(group, session_ms=10_000)
    b = member(group, session_ms=1000)  # the broker's group.min.session.timeout.ms
    form_group(conn, [a, b])
    started = time.monotonic()
    # a keeps heartbeating, b falls silent: the coordinator drops b and rebalances
    wait_for(lambda: a.heartbeat() == REBALANCE_IN_PROGRESS, "b's session to expire",
             timeout=8)
    assert time.monotonic() - started >= 0.8, "expired before its session timeout"
    answer = a.join()
    assert answer.error_code == NONE and [m.member_id for m in answer.members] == [
        a.member_id], answer
    assert b.heartbeat(conn) == UNKNOWN_MEMBER_ID


def test_member_that_does_not_rejoin_is_dropped_after_the_rebalance_timeout(
        conn: BlockingConnection, member: MakeMember) -> None:
    group = group_name("rebalance-timeout")
    a = member(group, rebalance_ms=1000)
    b = member(group, rebalance_ms=1000)
    form_group(conn, [a, b])
    leader, follower = (a, b) if a.is_leader else (b, a)
    started = time.monotonic()
    leader.send_join()  # the leader's rejoin starts a rebalance that b ignores
    answer = leader.read_join()
    waited = time.monotonic() - started
    assert answer.error_code == NONE, answer
    assert [m.member_id for m in answer.members] == [leader.member_id], answer
    assert answer.generation_id == leader.generation
    assert 0.8 <= waited < 8, f"the rebalance completed after {waited:.2f}s"
    assert follower.heartbeat(conn) == UNKNOWN_MEMBER_ID


def test_group_max_size(tmp_path_factory: pytest.TempPathFactory, zk_ensemble: Any) -> None:
    process = start_group_broker(tmp_path_factory, zk_ensemble.connect_string,
                                 **{"group.max.size": "2"})
    made: list[Member] = []
    try:
        with connect(process) as conn:
            create_topic(conn, TOPIC_A, partitions=1)
            ensure_coordinator(conn)
            group = group_name("max")
            made += [Member(process, group, client_id=c) for c in ("a", "b", "c")]
            a, b, c = made
            form_group(conn, [a, b])
            for version in (4, 9):  # the 3rd member is refused before getting an id
                c.send_join(version)
                answer = c.read_join()
                assert answer.error_code == GROUP_MAX_SIZE_REACHED, answer
                assert answer.member_id == "", answer
            # and the group did not notice
            assert a.heartbeat() == NONE and b.heartbeat() == NONE
            described = describe(conn, group)
            assert (described.group_state, len(described.members)) == ("Stable", 2)
        assert "Traceback" not in server_log(process)
    finally:
        for m in made:
            m.close()
        assert process.stop() == 0, process.tail()


def _static_pair(conn: BlockingConnection, member: MakeMember,
                 group: str) -> tuple[Member, Member, dict[str, bytes]]:
    """A dynamic leader and a static follower ("instance-1"), Stable with assignments."""
    leader = member(group, client_id="dyn", topics=[TOPIC_A])
    static = member(group, client_id="stat", topics=[TOPIC_A], instance_id="instance-1")
    plans = {"leader": assignment({TOPIC_A: [0]}), "static": assignment({TOPIC_A: [1, 2]})}
    form_group(conn, [leader, static], {0: plans["leader"], 1: plans["static"]})
    return leader, static, plans


def test_member_id_format(member: MakeMember) -> None:
    # Kafka's GroupMetadata.generateMemberId: clientId-UUID, or groupInstanceId-UUID for
    # a static member (tools and logs show it; operators grep for the instance id)
    dynamic = member(group_name("ids"), client_id="the-client")
    dynamic.obtain_member_id()
    static = member(group_name("ids"), client_id="the-client", instance_id="the-instance")
    assert static.join().error_code == NONE
    for m, prefix in ((dynamic, "the-client-"), (static, "the-instance-")):
        assert m.member_id.startswith(prefix), (prefix, m.member_id)
        uuid.UUID(m.member_id[len(prefix):])  # the rest is a UUID


def test_static_member_replaced_fences_the_old_member_id(conn: BlockingConnection,
                                                         member: MakeMember) -> None:
    group = group_name("fence")
    leader, static, _ = _static_pair(conn, member, group)
    assert static.commit({(TOPIC_A, 1): 10}) == {(TOPIC_A, 1): NONE}
    old_id, generation = static.member_id, static.generation
    # the same instance id joins again with an empty member id (a second process)
    twin = member(group, client_id="stat", topics=[TOPIC_A], instance_id="instance-1")
    answer = twin.join()
    assert answer.error_code == NONE, answer
    assert twin.member_id not in ("", old_id)
    # the old member id is fenced everywhere it shows itself with its instance id
    assert static.heartbeat(conn) == FENCED_INSTANCE_ID
    assert static.commit({(TOPIC_A, 1): 99}, conn=conn) == {(TOPIC_A, 1): FENCED_INSTANCE_ID}
    assert committed(conn, group, TOPIC_A, 1) == 10
    sync = static.sync()
    assert sync.error_code == FENCED_INSTANCE_ID, sync
    static.send_join()
    assert static.read_join().error_code == FENCED_INSTANCE_ID
    # the new one holds the place
    assert heartbeat(conn, group, generation, twin.member_id, "instance-1") == NONE
    ids = sorted(m.member_id for m in describe(conn, group).members)
    assert ids == sorted([leader.member_id, twin.member_id])


def test_static_member_rejoin_keeps_assignment_without_rebalance(
        conn: BlockingConnection, member: MakeMember) -> None:
    group = group_name("static")
    leader, static, plans = _static_pair(conn, member, group)
    generation = static.generation
    # the static member restarts: new connection, no member id, same instance id
    static.reconnect()
    static.member_id = ""
    answer = static.join()
    assert answer.error_code == NONE, answer
    assert answer.generation_id == generation, "a known static member must not rebalance"
    assert answer.leader == leader.member_id and answer.members == [], answer
    assert answer.protocol_name == "range"
    synced = static.sync()
    assert (synced.error_code, synced.assignment) == (NONE, plans["static"]), synced
    # the other member never saw a rebalance
    assert leader.heartbeat() == NONE
    assert describe(conn, group).group_state == "Stable"
    assert static.heartbeat() == NONE
    by_id = {m.member_id: m for m in describe(conn, group).members}
    assert by_id[static.member_id].group_instance_id == "instance-1"
    assert by_id[static.member_id].member_assignment == plans["static"]
    assert by_id[leader.member_id].member_assignment == plans["leader"]


def test_static_leader_rejoin_skips_assignment_on_v9(conn: BlockingConnection,
                                                     member: MakeMember) -> None:
    group = group_name("static-leader")
    lead = member(group, client_id="lead", topics=[TOPIC_A], instance_id="lead-1")
    other = member(group, client_id="other", topics=[TOPIC_A])
    form_group(conn, [lead, other], {0: assignment({TOPIC_A: [0]}), 1: b""})
    generation = lead.generation
    lead.reconnect()
    lead.member_id = ""
    answer = lead.join(9)
    # v9: the rejoining static leader is told it leads, with the members, but to skip
    # the assignment (the group stays Stable with the assignment it has)
    assert answer.error_code == NONE, answer
    assert (answer.generation_id, answer.leader) == (generation, lead.member_id), answer
    assert answer.skip_assignment is True
    assert len(answer.members) == 2
    synced = lead.sync()
    assert (synced.error_code, synced.assignment) == (NONE, assignment({TOPIC_A: [0]}))
    assert other.heartbeat() == NONE


# ---- LeaveGroup, DescribeGroups, ListGroups, DeleteGroups, OffsetDelete

def test_batch_leave_and_describe(conn: BlockingConnection, member: MakeMember) -> None:
    group = group_name("leave")
    a = member(group, client_id="client-a", topics=[TOPIC_A])
    b = member(group, client_id="client-b", topics=[TOPIC_A, TOPIC_B])
    plans = {0: assignment({TOPIC_A: [0, 1]}), 1: assignment({TOPIC_A: [2], TOPIC_B: [0]})}
    form_group(conn, [a, b], plans)

    described = describe(conn, group)
    assert described.error_code == NONE
    assert (described.group_state, described.protocol_type, described.protocol_data) == (
        "Stable", CONSUMER, "range"), described
    by_id = {m.member_id: m for m in described.members}
    assert set(by_id) == {a.member_id, b.member_id}
    for m, plan, topics in ((a, plans[0], [TOPIC_A]), (b, plans[1], [TOPIC_A, TOPIC_B])):
        d = by_id[m.member_id]
        assert (d.client_id, d.client_host) == (m.client_id, "/127.0.0.1"), d
        assert (d.member_metadata, d.member_assignment) == (subscription(topics), plan), d
        assert d.group_instance_id is None

    # both leave in one request; an unknown member in the batch is refused on its own
    answer = leave(conn, group, [(a.member_id, None), (b.member_id, None), ("nobody", None)])
    assert answer.error_code == NONE, answer
    assert [(m.member_id, m.error_code) for m in answer.members] == [
        (a.member_id, NONE), (b.member_id, NONE), ("nobody", UNKNOWN_MEMBER_ID)], answer
    described = describe(conn, group)
    assert (described.group_state, described.members) == ("Empty", []), described
    assert described.protocol_type == CONSUMER  # an Empty group keeps its protocol type
    assert a.heartbeat(conn) == UNKNOWN_MEMBER_ID

    unknown = describe(conn, group_name("never"))
    assert (unknown.error_code, unknown.group_state, unknown.members) == (NONE, "Dead", [])
    assert (unknown.protocol_type, unknown.protocol_data) == ("", "")


def test_describe_with_authorized_operations(broker: BrokerProcess, conn: BlockingConnection,
                                            member: MakeMember) -> None:
    """Kafka 3.9 answers READ|DELETE|DESCRIBE (328) for a group, known or not, when asked;
    Kafka's and librdkafka's admin clients ask (issue 41, item 12: it closed the
    connection)."""
    group = group_name("ops")
    a = member(group, topics=[TOPIC_A])
    form_group(conn, [a], {0: assignment({TOPIC_A: [0]})})
    for name in (group, group_name("never")):
        assert describe(conn, name, operations=True).authorized_operations == 328
        assert describe(conn, name, version=3, operations=True).authorized_operations == 328
        assert describe(conn, name).authorized_operations == -(2**31)  # not asked

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    found = admin.describe_consumer_groups([group], include_authorized_operations=True)
    description = found[group].result(timeout=30)
    assert {op.name for op in description.authorized_operations} == {
        "READ", "DELETE", "DESCRIBE"}
    assert describe(conn, group).group_state == "Stable"  # the connection still serves


def test_list_groups_filters(conn: BlockingConnection, member: MakeMember) -> None:
    stable, empty = group_name("ls-stable"), group_name("ls-empty")
    form_group(conn, [member(stable)])
    # a standalone commit makes an Empty group without a protocol type
    assert commit(conn, empty, {(TOPIC_A, 0): 1}) == {(TOPIC_A, 0): NONE}

    everything = list_groups(conn)
    assert everything[stable].group_state == "Stable"
    assert everything[empty].group_state == "Empty"
    assert everything[stable].protocol_type == CONSUMER
    assert everything[empty].protocol_type == ""
    only_stable = list_groups(conn, ["Stable"])
    assert stable in only_stable and empty not in only_stable
    assert {g.group_state for g in only_stable.values()} == {"Stable"}
    only_empty = list_groups(conn, ["Empty"])
    assert empty in only_empty and stable not in only_empty
    assert {g.group_state for g in only_empty.values()} == {"Empty"}
    assert stable in list_groups(conn, ["stable"])  # Kafka matches states case-insensitively
    assert list_groups(conn, ["Dead"]) == {}
    both = list_groups(conn, ["Empty", "Stable"])
    assert {stable, empty} <= set(both)
    # v5 filters on the group type: every group of this coordinator is "classic"
    classic = list_groups(conn, types=["classic"], version=5)
    assert {stable, empty} <= set(classic)
    assert {g.group_type for g in classic.values()} == {"classic"}
    assert list_groups(conn, types=["consumer"], version=5) == {}
    legacy = list_groups(conn, version=0)  # no filter field at all
    assert {stable, empty} <= set(legacy)


def test_delete_groups(conn: BlockingConnection, member: MakeMember) -> None:
    group = group_name("del")
    a = member(group, topics=[TOPIC_A])
    form_group(conn, [a])
    assert a.commit({(TOPIC_A, 0): 42, (TOPIC_A, 1): 43}) == {(TOPIC_A, 0): NONE,
                                                              (TOPIC_A, 1): NONE}
    # a group with members is not deleted, and nothing about it changes
    assert delete_groups(conn, [group]) == {group: NON_EMPTY_GROUP}
    assert committed(conn, group, TOPIC_A, 0) == 42
    assert list_groups(conn)[group].group_state == "Stable"
    assert a.heartbeat() == NONE

    answer = leave(conn, group, [(a.member_id, None)])
    assert [m.error_code for m in answer.members] == [NONE]
    missing = group_name("del-missing")
    assert delete_groups(conn, [group, missing]) == {group: NONE, missing: GROUP_ID_NOT_FOUND}
    assert group not in list_groups(conn)
    assert fetch_offsets(conn, group, {TOPIC_A: [0, 1]}) == {
        (TOPIC_A, 0): (-1, ""), (TOPIC_A, 1): (-1, "")}
    assert fetch_offsets(conn, group, None) == {}
    assert describe(conn, group).group_state == "Dead"
    assert delete_groups(conn, [group]) == {group: GROUP_ID_NOT_FOUND}


def test_offset_delete(conn: BlockingConnection, member: MakeMember) -> None:
    group = group_name("odel")
    a = member(group, topics=[TOPIC_A])  # subscribed to topic-a only
    form_group(conn, [a])
    offsets = {(TOPIC_A, 0): 5, (TOPIC_A, 1): 6, (TOPIC_B, 0): 7}
    assert set(a.commit(offsets).values()) == {NONE}

    # a non-empty group keeps the offsets of topics it consumes, drops the others
    error, parts = delete_offsets(conn, group, {TOPIC_A: [0], TOPIC_B: [0]})
    assert (error, parts) == (NONE, {(TOPIC_A, 0): GROUP_SUBSCRIBED_TO_TOPIC,
                                     (TOPIC_B, 0): NONE})
    assert fetch_offsets(conn, group, None) == {(TOPIC_A, 0): (5, ""), (TOPIC_A, 1): (6, "")}

    # once empty, any partition's offsets can go, one partition at a time
    leave(conn, group, [(a.member_id, None)])
    assert delete_offsets(conn, group, {TOPIC_A: [0]}) == (NONE, {(TOPIC_A, 0): NONE})
    assert fetch_offsets(conn, group, {TOPIC_A: [0, 1]}) == {
        (TOPIC_A, 0): (-1, ""), (TOPIC_A, 1): (6, "")}
    assert delete_offsets(conn, group_name("odel-missing"), {TOPIC_A: [0]}) == (
        GROUP_ID_NOT_FOUND, {})

    # the last offset of an Empty group taken, the group is Dead, as in Kafka: deleting it
    # then finds no group (issue 41, item 14)
    assert delete_offsets(conn, group, {TOPIC_A: [1]}) == (NONE, {(TOPIC_A, 1): NONE})
    assert describe(conn, group).group_state == "Dead"
    assert group not in list_groups(conn)
    assert delete_groups(conn, [group]) == {group: GROUP_ID_NOT_FOUND}


def test_deleting_a_topic_removes_its_committed_offsets(broker: BrokerProcess,
                                                        conn: BlockingConnection) -> None:
    """Kafka's onPartitionsDeleted (issue 41, item 2): the offsets of a deleted topic are
    tombstoned in every group, a group left with none is Dead, kafka-consumer-groups
    --describe still works, and a re-created topic starts with no stale position."""
    topic = f"deleted-{uuid.uuid4().hex[:6]}"
    only, both = group_name("del-only"), group_name("del-both")
    create_topic(conn, topic, partitions=2)
    assert set(commit(conn, only, {(topic, 0): 5, (topic, 1): 7}).values()) == {NONE}
    assert set(commit(conn, both, {(topic, 0): 3, (TOPIC_A, 0): 4}).values()) == {NONE}

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.delete_topics([topic])[topic].result(timeout=30)
    wait_for(lambda: topic not in {t for t, _ in fetch_offsets(conn, both, None)},
             "the deleted topic's offsets to go")
    assert fetch_offsets(conn, both, None) == {(TOPIC_A, 0): (4, "")}
    wait_for(lambda: describe(conn, only).group_state == "Dead", "the group to be Dead")
    assert delete_groups(conn, [only]) == {only: GROUP_ID_NOT_FOUND}
    tool = subprocess.run([sys.executable, "-m", "moldau.cli", "consumer-groups",
                           "--bootstrap-server", broker.bootstrap, "--describe", "--group",
                           both], capture_output=True, text=True, timeout=60)
    assert tool.returncode == 0, tool.stdout + tool.stderr
    assert TOPIC_A in tool.stdout and topic not in tool.stdout

    create_topic(conn, topic, partitions=2)
    assert fetch_offsets(conn, both, {topic: [0, 1]}) == {(topic, 0): (-1, ""),
                                                          (topic, 1): (-1, "")}


# ---- OffsetFetch forms

def test_offset_fetch_all_partitions_and_many_groups(conn: BlockingConnection) -> None:
    g1, g2, unknown = group_name("of1"), group_name("of2"), group_name("of-unknown")
    assert set(commit(conn, g1, {(TOPIC_A, 0): 10, (TOPIC_A, 1): 11, (TOPIC_B, 1): 12},
                      metadata={(TOPIC_A, 0): "m0", (TOPIC_A, 1): "", (TOPIC_B, 1): "b1"},
                      leader_epoch=3).values()) == {NONE}
    assert commit(conn, g2, {(TOPIC_A, 2): 20}) == {(TOPIC_A, 2): NONE}
    expected = {(TOPIC_A, 0): (10, "m0"), (TOPIC_A, 1): (11, ""), (TOPIC_B, 1): (12, "b1")}
    for version in (2, 5, 7):  # topics = null: every committed partition
        assert fetch_offsets(conn, g1, None, version=version) == expected, version
    assert fetch_offsets(conn, g1, None, require_stable=True) == expected
    # named partitions; the one never committed answers -1 without an error
    assert fetch_offsets(conn, g1, {TOPIC_A: [0, 2]}, version=1) == {
        (TOPIC_A, 0): (10, "m0"), (TOPIC_A, 2): (-1, "")}
    # an unknown group is no error: -1 for what is asked, nothing for "all"
    assert fetch_offsets(conn, unknown, {TOPIC_A: [0]}) == {(TOPIC_A, 0): (-1, "")}
    assert fetch_offsets(conn, unknown, None) == {}

    # v8: several groups in one request, each with its own topics or all of them
    request = OffsetFetchRequest(require_stable=True, groups=[
        OffsetFetchRequest.OffsetFetchRequestGroup(group_id=g1, topics=None),
        OffsetFetchRequest.OffsetFetchRequestGroup(group_id=g2, topics=[
            OffsetFetchRequest.OffsetFetchRequestTopics(name=TOPIC_A,
                                                        partition_indexes=[2, 0])]),
        OffsetFetchRequest.OffsetFetchRequestGroup(group_id=unknown, topics=None),
    ])
    answer = conn.request(OFFSET_FETCH, 8, request)
    groups = {g.group_id: g for g in answer.groups}
    assert list(groups) == [g1, g2, unknown], answer
    for g in groups.values():
        assert g.error_code == NONE, g
    assert _offsets(groups[g1]) == {k: v[0] for k, v in expected.items()}
    assert _offsets(groups[g2]) == {(TOPIC_A, 2): 20, (TOPIC_A, 0): -1}
    assert _offsets(groups[unknown]) == {}
    epochs = {p.committed_leader_epoch for t in groups[g1].topics for p in t.partitions}
    assert epochs == {3}, groups[g1]


def _offsets(group: Any) -> dict[tuple[str, int], int]:
    out = {}
    for topic in group.topics:
        for p in topic.partitions:
            assert p.error_code == NONE, group
            out[(topic.name, p.partition_index)] = p.committed_offset
    return out


# ---- bad input: the error, and nothing written

def test_commit_unknown_member_and_old_generation(conn: BlockingConnection,
                                                  member: MakeMember) -> None:
    group = group_name("badcommit")
    a = member(group, topics=[TOPIC_A])
    form_group(conn, [a])
    assert a.commit({(TOPIC_A, 0): 10}) == {(TOPIC_A, 0): NONE}
    tp = (TOPIC_A, 0)
    assert a.commit({tp: 11}, member_id="not-a-member") == {tp: UNKNOWN_MEMBER_ID}
    # the standalone form (generation -1, no member id) is only for empty groups
    assert commit(conn, group, {tp: 12}) == {tp: UNKNOWN_MEMBER_ID}
    assert committed(conn, group, TOPIC_A) == 10

    # the leader rejoins: generation 2; the old generation is refused
    old = a.generation
    a.join()
    assert a.sync({a.member_id: b""}).error_code == NONE
    assert a.generation == old + 1
    assert a.commit({tp: 13}, generation=old) == {tp: ILLEGAL_GENERATION}
    assert committed(conn, group, TOPIC_A) == 10
    assert a.commit({tp: 14}) == {tp: NONE}
    assert committed(conn, group, TOPIC_A) == 14

    # a generation for a group that does not exist is an old generation too
    nowhere = group_name("badcommit-none")
    assert commit(conn, nowhere, {tp: 1}, generation=3, member_id="m") == {
        tp: ILLEGAL_GENERATION}
    assert nowhere not in list_groups(conn)


def test_commit_during_a_rebalance(conn: BlockingConnection, member: MakeMember) -> None:
    group = group_name("rebalancing")
    tp = (TOPIC_A, 0)
    a = member(group, topics=[TOPIC_A])
    form_group(conn, [a])
    assert a.commit({tp: 5}) == {tp: NONE}
    b = member(group, topics=[TOPIC_A])
    b.obtain_member_id()
    b.send_join()
    wait_for(lambda: a.heartbeat(conn) == REBALANCE_IN_PROGRESS, "PreparingRebalance")
    # Kafka 3.9 still takes commits of the current generation in PreparingRebalance
    # (GroupCoordinator.doCommitOffsets: "we rely on heartbeat response to eventually
    # notify the rebalance in progress signal to the consumer")
    assert a.commit({tp: 6}) == {tp: NONE}
    assert committed(conn, group, TOPIC_A) == 6
    a.send_join()
    ja, jb = a.read_join(), b.read_join()
    assert (ja.error_code, jb.error_code) == (NONE, NONE)
    assert describe(conn, group).group_state == "CompletingRebalance"
    # between JoinGroup and the leader's SyncGroup: REBALANCE_IN_PROGRESS, nothing written
    assert a.commit({tp: 7}) == {tp: REBALANCE_IN_PROGRESS}
    assert b.commit({tp: 8}) == {tp: REBALANCE_IN_PROGRESS}
    assert committed(conn, group, TOPIC_A) == 6
    b.send_sync()
    assert a.sync({a.member_id: b"", b.member_id: b""}).error_code == NONE
    assert b.read_sync().error_code == NONE
    assert a.commit({tp: 9}) == {tp: NONE}
    assert committed(conn, group, TOPIC_A) == 9


def test_commit_oversized_metadata_commits_the_valid_partitions(
        conn: BlockingConnection) -> None:
    group = group_name("bigmeta")
    assert commit(conn, group, {(TOPIC_A, 0): 1}, metadata="before") == {(TOPIC_A, 0): NONE}
    metadata = {(TOPIC_A, 0): "x" * (METADATA_MAX + 1), (TOPIC_A, 1): "y" * METADATA_MAX,
                (TOPIC_A, 2): ""}
    answer = commit(conn, group, {(TOPIC_A, 0): 2, (TOPIC_A, 1): 3, (TOPIC_A, 2): 4},
                    metadata=metadata)
    assert answer == {(TOPIC_A, 0): OFFSET_METADATA_TOO_LARGE, (TOPIC_A, 1): NONE,
                      (TOPIC_A, 2): NONE}
    assert fetch_offsets(conn, group, {TOPIC_A: [0, 1, 2]}) == {
        (TOPIC_A, 0): (1, "before"), (TOPIC_A, 1): (3, "y" * METADATA_MAX),
        (TOPIC_A, 2): (4, "")}


def test_commit_unknown_topic(conn: BlockingConnection) -> None:
    group = group_name("notopic")
    answer = commit(conn, group, {("no-such-topic", 0): 1, (TOPIC_A, 0): 2})
    assert answer == {("no-such-topic", 0): UNKNOWN_TOPIC_OR_PARTITION, (TOPIC_A, 0): NONE}
    assert fetch_offsets(conn, group, None) == {(TOPIC_A, 0): (2, "")}


def test_empty_group_id_and_unknown_groups(conn: BlockingConnection,
                                           member: MakeMember) -> None:
    empty = member("")
    empty.send_join()
    answer = empty.read_join()
    assert answer.error_code == INVALID_GROUP_ID, answer
    unknown = group_name("unknown")
    # Kafka 3.9: a member of a group that does not exist is an unknown member
    assert heartbeat(conn, unknown, 1, "someone") == UNKNOWN_MEMBER_ID
    sync = Pending(conn, SYNC_GROUP, 5, member(unknown).sync_request()).result()
    assert sync.error_code == UNKNOWN_MEMBER_ID, sync
    stranger = member(unknown)
    stranger.member_id = "stranger"
    join = Pending(conn, JOIN_GROUP, 9, stranger.join_request()).result()
    assert join.error_code == UNKNOWN_MEMBER_ID, join
    left = leave(conn, unknown, [("someone", None)])
    assert left.error_code == NONE
    assert [m.error_code for m in left.members] == [UNKNOWN_MEMBER_ID]
    assert unknown not in list_groups(conn)
