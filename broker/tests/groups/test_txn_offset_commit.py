"""TxnOffsetCommit and its markers at the wire, on one real broker: the offsets of a
transaction stay invisible (OffsetFetch with RequireStable answers UNSTABLE_OFFSET_COMMIT)
until WriteTxnMarkers writes the transaction's marker to the group's `__consumer_offsets`
partition; an ABORT drops them; a restart (the coordinator loading the partition back)
keeps committed offsets and never resurrects aborted ones. And the errors of bad input:
KIP-447's member checks, unknown topics, a stale producer epoch.

The broker runs without KIP-890 verification here: these raw producers have no
transaction coordinator (tests/transactions drive the full flow with real clients)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from broker.raw import connect, create_topic, server_log

from moldau.client.blocking import BlockingConnection
from moldau.devcluster.brokers import BrokerProcess
from moldau.protocol.generated.offset_fetch_request import OffsetFetchRequest
from moldau.protocol.generated.txn_offset_commit_request import TxnOffsetCommitRequest
from moldau.protocol.generated.write_txn_markers_request import WriteTxnMarkersRequest

from .conftest import start_group_broker
from .group_raw import Member, ensure_coordinator, fetch_offsets, group_name, partition_for

OFFSET_FETCH, TXN_OFFSET_COMMIT, WRITE_TXN_MARKERS = 9, 28, 27
UNKNOWN_TOPIC_OR_PARTITION, ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID = 3, 22, 25
INVALID_PRODUCER_EPOCH, FENCED_INSTANCE_ID, UNSTABLE_OFFSET_COMMIT = 47, 82, 88
TOPIC = "txn-source"


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory, zk_ensemble) -> Iterator[BrokerProcess]:
    process = start_group_broker(tmp_path_factory, zk_ensemble.connect_string,
                                 **{"transaction.partition.verification.enable": "false"})
    with connect(process) as conn:
        create_topic(conn, TOPIC, partitions=2)
        create_topic(conn, "topic-a", partitions=1)  # the raw members' subscription
        ensure_coordinator(conn)
    yield process
    log = server_log(process)
    code = process.stop()
    assert code == 0, f"broker exited with {code} on SIGTERM\n{process.tail()}"
    # a handler that raised is a broker bug even when the client saw a sane answer
    assert "Traceback" not in log, log[-5000:]


@pytest.fixture
def conn(broker: BrokerProcess) -> Iterator[BlockingConnection]:
    with connect(broker, timeout=20.0) as c:
        yield c


def txn_commit(conn: BlockingConnection, group: str, producer_id: int, offsets: dict[int, int],
               *, epoch: int = 0, version: int = 3, member: str = "", generation: int = -1,
               instance: str | None = None, topic: str = TOPIC) -> dict[int, int]:
    request = TxnOffsetCommitRequest(
        transactional_id=f"txn-{producer_id}", group_id=group, producer_id=producer_id,
        producer_epoch=epoch, topics=[TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic(
            name=topic, partitions=[
                TxnOffsetCommitRequest.TxnOffsetCommitRequestPartition(
                    partition_index=p, committed_offset=o, committed_metadata="m")
                for p, o in offsets.items()])])
    if version >= 3:
        request.member_id, request.generation_id = member, generation
        request.group_instance_id = instance
    response = conn.request(TXN_OFFSET_COMMIT, version, request)
    return {p.partition_index: p.error_code for t in response.topics for p in t.partitions}


def write_marker(conn: BlockingConnection, group: str, producer_id: int, commit: bool,
                 epoch: int = 0) -> None:
    """What the transaction coordinator sends to the group's offsets partition."""
    marker = WriteTxnMarkersRequest.WritableTxnMarker(
        producer_id=producer_id, producer_epoch=epoch, transaction_result=commit,
        coordinator_epoch=0, topics=[WriteTxnMarkersRequest.WritableTxnMarkerTopic(
            name="__consumer_offsets", partition_indexes=[partition_for(group)])])
    response = conn.request(WRITE_TXN_MARKERS, 1, WriteTxnMarkersRequest(markers=[marker]))
    codes = [p.error_code for m in response.markers for t in m.topics for p in t.partitions]
    assert codes == [0], response


def stable_fetch(conn: BlockingConnection, group: str, version: int = 7
                 ) -> dict[int, tuple[int, int]]:
    """OffsetFetch with RequireStable: {partition: (offset, error)}."""
    wanted = [OffsetFetchRequest.OffsetFetchRequestTopic(name=TOPIC, partition_indexes=[0, 1])]
    request = OffsetFetchRequest(group_id=group, topics=wanted, require_stable=True)
    if version >= 8:
        request = OffsetFetchRequest(require_stable=True, groups=[
            OffsetFetchRequest.OffsetFetchRequestGroup(group_id=group, topics=[
                OffsetFetchRequest.OffsetFetchRequestTopics(name=TOPIC,
                                                            partition_indexes=[0, 1])])])
    response = conn.request(OFFSET_FETCH, version, request)
    if version >= 8:
        (answer,) = response.groups
        assert answer.error_code == 0, response
        topics = answer.topics
    else:
        assert response.error_code == 0, response
        topics = response.topics
    return {p.partition_index: (p.committed_offset, p.error_code)
            for t in topics for p in t.partitions}


def plain(conn: BlockingConnection, group: str) -> dict[int, int]:
    return {p: o for (_, p), (o, _) in fetch_offsets(conn, group, {TOPIC: [0, 1]}).items()}


def test_commit_and_abort_markers_settle_pending_offsets(conn: BlockingConnection) -> None:
    group = group_name("txn")
    assert txn_commit(conn, group, 7001, {0: 10, 1: 11}) == {0: 0, 1: 0}
    # pending: no committed offset yet, and unstable for RequireStable, in every version
    assert plain(conn, group) == {0: -1, 1: -1}
    for version in (7, 8, 9):
        assert stable_fetch(conn, group, version) == {
            0: (-1, UNSTABLE_OFFSET_COMMIT), 1: (-1, UNSTABLE_OFFSET_COMMIT)}, version
    write_marker(conn, group, 7001, commit=True)
    assert stable_fetch(conn, group) == {0: (10, 0), 1: (11, 0)}
    # the next transaction of the producer aborts: its offsets never show
    assert txn_commit(conn, group, 7001, {0: 20}) == {0: 0}
    assert stable_fetch(conn, group) == {0: (-1, UNSTABLE_OFFSET_COMMIT), 1: (11, 0)}
    assert plain(conn, group) == {0: 10, 1: 11}
    write_marker(conn, group, 7001, commit=False)
    assert stable_fetch(conn, group) == {0: (10, 0), 1: (11, 0)}


def test_old_versions_and_bad_input(broker: BrokerProcess, conn: BlockingConnection) -> None:
    group = group_name("txn-bad")
    # v0 (no member, no generation): any group, also one that does not exist yet
    assert txn_commit(conn, group, 7002, {0: 5}, version=0) == {0: 0}
    write_marker(conn, group, 7002, commit=True)
    assert plain(conn, group)[0] == 5
    # unknown topic or partition: 3, the rest of the request goes on
    assert txn_commit(conn, group, 7002, {0: 6}, topic="no-such-topic") == {
        0: UNKNOWN_TOPIC_OR_PARTITION}
    assert txn_commit(conn, group, 7002, {5: 6}) == {5: UNKNOWN_TOPIC_OR_PARTITION}
    # KIP-447: a member of a stable group with a static instance id
    member = Member(broker, group_name("txn-member"), instance_id="instance-1")
    try:
        joined = member.join()
        assert joined.error_code == 0, joined
        assert member.sync({member.member_id: b""}).error_code == 0
        gen, mid, grp = member.generation, member.member_id, member.group
        assert txn_commit(conn, grp, 7003, {0: 1}, member=mid, generation=gen + 1,
                          instance="instance-1") == {0: ILLEGAL_GENERATION}
        assert txn_commit(conn, grp, 7003, {0: 1}, member="stranger", generation=gen) == {
            0: UNKNOWN_MEMBER_ID}
        assert txn_commit(conn, grp, 7003, {0: 1}, member="stranger", generation=gen,
                          instance="instance-1") == {0: FENCED_INSTANCE_ID}
        assert stable_fetch(conn, grp) == {0: (-1, 0), 1: (-1, 0)}  # nothing pending
        assert txn_commit(conn, grp, 7003, {0: 1}, member=mid, generation=gen,
                          instance="instance-1") == {0: 0}
        # a zombie of the same producer with an older epoch: refused by the log
        assert txn_commit(conn, grp, 7003, {0: 2}, epoch=1) == {0: 0}
        assert txn_commit(conn, grp, 7003, {0: 3}, epoch=0) == {0: INVALID_PRODUCER_EPOCH}
        write_marker(conn, grp, 7003, commit=True, epoch=1)
        assert stable_fetch(conn, grp) == {0: (2, 0), 1: (-1, 0)}
    finally:
        member.close()


def test_a_restarted_coordinator_keeps_commits_and_drops_aborts(broker: BrokerProcess) -> None:
    committed_group, aborted_group, open_group = (group_name("txn-c"), group_name("txn-a"),
                                                  group_name("txn-o"))
    with connect(broker, timeout=20.0) as conn:
        assert txn_commit(conn, committed_group, 7101, {0: 40}) == {0: 0}
        assert txn_commit(conn, aborted_group, 7102, {0: 50}) == {0: 0}
        assert txn_commit(conn, open_group, 7103, {1: 60}) == {1: 0}
        write_marker(conn, committed_group, 7101, commit=True)
        write_marker(conn, aborted_group, 7102, commit=False)
    broker.stop()
    broker.start()
    with connect(broker, timeout=20.0) as conn:
        ensure_coordinator(conn)
        assert stable_fetch(conn, committed_group) == {0: (40, 0), 1: (-1, 0)}
        assert stable_fetch(conn, aborted_group) == {0: (-1, 0), 1: (-1, 0)}
        # still open across the restart: pending, then committed by its marker
        assert stable_fetch(conn, open_group) == {0: (-1, 0), 1: (-1, UNSTABLE_OFFSET_COMMIT)}
        write_marker(conn, open_group, 7103, commit=True)
        assert stable_fetch(conn, open_group) == {0: (-1, 0), 1: (60, 0)}
