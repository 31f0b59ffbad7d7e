"""Client quotas enforced by a real broker (server/quotas.py), set through AlterClientQuotas
and seen by real clients: KIP-219 at the protocol level (the throttled answer at once with
its throttle time, the connection's next request held for it, a throttled fetch without
records), a producer held near its byte rate beside one that is not throttled,
`request_percentage` against a consumer polling with fetch.max.wait.ms=0, and the
controller mutation quota's error 89.

The broker measures over 2 windows of 1 s (`quota.window.num=2`), so a fresh client is
measured over 1 s and the tests stay short; the book's 30 s holds with Kafka's default 11
windows are in test_client_quotas_long.py (`make test-long`)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer
from metrics.jmx import broker_beans

from moldau.client.blocking import BlockingConnection
from moldau.devcluster.brokers import BrokerProcess, free_port
from moldau.protocol.generated.alter_client_quotas_request import AlterClientQuotasRequest
from moldau.protocol.generated.api import ApiKey
from moldau.protocol.generated.api_versions_request import ApiVersionsRequest
from moldau.protocol.generated.create_topics_request import CreateTopicsRequest
from moldau.protocol.generated.fetch_request import FetchRequest
from moldau.protocol.headers import decode_response

from .conftest import start_broker
from .raw import create_topic, metadata, produce, produce_request, records, topic_name

THROTTLING_QUOTA_EXCEEDED = 89
QUOTAS: dict[str, dict[str, float]] = {  # by client id
    "kip219-fast": {"producer_byte_rate": 20_000},
    "kip219-general": {"producer_byte_rate": 20_000},
    "fetch-throttled": {"consumer_byte_rate": 10_000},
    "clueful": {"producer_byte_rate": 100_000},
    "poller": {"request_percentage": 1},
    "mutator": {"controller_mutation_rate": 1},
    "mutator-v5": {"controller_mutation_rate": 1},
}


def alter_client_quotas(conn: BlockingConnection, quotas: dict[str, dict[str, float]],
                        remove: bool = False, entity_type: str = "client-id") -> None:
    """AlterClientQuotas for the named client ids (or users), each with its values."""
    entries = [AlterClientQuotasRequest.EntryData(
        entity=[AlterClientQuotasRequest.EntityData(entity_type=entity_type,
                                                    entity_name=name)],
        ops=[AlterClientQuotasRequest.OpData(key=k, value=float(v), remove=remove)
             for k, v in values.items()])
        for name, values in quotas.items()]
    answer = conn.request(ApiKey.ALTER_CLIENT_QUOTAS, 1,
                          AlterClientQuotasRequest(entries=entries, validate_only=False))
    assert all(e.error_code == 0 for e in answer.entries), answer


@pytest.fixture(scope="module")
def broker(tmp_path_factory, zk_ensemble) -> Iterator[BrokerProcess]:
    metrics_port = free_port()
    b = start_broker(tmp_path_factory, zk_ensemble.connect_string, {
        "quota.window.num": "2", "quota.window.size.seconds": "1",
        "controller.quota.window.num": "2", "num.partitions": "1",
        "offsets.topic.replication.factor": "1"},
        env={"MOLDAU_METRICS_PORT": str(metrics_port)})
    try:
        with BlockingConnection("127.0.0.1", b.port, client_id="admin") as conn:
            alter_client_quotas(conn, QUOTAS)
        time.sleep(1.0)  # the change notification reaches the broker's quota configs
        yield b
    finally:
        b.stop()


def _read(conn: BlockingConnection, api_key: int, version: int) -> tuple[float, Any]:
    data = conn.read_frame()
    return time.monotonic(), decode_response(data, api_key, version)[1]


@pytest.mark.parametrize(("client_id", "version"), [("kip219-fast", 9),
                                                    ("kip219-general", 8)])
def test_a_throttled_produce_is_answered_at_once_and_the_next_request_waits(
        broker: BrokerProcess, client_id: str, version: int) -> None:
    """60 kB against 20 kB/s measured over 1 s: 2 s of throttle. v9 takes the fast Produce
    path, v8 the general one; both record and mute alike."""
    topic = topic_name("kip219")
    with BlockingConnection("127.0.0.1", broker.port, client_id=client_id) as conn:
        create_topic(conn, topic)
        sent = time.monotonic()
        conn.send(ApiKey.PRODUCE, version, produce_request(topic, records(60, 1000), acks=1))
        conn.send(ApiKey.API_VERSIONS, 3, ApiVersionsRequest(
            client_software_name="t", client_software_version="1"))
        answered, produced = _read(conn, ApiKey.PRODUCE, version)
        # (read now: the throttle-time average covers the last 2 windows only)
        produce_beans = broker_beans(broker, "kafka.server:type=Produce,*")
        next_answered, _ = _read(conn, ApiKey.API_VERSIONS, 3)
    partition = produced.responses[0].partition_responses[0]
    assert partition.error_code == 0  # throttled, not refused: the records are in
    throttle_s = produced.throttle_time_ms / 1000
    assert 1.0 <= throttle_s <= 3.0, produced.throttle_time_ms
    assert answered - sent < throttle_s / 2  # the answer did not wait for the throttle
    # the pipelined request was held until the throttle time had passed
    assert next_answered - answered >= throttle_s * 0.9
    assert produce_beans[f"kafka.server:type=Produce,client-id={client_id}"][
        "throttle-time"] == produced.throttle_time_ms
    throttle_hist = broker_beans(broker, "kafka.network:type=RequestMetrics,name=ThrottleTimeMs,"
                                  "request=Produce")
    assert next(iter(throttle_hist.values()))["Max"] >= produced.throttle_time_ms


def _fetch_request(topic: str) -> FetchRequest:
    return FetchRequest(
        replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20, isolation_level=0,
        session_id=0, session_epoch=-1, forgotten_topics_data=[], rack_id="",
        topics=[FetchRequest.FetchTopic(topic=topic, partitions=[FetchRequest.FetchPartition(
            partition=0, fetch_offset=0, partition_max_bytes=1 << 20,
            log_start_offset=-1, current_leader_epoch=-1, last_fetched_epoch=-1)])])


def test_a_throttled_fetch_has_no_records(broker: BrokerProcess) -> None:
    """15 kB against 10 kB/s: the fetch is answered at once, with its throttle time and
    no records, and the connection's next request waits for the throttle."""
    topic = topic_name("fetch-throttled")
    with BlockingConnection("127.0.0.1", broker.port, client_id="writer") as conn:
        create_topic(conn, topic)
        assert produce(conn, topic, records(15, 1000)).error_code == 0
    with BlockingConnection("127.0.0.1", broker.port, client_id="fetch-throttled") as conn:
        sent = time.monotonic()
        conn.send(ApiKey.FETCH, 12, _fetch_request(topic))
        conn.send(ApiKey.FETCH, 12, _fetch_request(topic))
        answered, fetched = _read(conn, ApiKey.FETCH, 12)
        next_answered, refetched = _read(conn, ApiKey.FETCH, 12)
    assert fetched.throttle_time_ms > 0 and fetched.error_code == 0
    assert fetched.responses == []  # no records (Kafka's throttled fetch response)
    assert answered - sent < fetched.throttle_time_ms / 2000
    assert next_answered - answered >= fetched.throttle_time_ms / 1000 * 0.9
    # the bytes not sent were not counted: the next fetch finds the bucket empty
    assert refetched.responses and refetched.responses[0].partitions[0].records
    # nor are they bytes out: BytesOutPerSec counts the records that left (as Kafka
    # counts the response it sends), the second fetch's alone
    bytes_out = broker_beans(broker, "kafka.server:type=BrokerTopicMetrics,"
                                     f"name=BytesOutPerSec,topic={topic}")
    assert [b["Count"] for b in bytes_out.values()] == [
        len(refetched.responses[0].partitions[0].records)]


def _produce_for(client_id: str, topic: str, seconds: float, counted_after: float,
                 out: dict[str, Any]) -> None:
    """Produce 1 kB records as fast as the client may; the bytes acknowledged after
    `counted_after` s, and the client's view of its throttling (librdkafka statistics)."""
    stats: list[dict[str, Any]] = []
    # small requests and a small queue: each request is a small part of a window, and
    # little is left queued at the end
    producer = Producer({"bootstrap.servers": out["bootstrap"], "client.id": client_id,
                         "linger.ms": 5, "batch.size": 16384,
                         "queue.buffering.max.kbytes": 256, "statistics.interval.ms": 500,
                         "stats_cb": lambda s: stats.append(json.loads(s))})
    acked = [0]
    start = time.monotonic()

    def delivered(err: Any, msg: Any) -> None:
        if err is None and counted_after <= time.monotonic() - start <= seconds:
            acked[0] += len(msg.value())

    value = b"q" * 1000
    while time.monotonic() - start < seconds:
        try:
            producer.produce(topic, value, on_delivery=delivered)
        except BufferError:
            producer.poll(0.01)
        producer.poll(0)
    producer.flush(10)
    out[client_id] = {"rate": acked[0] / (seconds - counted_after), "stats": stats}


def _max_throttle(stats: list[dict[str, Any]]) -> int:
    return max((b.get("throttle", {}).get("max", 0) for s in stats
                for b in s.get("brokers", {}).values()), default=0)


def test_clueful_is_held_near_its_quota_while_another_client_is_not(
        broker: BrokerProcess) -> None:
    topic = topic_name("clueful")
    with BlockingConnection("127.0.0.1", broker.port, client_id="writer") as conn:
        create_topic(conn, topic)
    out: dict[str, Any] = {"bootstrap": broker.bootstrap}
    threads = [threading.Thread(target=_produce_for, args=(c, topic, 5.0, 1.5, out))
               for c in ("clueful", "unlimited")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    quota = QUOTAS["clueful"]["producer_byte_rate"]
    # held near the quota (the client's records; each request carries ~2 % overhead)
    assert out["clueful"]["rate"] <= quota * 1.2, out["clueful"]["rate"]
    assert out["clueful"]["rate"] >= quota * 0.5, out["clueful"]["rate"]
    assert _max_throttle(out["clueful"]["stats"]) > 0
    # the other client is not throttled, and far faster
    assert _max_throttle(out["unlimited"]["stats"]) == 0
    assert out["unlimited"]["rate"] > quota * 3, out["unlimited"]["rate"]
    produce_beans = broker_beans(broker, "kafka.server:type=Produce,*")
    clueful = produce_beans["kafka.server:type=Produce,client-id=clueful"]
    assert clueful["throttle-time"] > 0
    assert clueful["byte-rate"] <= quota * 1.1
    assert produce_beans["kafka.server:type=Produce,client-id=unlimited"]["throttle-time"] == 0


def _poll_for(client_id: str, topic: str, seconds: float, settings: dict[str, Any],
              out: dict[str, Any]) -> None:
    stats: list[dict[str, Any]] = []
    consumer = Consumer({"bootstrap.servers": out["bootstrap"], "client.id": client_id,
                         "group.id": f"g-{client_id}", "auto.offset.reset": "earliest",
                         "statistics.interval.ms": 500,
                         "stats_cb": lambda s: stats.append(json.loads(s)), **settings})
    consumer.subscribe([topic])
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        consumer.poll(0.05)
    consumer.close()
    out[client_id] = stats


def test_request_percentage_throttles_a_consumer_polling_without_waiting(
        broker: BrokerProcess) -> None:
    topic = topic_name("polled")
    with BlockingConnection("127.0.0.1", broker.port, client_id="writer") as conn:
        create_topic(conn, topic)
    out: dict[str, Any] = {"bootstrap": broker.bootstrap}
    threads = [
        threading.Thread(target=_poll_for, args=("poller", topic, 5.0,
                                                 {"fetch.wait.max.ms": 0}, out)),
        threading.Thread(target=_poll_for, args=("steady", topic, 5.0, {}, out))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert _max_throttle(out["poller"]) > 0
    assert _max_throttle(out["steady"]) == 0
    request_beans = broker_beans(broker, "kafka.server:type=Request,*")
    poller = request_beans["kafka.server:type=Request,client-id=poller"]
    assert poller["throttle-time"] > 0
    # at most one window per throttle (ClientRequestQuotaManager's cap)
    assert poller["throttle-time"] <= 1000
    assert request_beans["kafka.server:type=Request,client-id=steady"]["throttle-time"] == 0
    assert "exempt-request-time" in request_beans["kafka.server:type=Request"]


def _create(conn: BlockingConnection, version: int, name: str, partitions: int) -> Any:
    topic = CreateTopicsRequest.CreatableTopic(
        name=name, num_partitions=partitions, replication_factor=1, assignments=[],
        configs=[])
    return conn.request(ApiKey.CREATE_TOPICS, version, CreateTopicsRequest(
        topics=[topic], timeout_ms=10_000, validate_only=False))


def test_the_controller_mutation_quota_refuses_with_89_from_createtopics_v6(
        broker: BrokerProcess) -> None:
    """1 partition/s with a burst of 2: 6 partitions pass (overdrawing the bucket by 4,
    which takes 4 s to refill), the next topic is refused and not created; v5 is
    permissive: created, then throttled."""
    first, refused = topic_name("mut"), topic_name("mut-refused")
    with BlockingConnection("127.0.0.1", broker.port, client_id="mutator") as conn:
        answer = _create(conn, 7, first, 6)
        assert answer.topics[0].error_code == 0, answer
        assert answer.throttle_time_ms == 0
    with BlockingConnection("127.0.0.1", broker.port, client_id="mutator") as conn:
        answer = _create(conn, 7, refused, 1)
        result = answer.topics[0]
        assert result.error_code == THROTTLING_QUOTA_EXCEEDED
        assert result.error_message == "The throttling quota has been exceeded."
        assert 0 < answer.throttle_time_ms <= 4000
        # (read now: throttle-time averages the last 2 windows)
        mutation = broker_beans(broker, "kafka.server:type=ControllerMutation,*")
    with BlockingConnection("127.0.0.1", broker.port, client_id="writer") as conn:
        shown = metadata(conn, [refused], allow_auto_topic_creation=False).topics[0]
        assert shown.error_code == 3  # UNKNOWN_TOPIC_OR_PARTITION: nothing was created
    with BlockingConnection("127.0.0.1", broker.port, client_id="mutator-v5") as conn:
        answer = _create(conn, 5, topic_name("mut-old"), 6)
        assert answer.topics[0].error_code == 0  # permissive: created over the burst...
        # ...and throttled: 4 tokens short, less the time the creation took
        assert 0 < answer.throttle_time_ms <= 4000
    bean = mutation["kafka.server:type=ControllerMutation,client-id=mutator"]
    # below the burst of 2 (refilling at 1/s), throttled, mutating
    assert bean["tokens"] < 2 and bean["throttle-time"] > 0 and bean["mutation-rate"] > 0
