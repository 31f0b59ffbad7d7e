"""`make test-long` (MOLDAU_LONG=1): the book's quota example held for 30 s on a broker
with Kafka's default windows (11 of 1 s).

- clueful at 1 MB/s produce and 10 MB/s consume: after the first 11 s the broker-side
  byte-rate (sampled each second) and the client's measured rate stay near the quota
  (at most TOLERANCE over it: see there why not 5 %), and the topic's BytesInPerSec and
  BytesOutPerSec one-minute rates within 5 % of it (Kafka's own quota test criterion),
  while another client on the same broker is not throttled;
- a user quota of 10 MB/s beats a client-id quota of 1 MB/s (the user's quota applies to
  all its client ids: on PLAINTEXT the user is ANONYMOUS);
- removing the quota restores full speed within a window.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer
from metrics.jmx import broker_beans

from moldau.client.blocking import BlockingConnection
from moldau.devcluster.brokers import BrokerProcess, free_port

from .conftest import start_broker
from .raw import create_topic, produce, records, topic_name
from .test_client_quotas_enforced import alter_client_quotas

pytestmark = pytest.mark.skipif(os.environ.get("MOLDAU_LONG") != "1",
                                reason="make test-long only (MOLDAU_LONG=1)")

MB = 1_000_000
PRODUCE_QUOTA = 1 * MB
CONSUME_QUOTA = 10 * MB
WARMUP_S = 11.0  # Kafka's quota tests check after the first 11 windows
HOLD_S = WARMUP_S + 30.0  # then 30 s
# Kafka's arithmetic (rate_sensors.py) lets a client that always has more to send run up
# to about 1/(windows - 1) over its quota over a 30 s stretch: a fresh client's first
# burst (measured over 10 windows) leaves the windows a whole window at a time, 11 s
# later, and the room it leaves is filled again at once. A model of the arithmetic alone
# (no broker) gives 1.10 x the quota for [11 s, 41 s] and up to 1.10 for the byte-rate,
# and 1.22 for [11 s, 29 s]: the broker measured 1.21 there, as modelled, and 1.09 (produce)
# and 1.12 (consume) over [11 s, 41 s]. Kafka 3.9.1 with this client measured the same
# (`make compat-quotas`, docs/security.md "Measured against Kafka 3.9.1": 1.09 and 1.12,
# its byte-rate read up to 1.18). The holds below allow 15 %; Kafka's own system test
# (quota_test.py) holds the broker's one-minute BytesIn and BytesOut rates within 5 %
# (KAFKA_CRITERION, checked below too) and allows the client 100 %.
TOLERANCE = 1.15
KAFKA_CRITERION = 1.05
# the byte-rate read at a given second: the rate also rises when a window leaves the
# measured span (it shrinks), so a momentary reading runs higher than the hold's average
# (the first run read up to 1.19 x the consume quota, while the consumer paused)
MOMENTARY = 1.2
VALUE = b"c" * 1000


@pytest.fixture(scope="module")
def broker(tmp_path_factory, zk_ensemble) -> Iterator[BrokerProcess]:
    metrics_port = free_port()
    b = start_broker(tmp_path_factory, zk_ensemble.connect_string, {
        "num.partitions": "1", "offsets.topic.replication.factor": "1"},
        env={"MOLDAU_METRICS_PORT": str(metrics_port)})
    try:
        yield b
    finally:
        b.stop()


def _set(broker: BrokerProcess, quotas: dict[str, dict[str, float]], remove: bool = False,
         entity_type: str = "client-id") -> None:
    with BlockingConnection("127.0.0.1", broker.port, client_id="admin") as conn:
        alter_client_quotas(conn, quotas, remove=remove, entity_type=entity_type)
    time.sleep(0.5)  # the change notification reaches the broker


class Meter:
    """Bytes a client got through, per second since it started."""

    def __init__(self) -> None:
        self.start = time.monotonic()
        self.by_second: dict[int, int] = {}

    def add(self, n: int) -> None:
        second = int(time.monotonic() - self.start)
        self.by_second[second] = self.by_second.get(second, 0) + n

    def rate(self, first: float, last: float) -> float:
        return sum(n for s, n in self.by_second.items() if first <= s < last) / (last - first)


def _produce(broker: BrokerProcess, client_id: str, topic: str, seconds: float,
             meter: Meter, pace: float | None = None, stop: threading.Event | None = None
             ) -> dict[str, Any]:
    """Produce as fast as allowed (or at `pace` bytes/s); the delivered bytes go to meter;
    the client's own throttle view (librdkafka statistics) is returned."""
    stats: dict[str, Any] = {"max_throttle": 0}

    def on_stats(text: str) -> None:
        for b in json.loads(text).get("brokers", {}).values():
            stats["max_throttle"] = max(stats["max_throttle"], b.get("throttle", {}).get("max", 0))

    producer = Producer({"bootstrap.servers": broker.bootstrap, "client.id": client_id,
                         "linger.ms": 5, "batch.size": 65536,
                         "queue.buffering.max.kbytes": 2048, "statistics.interval.ms": 1000,
                         "stats_cb": on_stats})

    def delivered(err: Any, msg: Any) -> None:
        if err is None:
            meter.add(len(msg.value()))

    sent = 0
    start = time.monotonic()
    while time.monotonic() - start < seconds and not (stop and stop.is_set()):
        if pace is not None and sent > pace * (time.monotonic() - start):
            producer.poll(0.005)
            continue
        try:
            producer.produce(topic, VALUE, on_delivery=delivered)
            sent += len(VALUE)
        except BufferError:
            producer.poll(0.01)
        producer.poll(0)
    producer.flush(30)
    return stats


def _byte_rates(broker: BrokerProcess, type_: str, client_id: str, seconds: float,
                out: list[float], meter: str = "", one_minute: list[float] | None = None
                ) -> None:
    """The broker-side byte-rate of a client's bucket, once a second; and the OneMinuteRate
    of a `meter` (a BrokerTopicMetrics MBean) into `one_minute`."""
    name = f"kafka.server:type={type_},client-id={client_id}"
    start = time.monotonic()
    while time.monotonic() - start < seconds:
        time.sleep(1.0)
        found = broker_beans(broker, f"kafka.server:type={type_},*")
        if name in found:
            out.append(found[name]["byte-rate"])
        if meter and one_minute is not None:
            found = broker_beans(broker, meter)
            if meter in found:
                one_minute.append(found[meter]["OneMinuteRate"])


def _topic_meter(name: str, topic: str) -> str:
    return f"kafka.server:type=BrokerTopicMetrics,name={name},topic={topic}"


def test_clueful_is_held_at_its_produce_and_consume_quotas(broker: BrokerProcess) -> None:
    topic, other_topic = topic_name("clueful-long"), topic_name("clueful-long-other")
    with BlockingConnection("127.0.0.1", broker.port, client_id="setup") as conn:
        create_topic(conn, topic)
        create_topic(conn, other_topic)
        # a first record: the topic's meters exist, and their one-minute rates start from
        # zero (a meter's first 5 s tick sets its average to that tick's rate), as the
        # broker-wide one does in Kafka's test, whose one client writes alone
        assert produce(conn, topic, records(1)).error_code == 0
    _set(broker, {"clueful": {"producer_byte_rate": PRODUCE_QUOTA,
                              "consumer_byte_rate": CONSUME_QUOTA}})
    time.sleep(6.0)  # a tick of the meters
    # --- produce: clueful at its quota, another client paced at 4 MB/s beside it (on a
    # topic of its own, so that the topic's BytesInPerSec is clueful's)
    clueful, other = Meter(), Meter()
    rates: list[float] = []
    one_minute: list[float] = []
    results: dict[str, Any] = {}
    threads = [
        threading.Thread(target=lambda: results.update(
            clueful=_produce(broker, "clueful", topic, HOLD_S, clueful))),
        threading.Thread(target=lambda: results.update(
            other=_produce(broker, "other", other_topic, HOLD_S, other, pace=4 * MB))),
        threading.Thread(target=_byte_rates, args=(
            broker, "Produce", "clueful", HOLD_S, rates,
            _topic_meter("BytesInPerSec", topic), one_minute))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(HOLD_S + 60)
    held = rates[int(WARMUP_S):]
    assert held and max(held) <= PRODUCE_QUOTA * MOMENTARY, rates
    measured = clueful.rate(WARMUP_S, HOLD_S)
    print(f"produce: clueful {measured:.0f} B/s, byte-rate {max(held):.0f} at most, "
          f"BytesInPerSec OneMinuteRate {max(one_minute):.0f} at most")
    assert PRODUCE_QUOTA * 0.5 < measured <= PRODUCE_QUOTA * TOLERANCE, measured
    assert one_minute and max(one_minute) <= PRODUCE_QUOTA * KAFKA_CRITERION, one_minute
    assert results["clueful"]["max_throttle"] > 0
    assert results["other"]["max_throttle"] == 0  # not throttled...
    assert other.rate(WARMUP_S, HOLD_S) > 3 * MB  # ...and at its own pace
    # --- consume: a backlog larger than 30 s at the quota (with what clueful wrote), read
    # as fast as allowed (the topic's BytesOutPerSec exists since its first record, and
    # nothing fetched it yet: its one-minute rate starts from zero)
    _produce(broker, "loader", topic, 20.0, Meter(), pace=25 * MB)
    consumed = Meter()
    rates = []
    one_minute = []
    sampler = threading.Thread(target=_byte_rates, args=(
        broker, "Fetch", "clueful", HOLD_S, rates, _topic_meter("BytesOutPerSec", topic),
        one_minute))
    sampler.start()
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "client.id": "clueful",
                         "group.id": "clueful-long", "auto.offset.reset": "earliest",
                         "enable.auto.commit": False})
    consumer.subscribe([topic])
    start = time.monotonic()
    while time.monotonic() - start < HOLD_S:
        for message in consumer.consume(1000, 0.5):
            if message.error() is None:
                consumed.add(len(message.value()))
    consumer.close()
    sampler.join(60)
    held = rates[int(WARMUP_S):]
    measured = consumed.rate(WARMUP_S, HOLD_S)
    print(f"consume: clueful {measured:.0f} B/s, byte-rate {max(held):.0f} at most, "
          f"BytesOutPerSec OneMinuteRate {max(one_minute):.0f} at most")
    assert held and max(held) <= CONSUME_QUOTA * MOMENTARY, rates
    assert CONSUME_QUOTA * 0.5 < measured <= CONSUME_QUOTA * TOLERANCE, measured
    assert one_minute and max(one_minute) <= CONSUME_QUOTA * KAFKA_CRITERION, one_minute
    _set(broker, {"clueful": {"producer_byte_rate": 0, "consumer_byte_rate": 0}},
         remove=True)


def test_a_user_quota_beats_a_client_id_quota_and_removal_restores_speed(
        broker: BrokerProcess) -> None:
    topic = topic_name("user-beats-client")
    with BlockingConnection("127.0.0.1", broker.port, client_id="setup") as conn:
        create_topic(conn, topic)
    _set(broker, {"clueful": {"producer_byte_rate": PRODUCE_QUOTA}})
    _set(broker, {"ANONYMOUS": {"producer_byte_rate": 10 * MB}}, entity_type="user")
    meter = Meter()
    _produce(broker, "clueful", topic, HOLD_S, meter)
    by_user = meter.rate(WARMUP_S, HOLD_S)
    print(f"user quota: clueful {by_user:.0f} B/s")
    # the user's 10 MB/s applies, not the client id's 1 MB/s
    assert 2 * PRODUCE_QUOTA < by_user <= 10 * MB * TOLERANCE, by_user
    # back to the client id's quota alone, held; then removed while the client runs
    _set(broker, {"ANONYMOUS": {"producer_byte_rate": 0}}, remove=True, entity_type="user")
    meter = Meter()
    stop = threading.Event()
    results: dict[str, Any] = {}
    producer = threading.Thread(target=lambda: results.update(stats=_produce(
        broker, "clueful", topic, 60.0, meter, stop=stop)))
    producer.start()
    time.sleep(15.0)  # throttled meanwhile by the client id's quota (librdkafka's view)
    held = meter.rate(11, 14)
    removed_at = time.monotonic() - meter.start
    _set(broker, {"clueful": {"producer_byte_rate": 0}}, remove=True)
    time.sleep(4.0)
    stop.set()
    producer.join(60)
    # within a window (1 s, after the notification's 0.5 s) the client runs at full speed
    second = int(removed_at) + 2
    freed = meter.rate(second, second + 1)
    print(f"removal: clueful {held:.0f} B/s before, {freed:.0f} B/s after")
    assert results["stats"]["max_throttle"] > 0
    assert freed > 3 * PRODUCE_QUOTA, (held, freed, meter.by_second)
