"""Client quotas measured on Apache Kafka 3.9.1 and on Moldau, the same way (issue 37).

    make compat-quotas                          3 rounds, the table, results.json
    PYTHONPATH=. .venv/bin/python -m compat.quotas --rounds 1 --dir /tmp/q

Not a transcript scenario: what it compares is figures, which differ from run to run. One
ZooKeeper node, a Kafka 3.9.1 broker (JMX on, as kafka-run-class.sh with JMX_PORT) and a
Moldau broker (its /jmx endpoint), both with Kafka's default quota windows
(`quota.window.num=11`, `quota.window.size.seconds=1`) and the book's quota for client id
`clueful`: `producer_byte_rate=1000000`, `consumer_byte_rate=10000000` (the long test's
1 MB/s and 10 MB/s). Each round runs on one broker, then the other (the order alternates
between rounds, so a busy spell of the shared machine does not always hit the same one),
the other broker idle meanwhile, the workload of test_client_quotas_long.py:

- produce: confluent-kafka (librdkafka) with client id clueful, 1000-byte values,
  linger.ms=5, batch.size=65536, queue.buffering.max.kbytes=2048, as fast as allowed for
  HOLD_S seconds, beside client id `other` paced at 4 MB/s on a topic of its own;
- consume: a backlog of BACKLOG_BYTES written first by an unthrottled client, then read by
  a confluent-kafka consumer with client id clueful (defaults, a fresh group) for HOLD_S
  seconds.

What is measured, each second: the bytes the client got through (delivery reports, or
the values it consumed); the broker's quota sensor `kafka.server:type=Produce|Fetch,
client-id=clueful` `byte-rate` (Kafka: JmxTool over JMX, Moldau: /jmx); and what Kafka's
own system test (tests/kafkatest/tests/client/quota_test.py) checks, the broker's
`BytesInPerSec` or `BytesOutPerSec` OneMinuteRate, here the measured topic's (its meter
primed before the round, so its moving average starts from zero as the broker-wide one
does in Kafka's test, which has no other client). Reported against the quota: the
client's rate over [WARMUP_S, HOLD_S), the sensor's largest and mean reading there, and
the largest OneMinuteRate of the run. Kafka's test allows the client 100 % over the
quota and the broker's OneMinuteRate 5 %.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import io
import json
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from compat import launcher
from compat.lab import SHARED_PROPERTIES, ZK_TICK_MS, BrokerPair, KafkaBroker
from moldau.client.blocking import BlockingConnection
from moldau.cluster.zk_ensemble import ZooKeeperEnsemble
from moldau.devcluster.brokers import BrokerProcess, free_port
from moldau.protocol.generated.alter_client_quotas_request import AlterClientQuotasRequest
from moldau.protocol.generated.api import ApiKey

MB = 1_000_000
CLIENT_ID = "clueful"
PRODUCE_QUOTA = 1 * MB
CONSUME_QUOTA = 10 * MB
WARMUP_S = 11.0  # Kafka's windows: 11 of 1 s
HOLD_S = 41.0  # then 30 s
OTHER_PACE = 4 * MB
BACKLOG_BYTES = 650 * MB  # more than HOLD_S at the consume quota, first burst included
VALUE = b"c" * 1000
PROPERTIES = {"quota.window.num": "11", "quota.window.size.seconds": "1"}
JMX_TOOL = "org.apache.kafka.tools.JmxTool"
KAFKA, MOLDAU = "kafka", "moldau"
PRODUCE, CONSUME = "produce", "consume"
QUOTA = {PRODUCE: PRODUCE_QUOTA, CONSUME: CONSUME_QUOTA}


# --- the brokers -------------------------------------------------------------------------

@dataclass
class Brokers:
    zookeeper: ZooKeeperEnsemble
    kafka: KafkaBroker
    moldau: BrokerProcess
    kafka_jmx_port: int
    moldau_metrics_port: int

    def bootstrap(self, name: str) -> str:
        return self.kafka.bootstrap if name == KAFKA else self.moldau.bootstrap

    def port(self, name: str) -> int:
        return self.kafka.port if name == KAFKA else self.moldau.port


@contextlib.contextmanager
def brokers(directory: Path) -> Iterator[Brokers]:
    """The lab's shape (compat/lab.py) with the quota windows set and the metrics on."""
    zookeeper = ZooKeeperEnsemble(directory / "zookeeper", size=1, tick_time=ZK_TICK_MS,
                                  die_with_parent=True)
    zookeeper.start(timeout=60)
    pair = BrokerPair.create(directory, zookeeper.connect_string, "",
                             {**SHARED_PROPERTIES, **PROPERTIES})
    jmx_port, metrics_port = free_port(), free_port()
    pair.kafka.jvm_options = launcher.jmx_options(jmx_port)
    pair.moldau.env = {"MOLDAU_METRICS_PORT": str(metrics_port)}
    try:
        pair.kafka.start()
        pair.moldau.start(wait=None)
        pair.moldau.wait_healthy(60)
        pair.kafka.wait_ready()
        yield Brokers(zookeeper, pair.kafka, pair.moldau, jmx_port, metrics_port)
    finally:
        pair.stop()
        zookeeper.stop()


def set_quotas(port: int) -> None:
    """AlterClientQuotas, as `kafka-configs --bootstrap-server ... --alter --entity-type
    clients --entity-name clueful --add-config producer_byte_rate=...,consumer_byte_rate=...`
    sends it."""
    entry = AlterClientQuotasRequest.EntryData(
        entity=[AlterClientQuotasRequest.EntityData(entity_type="client-id",
                                                    entity_name=CLIENT_ID)],
        ops=[AlterClientQuotasRequest.OpData(key="producer_byte_rate",
                                             value=float(PRODUCE_QUOTA), remove=False),
             AlterClientQuotasRequest.OpData(key="consumer_byte_rate",
                                             value=float(CONSUME_QUOTA), remove=False)])
    with BlockingConnection("127.0.0.1", port, client_id="admin") as conn:
        answer = conn.request(ApiKey.ALTER_CLIENT_QUOTAS, 1,
                              AlterClientQuotasRequest(entries=[entry], validate_only=False))
    if any(e.error_code for e in answer.entries):
        raise RuntimeError(f"AlterClientQuotas failed: {answer}")


def create_topics(bootstrap: str, names: Sequence[str]) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap, "client.id": "admin", "log_level": 3})
    for future in admin.create_topics([NewTopic(n, 1, 1) for n in names]).values():
        future.result(60)


def delete_topics(bootstrap: str, names: Sequence[str]) -> None:
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap, "client.id": "admin", "log_level": 3})
    for future in admin.delete_topics(list(names)).values():
        with contextlib.suppress(Exception):
            future.result(60)


# --- the clients (test_client_quotas_long.py's) ---------------------------------------------

class Meter:
    """Bytes a client got through, per second since `start` (time.time())."""

    def __init__(self, start: float) -> None:
        self.start = start
        self.by_second: dict[int, int] = {}

    def add(self, n: int) -> None:
        second = int(time.time() - self.start)
        self.by_second[second] = self.by_second.get(second, 0) + n

    def rate(self, first: float, last: float) -> float:
        return sum(n for s, n in self.by_second.items() if first <= s < last) / (last - first)


def produce(bootstrap: str, client_id: str, topic: str, seconds: float, meter: Meter,
            pace: float | None = None, limit: int | None = None) -> int:
    """As fast as allowed (or at `pace` bytes/s), for `seconds` or until `limit` bytes are
    delivered; the delivered bytes go to `meter`. Returns the bytes delivered."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "client.id": client_id,
                         "linger.ms": 5, "batch.size": 65536,
                         "queue.buffering.max.kbytes": 2048})
    delivered = [0]

    def on_delivery(err: Any, msg: Any) -> None:
        if err is None:
            meter.add(len(msg.value()))
            delivered[0] += len(msg.value())

    sent = 0
    start = time.monotonic()
    while time.monotonic() - start < seconds and (limit is None or sent < limit):
        if pace is not None and sent > pace * (time.monotonic() - start):
            producer.poll(0.005)
            continue
        try:
            producer.produce(topic, VALUE, on_delivery=on_delivery)
            sent += len(VALUE)
        except BufferError:
            producer.poll(0.01)
        producer.poll(0)
    producer.flush(60)
    return delivered[0]


def prime_fetch(bootstrap: str, topic: str) -> None:
    """One small fetch of `topic` (client id setup), so the topic's BytesOutPerSec meter
    exists before the measured consumer comes (Kafka creates a topic's meters at their
    first use)."""
    from confluent_kafka import Consumer

    consumer = Consumer({"bootstrap.servers": bootstrap, "client.id": "setup",
                         "group.id": f"setup-{topic}", "auto.offset.reset": "earliest",
                         "enable.auto.commit": False, "message.max.bytes": 65536,
                         "fetch.max.bytes": 65536, "max.partition.fetch.bytes": 65536,
                         "queued.max.messages.kbytes": 64})
    consumer.subscribe([topic])
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not consumer.consume(1, 0.5):
        pass
    consumer.close()


def consume(bootstrap: str, topic: str, group: str, seconds: float, meter: Meter) -> None:
    from confluent_kafka import Consumer

    consumer = Consumer({"bootstrap.servers": bootstrap, "client.id": CLIENT_ID,
                         "group.id": group, "auto.offset.reset": "earliest",
                         "enable.auto.commit": False})
    consumer.subscribe([topic])
    start = time.monotonic()
    while time.monotonic() - start < seconds:
        for message in consumer.consume(1000, 0.5):
            value = message.value()
            if message.error() is None and value is not None:
                meter.add(len(value))
    consumer.close()


# --- the broker's metrics, once a second -------------------------------------------------

@dataclass
class Reading:
    at: float  # time.time()
    values: dict[str, float]  # "<mbean>:<attribute>" -> value


class Sampler:
    """Readings of some MBean attributes once a second until `stop`."""

    def __init__(self, wanted: Sequence[tuple[str, str]]) -> None:
        self.wanted = list(wanted)  # (mbean, attribute)
        self.readings: list[Reading] = []

    def start(self) -> None:
        raise NotImplementedError

    def stop(self) -> None:
        raise NotImplementedError

    def series(self, mbean: str, attribute: str, start: float) -> list[tuple[float, float]]:
        """(seconds since start, value) of one attribute."""
        key = f"{mbean}:{attribute}"
        return [(r.at - start, r.values[key]) for r in self.readings if key in r.values]


class MoldauSampler(Sampler):
    """Moldau's /jmx endpoint (MOLDAU_METRICS_PORT)."""

    def __init__(self, port: int, wanted: Sequence[tuple[str, str]]) -> None:
        super().__init__(wanted)
        self.port = port
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _run(self) -> None:
        # at a fixed rate, as JmxTool reads (a reading does not push the next one later)
        due = time.monotonic()
        while True:
            due += 1.0
            if self._stop.wait(max(0.0, due - time.monotonic())):
                return
            values: dict[str, float] = {}
            for mbean, attribute in self.wanted:
                url = f"http://127.0.0.1:{self.port}/jmx?qry={mbean}"
                with contextlib.suppress(OSError, ValueError), \
                        urllib.request.urlopen(url, timeout=5) as answer:
                    for bean in json.load(answer)["beans"]:
                        if bean["name"] == mbean and attribute in bean:
                            values[f"{mbean}:{attribute}"] = float(bean[attribute])
            self.readings.append(Reading(time.time(), values))

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)


def parse_jmx_tool(lines: Sequence[str]) -> list[Reading]:
    """JmxTool's default output: a CSV header ("time" and "<mbean>:<attribute>" columns),
    then one line per reading, the time in epoch milliseconds."""
    rows = list(csv.reader(io.StringIO("\n".join(line for line in lines if line.strip()))))
    header: list[str] | None = None
    out: list[Reading] = []
    for row in rows:
        if row and row[0] == "time":
            header = row
            continue
        if header is None or len(row) != len(header):
            continue
        try:
            at = int(row[0]) / 1000.0
        except ValueError:
            continue
        values = {}
        for name, text in zip(header[1:], row[1:], strict=True):
            with contextlib.suppress(ValueError):
                values[name] = float(text)
        out.append(Reading(at, values))
    return out


class KafkaSampler(Sampler):
    """Kafka's JmxTool, as Kafka's system tests read a broker (one JVM, one line a
    second); it waits (up to its 10 s) for MBeans that do not exist yet."""

    def __init__(self, jmx_port: int, wanted: Sequence[tuple[str, str]], log: Path) -> None:
        super().__init__(wanted)
        # every attribute of the named MBeans: 3.9.1's JmxTool prints nothing when an
        # --attributes name is missing from one of several --object-name MBeans
        args = ["--jmx-url", launcher.jmx_url(jmx_port), "--reporting-interval", "1000",
                "--wait"]
        for mbean in dict.fromkeys(m for m, _ in wanted):
            args += ["--object-name", mbean]
        self.command = launcher.java_command(JMX_TOOL, args)
        self.log = log
        self._process: subprocess.Popen[str] | None = None
        self._lines: list[str] = []
        self._reader: threading.Thread | None = None

    def start(self) -> None:
        self._process = subprocess.Popen(self.command, stdout=subprocess.PIPE,
                                         stderr=open(self.log, "a"),  # noqa: SIM115
                                         text=True, stdin=subprocess.DEVNULL)
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self._process is not None and self._process.stdout is not None
        for line in self._process.stdout:
            self._lines.append(line.rstrip("\n"))

    def stop(self) -> None:
        if self._process is not None:
            self._process.terminate()
            try:
                self._process.wait(10)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
        if self._reader is not None:
            self._reader.join(10)
        with open(self.log, "a") as out:
            out.write("\n".join(self._lines) + "\n")
        self.readings = parse_jmx_tool(self._lines)


# --- one round on one broker -------------------------------------------------------------

@dataclass
class Phase:
    """One direction on one broker in one round, the rates as multiples of the quota."""

    broker: str
    round: int
    direction: str
    client: float  # the client's rate over [WARMUP_S, HOLD_S)
    sensor_max: float  # the quota sensor's byte-rate, largest reading in [WARMUP_S, HOLD_S)
    sensor_mean: float  # ... and its mean there
    one_minute_max: float  # the topic's Bytes{In,Out}PerSec OneMinuteRate, largest reading
    other_mb_s: float | None = None  # produce: the unthrottled client's MB/s (4 paced)
    readings: dict[str, list[tuple[float, float]]] = field(default_factory=dict)


def summarize(broker: str, round_: int, direction: str, meter: Meter,
              sensor: list[tuple[float, float]], one_minute: list[tuple[float, float]],
              other_mb_s: float | None = None) -> Phase:
    quota = QUOTA[direction]
    held = [v for t, v in sensor if WARMUP_S <= t < HOLD_S]
    return Phase(broker, round_, direction, meter.rate(WARMUP_S, HOLD_S) / quota,
                 max(held, default=float("nan")) / quota,
                 (statistics.fmean(held) if held else float("nan")) / quota,
                 max((v for t, v in one_minute if t < HOLD_S), default=float("nan")) / quota,
                 other_mb_s,
                 {"sensor": sensor, "one_minute": one_minute,
                  "client": sorted((float(s), float(n)) for s, n in meter.by_second.items())})


def sampler_for(lab: Brokers, broker: str, wanted: Sequence[tuple[str, str]],
                log: Path) -> Sampler:
    if broker == KAFKA:
        return KafkaSampler(lab.kafka_jmx_port, wanted, log)
    return MoldauSampler(lab.moldau_metrics_port, wanted)


def run_round(lab: Brokers, broker: str, round_: int, scratch: Path,
              say: Callable[[str], None]) -> list[Phase]:
    bootstrap = lab.bootstrap(broker)
    run = uuid.uuid4().hex[:6]
    measured, other, backlog = f"quota-p-{run}", f"quota-o-{run}", f"quota-c-{run}"
    create_topics(bootstrap, [measured, other, backlog])
    # a first record in the measured topic and a first fetch of the backlog, so that the
    # meters read below exist and their moving averages start from (about) zero: Yammer's
    # EWMA takes the rate of its first 5 s tick as its start, and Kafka creates a topic's
    # meters at their first use
    produce(bootstrap, "setup", measured, 10.0, Meter(time.time()), limit=len(VALUE))
    started = time.monotonic()
    loaded = produce(bootstrap, "loader", backlog, 300.0, Meter(time.time()),
                     limit=BACKLOG_BYTES)
    say(f"{broker} round {round_}: backlog of {loaded / MB:.0f} MB in "
        f"{time.monotonic() - started:.0f} s")
    prime_fetch(bootstrap, backlog)
    time.sleep(6.0)
    phases = []

    # produce
    sensor = (f"kafka.server:type=Produce,client-id={CLIENT_ID}", "byte-rate")
    meter_bean = (f"kafka.server:type=BrokerTopicMetrics,name=BytesInPerSec,topic={measured}",
                  "OneMinuteRate")
    start = time.time()
    clueful, unthrottled = Meter(start), Meter(start)
    threads = [threading.Thread(target=produce, args=(bootstrap, CLIENT_ID, measured, HOLD_S,
                                                      clueful)),
               threading.Thread(target=produce, args=(bootstrap, "other", other, HOLD_S,
                                                      unthrottled, OTHER_PACE))]
    for t in threads:
        t.start()
    sampler = sampler_for(lab, broker, [sensor, meter_bean], scratch / f"jmx-{broker}.log")
    sampler.start()
    for t in threads:
        t.join(HOLD_S + 120)
    sampler.stop()
    phases.append(summarize(broker, round_, PRODUCE, clueful, sampler.series(*sensor, start),
                            sampler.series(*meter_bean, start),
                            unthrottled.rate(WARMUP_S, HOLD_S) / MB))
    say(_line(phases[-1]))

    # consume
    sensor = (f"kafka.server:type=Fetch,client-id={CLIENT_ID}", "byte-rate")
    meter_bean = (f"kafka.server:type=BrokerTopicMetrics,name=BytesOutPerSec,topic={backlog}",
                  "OneMinuteRate")
    start = time.time()
    consumed = Meter(start)
    consumer = threading.Thread(target=consume, args=(bootstrap, backlog,
                                                      f"quota-{run}", HOLD_S, consumed))
    consumer.start()
    sampler = sampler_for(lab, broker, [sensor, meter_bean], scratch / f"jmx-{broker}.log")
    sampler.start()
    consumer.join(HOLD_S + 120)
    sampler.stop()
    phases.append(summarize(broker, round_, CONSUME, consumed, sampler.series(*sensor, start),
                            sampler.series(*meter_bean, start)))
    say(_line(phases[-1]))
    delete_topics(bootstrap, [measured, other, backlog])
    return phases


# --- the report --------------------------------------------------------------------------

def _line(p: Phase) -> str:
    other = f", other client {p.other_mb_s:.2f} MB/s" if p.other_mb_s is not None else ""
    return (f"{p.broker} round {p.round} {p.direction}: client {p.client:.3f} x quota, "
            f"byte-rate max {p.sensor_max:.3f} mean {p.sensor_mean:.3f}, OneMinuteRate max "
            f"{p.one_minute_max:.3f}{other}")


COLUMNS = (("client", "client rate"), ("sensor_max", "byte-rate max"),
           ("sensor_mean", "byte-rate mean"), ("one_minute_max", "OneMinuteRate max"))


def table(phases: Sequence[Phase]) -> str:
    """Per broker and direction: each measure's median and its per-round values."""
    out = [f"{'broker':7} {'direction':9} {'measure (x quota)':18} {'median':>7}  rounds",
           "-" * 64]
    for direction in (PRODUCE, CONSUME):
        for broker in (KAFKA, MOLDAU):
            rows = sorted((p for p in phases if p.broker == broker and p.direction == direction),
                          key=lambda p: p.round)
            if not rows:
                continue
            for attr, label in COLUMNS:
                values = [getattr(p, attr) for p in rows]
                out.append(f"{broker:7} {direction:9} {label:18} "
                           f"{statistics.median(values):7.3f}  "
                           + " ".join(f"{v:.3f}" for v in values))
    return "\n".join(out)


def main(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m compat.quotas", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--dir", type=Path, help="keep the brokers' logs and results here")
    options = parser.parse_args(argv)
    directory = (options.dir or Path(tempfile.mkdtemp(prefix="moldau-quotas-"))).absolute()
    directory.mkdir(parents=True, exist_ok=True)

    def say(text: str) -> None:
        print(text, flush=True)

    try:
        launcher.kafka_classpath()
    except launcher.LabSetupError as exc:
        print(f"compat.quotas: {exc}", file=sys.stderr)
        return 2
    phases: list[Phase] = []
    with brokers(directory / "lab") as lab:
        say(f"Kafka {launcher.KAFKA_VERSION} at {lab.kafka.bootstrap} (JMX "
            f"{lab.kafka_jmx_port}), Moldau at {lab.moldau.bootstrap} ({directory})")
        for name in (KAFKA, MOLDAU):
            set_quotas(lab.port(name))
        time.sleep(2.0)  # the /config/changes notification reaches each broker
        for round_ in range(1, options.rounds + 1):
            order = (KAFKA, MOLDAU) if round_ % 2 else (MOLDAU, KAFKA)
            for broker in order:
                phases.extend(run_round(lab, broker, round_, directory, say))
    (directory / "results.json").write_text(json.dumps([asdict(p) for p in phases], indent=1))
    say("")
    say(f"quota x 1.05 = the must-show's bound; client id {CLIENT_ID}, "
        f"{PRODUCE_QUOTA / MB:g} MB/s produce, {CONSUME_QUOTA / MB:g} MB/s consume, "
        f"windows 11 x 1 s, client rate and byte-rate over [{WARMUP_S:g} s, {HOLD_S:g} s)")
    say(table(phases))
    say(f"(per-second readings in {directory / 'results.json'})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
