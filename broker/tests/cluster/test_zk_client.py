"""KafkaZkClient and AsyncZk against a real 3-node ZooKeeper ensemble (fixtures in
zk_fixtures.py); every test works under its own chroot."""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from collections.abc import Callable, Iterator

import pytest
from kazoo.client import KazooClient

from moldau.cluster import zk_data as zd
from moldau.cluster.zk_async import AsyncZk
from moldau.cluster.zk_client import (
    ControllerMovedError,
    KafkaZkClient,
    ZkBadVersionError,
    ZkNodeExistsError,
    ZooKeeperUnavailableError,
)
from moldau.cluster.zk_data import BrokerRegistration, PartitionState, TopicAssignment
from moldau.cluster.zk_ensemble import ZooKeeperEnsemble, free_ports
from moldau.errors import TopicAlreadyExistsError, UnknownTopicOrPartitionError


def wait_for(cond: Callable[[], object], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout} s")
        time.sleep(0.02)


@pytest.fixture
def new_client(zk_ensemble: ZooKeeperEnsemble,
               zk_chroot: str) -> Iterator[Callable[[], KafkaZkClient]]:
    """More started clients on the test's chroot (other brokers)."""
    clients: list[KafkaZkClient] = []

    def make() -> KafkaZkClient:
        client = KafkaZkClient(zk_ensemble.connect_string, zk_chroot, 6000, 15000)
        client.start()
        clients.append(client)
        return client

    yield make
    for client in clients:
        client.close()


def registration(broker_id: int, port: int = 9092) -> BrokerRegistration:
    return BrokerRegistration(broker_id, [("PLAINTEXT", "localhost", port, "PLAINTEXT")],
                              rack="r1")


def expire_session(zk_ensemble: ZooKeeperEnsemble, client: KafkaZkClient) -> None:
    """Expire the client's session from outside: attach to it and close it."""
    session_id, password = client.kazoo.client_id
    thief = KazooClient(hosts=zk_ensemble.connect_string, client_id=(session_id, password))
    thief.start()
    thief.stop()
    thief.close()


def test_chroot_is_created_with_the_persistent_paths(zk_ensemble: ZooKeeperEnsemble,
                                                     zk_chroot: str) -> None:
    chroot = f"{zk_chroot}/kafka/prod"
    with KafkaZkClient(f"{zk_ensemble.connect_string}{chroot}", session_timeout_ms=6000) as c:
        assert c.chroot == chroot and c.connected and c.state == "CONNECTED"
        c.ensure_persistent_paths()
    raw = KazooClient(hosts=zk_ensemble.connect_string)
    raw.start()
    try:
        for path in zd.PERSISTENT_PATHS:
            assert raw.exists(chroot + path), path
    finally:
        raw.stop()
        raw.close()
    assert c.state == "CLOSED"


def test_pipelined_calls_keep_to_max_in_flight(zk_ensemble: ZooKeeperEnsemble,
                                               zk_chroot: str) -> None:
    # zookeeper.max.in.flight.requests 3: persistent paths and batched reads go in windows
    # of 3, and answers still line up with their paths (missing znodes as None)
    with KafkaZkClient(zk_ensemble.connect_string, zk_chroot, 6000, max_in_flight=3) as c:
        assert [len(w) for w in c._windows(list(zd.PERSISTENT_PATHS))][:-1] == [3] * (
            (len(zd.PERSISTENT_PATHS) - 1) // 3)
        c.ensure_persistent_paths()
        paths = [f"/w{i}" for i in range(8)]
        for i, path in enumerate(paths):
            if i != 5:
                c.kazoo.create(path, b"%d" % i)
        found = c._get_many(paths)
        assert [f[0] if f else None for f in found] == [
            b"%d" % i if i != 5 else None for i in range(8)]


def test_dead_ensemble_raises_unavailable_after_the_connection_timeout() -> None:
    (port,) = free_ports(1)  # nothing listens there
    client = KafkaZkClient(f"127.0.0.1:{port}", "/kafka", session_timeout_ms=6000,
                           connection_timeout_ms=1000)
    started = time.monotonic()
    with pytest.raises(ZooKeeperUnavailableError) as info:
        client.start()
    elapsed = time.monotonic() - started
    assert 0.9 < elapsed < 3.0
    assert f"127.0.0.1:{port}" in str(info.value) and "CONNECTING" in str(info.value)
    assert not client.connected


def test_cluster_id_is_stable_across_clients(zk_client: KafkaZkClient,
                                             new_client: Callable[[], KafkaZkClient]) -> None:
    assert zk_client.get_cluster_id() is None
    cluster_id = zk_client.get_or_create_cluster_id()
    assert len(cluster_id) == 22
    assert new_client().get_or_create_cluster_id() == cluster_id
    assert zk_client.get_or_create_cluster_id() == cluster_id


def test_generated_broker_ids_increase_above_reserved_max(
        zk_client: KafkaZkClient, new_client: Callable[[], KafkaZkClient]) -> None:
    zk_client.ensure_persistent_paths()
    other = new_client()
    ids = [zk_client.generate_broker_id(1000), other.generate_broker_id(1000),
           zk_client.generate_broker_id(1000)]
    assert ids == [1001, 1002, 1003]
    assert other.generate_broker_id(5000) == 5004


def test_registration_is_readable_and_vanishes_on_close(
        zk_client: KafkaZkClient, new_client: Callable[[], KafkaZkClient]) -> None:
    broker = new_client()
    reg = registration(1)
    epoch = broker.register_broker(reg)
    assert epoch > 0 and broker.broker_epoch == epoch
    # A retried create on the same session reuses the znode (same epoch).
    assert broker.register_broker(reg) == epoch
    # Another session's write reaches this one's server a moment later (ZooKeeper reads are
    # not linearizable), which a loaded machine stretches: wait for it, as brokers do.
    wait_for(lambda: zk_client.get_broker(1) is not None, timeout=10)
    found = zk_client.get_broker(1)
    assert found is not None and found.endpoints == reg.endpoints and found.rack == "r1"
    assert found.version == 5 and found.timestamp is not None
    data, stat = zk_client.get(zd.broker_path(1))
    assert stat.czxid == epoch and stat.ephemeralOwner == broker.session_id
    assert b'"host":"localhost"' in data and b'"version":5' in data
    new_client().register_broker(registration(2, 9093))
    wait_for(lambda: zk_client.get_broker_ids() == [1, 2], timeout=10)
    assert [b.id for b in zk_client.get_all_brokers()] == [1, 2]
    broker.close()
    wait_for(lambda: zk_client.get_broker_ids() == [2], timeout=3)
    assert zk_client.get_broker(1) is None


def test_a_live_broker_id_cannot_be_registered_twice(
        zk_client: KafkaZkClient, new_client: Callable[[], KafkaZkClient]) -> None:
    zk_client.register_broker(registration(3))
    with pytest.raises(ZkNodeExistsError, match="broker id 3 is already registered"):
        new_client().register_broker(registration(3, 9999))


def test_session_expiry_reregisters_the_broker(
        zk_ensemble: ZooKeeperEnsemble, zk_client: KafkaZkClient,
        new_client: Callable[[], KafkaZkClient]) -> None:
    epochs: list[int] = []
    states: list[str] = []
    sessions: list[int] = []
    zk_client.set_registration_listener(epochs.append)
    zk_client.add_state_listener(states.append)
    zk_client.add_session_listener(sessions.append)
    first_epoch = zk_client.register_broker(registration(4))
    old_session = zk_client.session_id
    expire_session(zk_ensemble, zk_client)
    wait_for(lambda: epochs and sessions, timeout=10)
    assert "LOST" in states and states[-1] == "CONNECTED"
    assert epochs[0] > first_epoch and zk_client.broker_epoch == epochs[0]
    assert sessions == [zk_client.session_id] and zk_client.session_id != old_session
    observer = new_client()
    _, stat = observer.get(zd.broker_path(4))
    assert stat.czxid == epochs[0] and stat.ephemeralOwner == zk_client.session_id
    assert observer.get_broker(4).endpoints == registration(4).endpoints


def test_topic_lifecycle(zk_client: KafkaZkClient,
                         new_client: Callable[[], KafkaZkClient]) -> None:
    zk_client.ensure_persistent_paths()
    seen: list[list[str]] = []
    new_client().watch_children(zd.TOPICS_PATH, seen.append)
    topic_id = zd.random_uuid()
    zk_client.create_topic("orders", topic_id, {0: [1, 2], 1: [2, 1]}, {"retention.ms": "1000"})
    assignment = zk_client.get_topic_assignment("orders")
    assert assignment == TopicAssignment({0: [1, 2], 1: [2, 1]}, topic_id)
    assert zk_client.get_entity_config("topics", "orders") == {"retention.ms": "1000"}
    assert zk_client.get_all_topics() == ["orders"]
    wait_for(lambda: seen and seen[-1] == ["orders"], timeout=5)
    with pytest.raises(TopicAlreadyExistsError, match=r"Topic 'orders' already exists\."):
        zk_client.create_topic("orders", zd.random_uuid(), {0: [1]}, {})

    # CreatePartitions: a conditional rewrite of the assignment.
    grown = TopicAssignment({0: [1, 2], 1: [2, 1], 2: [1, 2]}, topic_id)
    version = zk_client.set_topic_assignment("orders", grown, assignment.zk_version)
    assert version == assignment.zk_version + 1
    with pytest.raises(ZkBadVersionError):
        zk_client.set_topic_assignment("orders", grown, assignment.zk_version)
    assert zk_client.get_topic_assignment("orders").partitions[2] == [1, 2]

    # A config change: the override znode plus a change notification for every broker.
    seq = zk_client.set_entity_config("topics", "orders", {"cleanup.policy": "compact"})
    assert seq.startswith("config_change_")
    assert zk_client.get_entity_config("topics", "orders") == {"cleanup.policy": "compact"}
    changes = zk_client.read_change_notifications()
    assert changes == [(seq, "topics", "orders")]
    assert zk_client.read_change_notifications(after=seq) == []
    assert zk_client.get_all_entity_names("topics") == ["orders"]

    # Deletion: marked by the admin, znodes removed by the controller.
    assert zk_client.mark_topic_for_deletion("orders") is True
    assert zk_client.mark_topic_for_deletion("orders") is False
    assert zk_client.get_topics_marked_for_deletion() == ["orders"]
    with pytest.raises(TopicAlreadyExistsError, match="marked for deletion"):
        zk_client.delete_recursive(zd.topic_path("orders"))  # as if deleted but still marked
        zk_client.create_topic("orders", zd.random_uuid(), {0: [1]}, {})
    zk_client.delete_topic_znodes("orders")
    assert zk_client.get_topic_assignment("orders") is None
    assert zk_client.get_entity_config("topics", "orders") == {}
    assert zk_client.get_topics_marked_for_deletion() == []
    with pytest.raises(UnknownTopicOrPartitionError):
        zk_client.mark_topic_for_deletion("orders")
    wait_for(lambda: seen[-1] == [], timeout=5)


def test_old_change_notifications_are_purged(zk_client: KafkaZkClient) -> None:
    zk_client.set_entity_config("brokers", "<default>", {"log.retention.ms": "1"})
    zk_client.set_entity_config("users", zd.sanitize("a b"), {"producer_byte_rate": "1024"})
    changes = zk_client.read_change_notifications(purge=False)
    assert [(c.entity_type, c.entity_name) for c in changes] == [
        ("brokers", "<default>"), ("users", "a%20b")]
    # Kafka keeps them 15 minutes; with a zero age limit every one is old enough to go.
    time.sleep(0.05)
    assert len(zk_client.read_change_notifications(max_age_ms=0)) == 2
    assert zk_client.get_children(zd.CONFIG_CHANGES_PATH) == []


def test_partition_state_conditional_updates(zk_client: KafkaZkClient) -> None:
    zk_client.create_topic("t", zd.random_uuid(), {0: [1, 2], 1: [2, 1]}, {})
    states = {p: PartitionState(leader=r[0], leader_epoch=0, isr=r, controller_epoch=1)
              for p, r in {0: [1, 2], 1: [2, 1]}.items()}
    zk_client.create_partition_states("t", states)
    with pytest.raises(ZkNodeExistsError):
        zk_client.create_partition_states("t", {0: states[0]})
    state, version = zk_client.get_partition_state("t", 0)
    assert state == states[0] and version == 0
    assert zk_client.get_partition_states("t") == {0: (states[0], 0), 1: (states[1], 0)}
    assert zk_client.get_partition_state("t", 9) is None

    shrunk = PartitionState(leader=1, leader_epoch=0, isr=[1], controller_epoch=1)
    assert zk_client.update_partition_state("t", 0, shrunk, version) == 1
    with pytest.raises(ZkBadVersionError):  # a stale writer loses
        zk_client.update_partition_state("t", 0, states[0], version)
    assert zk_client.get_partition_state("t", 0) == (shrunk, 1)

    # Writes fenced by the controller epoch's znode version (a zombie controller loses).
    epoch = zk_client.try_elect_controller(1)
    assert epoch == 1
    good = zk_client.controller_epoch_zk_version
    moved = PartitionState(leader=2, leader_epoch=1, isr=[2], controller_epoch=epoch)
    with pytest.raises(ControllerMovedError):
        zk_client.update_partition_state("t", 0, moved, 1, good + 1)
    assert zk_client.update_partition_state("t", 0, moved, 1, good) == 2
    with pytest.raises(ControllerMovedError):
        zk_client.create_partition_states("t", {2: moved}, good + 1)
    zk_client.create_partition_states("t", {2: moved}, good)
    assert zk_client.get_partition_state("t", 2) == (moved, 0)


def test_producer_id_blocks_never_overlap(new_client: Callable[[], KafkaZkClient]) -> None:
    clients = [new_client(), new_client()]
    clients[0].ensure_persistent_paths()  # /latest_producer_id_block exists, empty
    blocks: list[tuple[int, int]] = []
    lock = threading.Lock()

    def allocate(client: KafkaZkClient, broker_id: int) -> None:
        for _ in range(8):
            block = client.allocate_producer_id_block(broker_id)
            with lock:
                blocks.append(block)

    threads = [threading.Thread(target=allocate, args=(c, i)) for i, c in enumerate(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    blocks.sort()
    assert blocks == [(i * 1000, i * 1000 + 999) for i in range(16)]
    data, _ = clients[1].get(zd.PRODUCER_ID_BLOCK_PATH)
    assert zd.ProducerIdBlock.decode(data).last == 15999


def test_controller_election(new_client: Callable[[], KafkaZkClient]) -> None:
    brokers = {i: new_client() for i in (1, 2, 3)}
    results: dict[int, int | None] = {}
    barrier = threading.Barrier(3)

    def elect(broker_id: int) -> None:
        barrier.wait()
        results[broker_id] = brokers[broker_id].try_elect_controller(broker_id)

    threads = [threading.Thread(target=elect, args=(i,)) for i in brokers]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    winners = [i for i, epoch in results.items() if epoch is not None]
    assert len(winners) == 1 and results[winners[0]] == 1
    winner = winners[0]
    for client in brokers.values():
        assert client.get_controller_id() == winner
        assert client.get_controller_epoch() == (1, 1)
    data, _ = brokers[winner].get(zd.CONTROLLER_PATH)
    assert zd.decode_controller_kraft_epoch(data) == -1

    # The controller goes away: another broker takes over with the next epoch.
    brokers[winner].close()
    other = next(i for i in brokers if i != winner)
    wait_for(lambda: brokers[other].get_controller_id() is None, timeout=3)
    assert brokers[other].try_elect_controller(other) == 2
    assert brokers[other].get_controller_epoch() == (2, 2)
    third = next(i for i in brokers if i not in (winner, other))
    assert brokers[third].try_elect_controller(third) is None
    assert brokers[other].resign_controller() is True
    assert brokers[third].resign_controller() is False


def test_data_watch_sees_creation_change_and_deletion(
        zk_client: KafkaZkClient, new_client: Callable[[], KafkaZkClient]) -> None:
    seen: list[bytes | None] = []
    handle = zk_client.watch_data("/w", lambda data, stat: seen.append(data))
    writer = new_client()
    writer.ensure_path("/w")
    wait_for(lambda: seen[-1:] == [b""])
    writer.kazoo.set("/w", b"x")
    wait_for(lambda: seen[-1:] == [b"x"])
    writer.delete_recursive("/w")
    wait_for(lambda: seen[-1:] == [None])
    assert seen[0] is None
    handle.cancel()
    writer.ensure_path("/w")
    time.sleep(0.2)
    assert seen[-1] is None


def test_async_wrapper_delivers_on_the_loop(zk_ensemble: ZooKeeperEnsemble,
                                            zk_chroot: str) -> None:
    async def scenario() -> None:
        loop_thread = threading.get_ident()
        azk = AsyncZk(KafkaZkClient(zk_ensemble.connect_string, zk_chroot, 6000, 15000))
        await azk.start()
        try:
            await azk.call(azk.client.ensure_persistent_paths)
            got: asyncio.Queue[tuple[int, list[str]]] = asyncio.Queue()

            async def on_children(children: list[str]) -> None:
                await got.put((threading.get_ident(), children))

            states: list[str] = []
            azk.add_state_listener(states.append)
            await azk.watch_children(zd.BROKER_IDS_PATH, on_children)
            assert await asyncio.wait_for(got.get(), 5) == (loop_thread, [])
            await azk.call(azk.client.register_broker, registration(7))
            assert await asyncio.wait_for(got.get(), 5) == (loop_thread, ["7"])
            assert await azk.call(azk.client.get_broker_ids) == [7]
            assert await azk.call(lambda: threading.get_ident()) != loop_thread
        finally:
            await azk.close()

    asyncio.run(scenario())


def test_unique_chroots(zk_chroot: str) -> None:
    assert zk_chroot.startswith("/t-") and zk_chroot != f"/t-{uuid.uuid4().hex[:12]}"
