"""The operations scenario's client load and judge, on the control node: the durability
checker's producer (acks=all, idempotent, moldau.checker) and a consumer group read a
topic while the playbooks run; the report says, per playbook, how long producing stalled.

  ops_probe.py run BOOTSTRAP TOPIC DIR [--tls CA CERT KEY | --client-config FILE]
                                          produce and consume until DIR/stop appears, then
                                          read everything back (the checker) and write
                                          DIR/result.json; --tls: over SSL with these PEM
                                          files (copied into DIR/tls at the start: the
                                          client keeps the material it started with, as
                                          a deployed client does until it is restarted);
                                          --client-config: a Kafka client properties file
                                          (SASL_SSL with a SCRAM login, say), read once at
                                          the start
  ops_probe.py roundtrip BOOTSTRAP TOPIC N --client-config FILE
                                          create TOPIC (RF 3) unless it exists, produce N
                                          records (acks=all) and read them back in order
                                          with those client properties; exit 1 otherwise
  ops_probe.py phase DIR NAME start|end [--at EPOCH]
                                          mark a playbook's start or end (DIR/phases.jsonl),
                                          now or at the given time
  ops_probe.py report DIR [--limit S] [--limit-for NAME=S ...]
                                          wait for result.json, print the table; exit 1
                                          when a record was lost, duplicated or reordered,
                                          the group missed acknowledged records, or a
                                          phase's longest stall reached its limit;
                                          --strict: also on any failed delivery of the
                                          whole run and any error the group's consumer
                                          returned (a client that must see no error)

A stall is the produce-to-acknowledgement time of a record: while no partition leader
accepts writes every record sent meanwhile waits, so the longest one is the longest
interruption a writer saw. The broker's checker code comes from broker/src (PYTHONPATH).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import threading
import time
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, KafkaError, Producer

from moldau.checker.cli import create_topic
from moldau.checker.consumer import verify
from moldau.checker.producer import ProducerRun
from moldau.checker.records import parse
from moldau.properties import load as load_properties
from moldau.security.sasl.jaas import client_credentials, parse_single_login_module

RATE = 100.0  # records/s over all partitions
MAX_LIFETIME_S = 3600.0  # a probe whose scenario died never outlives this


def _still_mine(directory: Path, run_id: str) -> bool:
    try:
        return (directory / "running").read_text() == run_id
    except OSError:
        return False


class TimedRun(ProducerRun):
    """A checker run that also keeps (send time, latency or None) of every record."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.samples: list[tuple[float, float | None]] = []

    def _on_delivery(self, partition: int, seq: int, err: KafkaError | None, msg: Any) -> None:
        super()._on_delivery(partition, seq, err, msg)
        if err is None and msg.offset() is None:
            # acknowledged without an offset (an answer to a retried duplicate batch):
            # the checker's report takes -1 for "offset unknown", not None
            with self._lock:
                self._writes[partition].acknowledged[seq] = -1
        latency = msg.latency() if msg is not None else None
        now = time.time()
        if latency is not None:
            self.samples.append((now - latency, latency if err is None else None))


class GroupReader(threading.Thread):
    """A consumer group member reading the run's records: counts what it saw per partition
    and any forward jump in a partition's sequence (a record the group never got)."""

    def __init__(self, bootstrap: str, topic: str, run_id: str,
                 config: dict[str, str]) -> None:
        super().__init__(daemon=True)
        self.run_id = run_id
        self.stop = threading.Event()
        self.seen: dict[int, set[int]] = {}
        self.skips: list[str] = []
        self.errors: list[str] = []
        self.consumer = Consumer({**config, "bootstrap.servers": bootstrap,
                                  "group.id": f"ops-{run_id}",
                                  "auto.offset.reset": "earliest",
                                  "session.timeout.ms": 30000})
        self.consumer.subscribe([topic])

    def run(self) -> None:
        last: dict[int, int] = {}
        while not self.stop.is_set():
            message = self.consumer.poll(0.5)
            if message is None:
                continue
            error = message.error()
            if error is not None:
                self.errors.append(f"{error.name()}: {error.str()}")
                continue
            record = parse(message.key(), message.value())
            if record is None or record.run_id != self.run_id:
                continue
            seq, p = record.sequence, record.partition
            # a sequence number is skipped only if it was never seen: a rebalance may
            # redeliver (at least once), the producer may retry a failed record
            if seq > last.get(p, -1) + 1 and not all(
                    s in self.seen.get(p, ()) for s in range(last.get(p, -1) + 1, seq)):
                self.skips.append(f"partition {p}: {last.get(p, -1)} -> {seq}")
            last[p] = max(last.get(p, -1), seq)
            self.seen.setdefault(p, set()).add(seq)
        self.consumer.close()


def tls_config(directory: Path, ca: str, cert: str, key: str) -> dict[str, str]:
    """librdkafka's SSL settings with copies of the PEM files in DIR/tls."""
    tls = directory / "tls"
    tls.mkdir(exist_ok=True)
    copies = {}
    for name, source in (("ca.pem", ca), ("client.crt", cert), ("client.key", key)):
        copies[name] = str(shutil.copyfile(source, tls / name))
    return {"security.protocol": "SSL", "ssl.ca.location": copies["ca.pem"],
            "ssl.certificate.location": copies["client.crt"],
            "ssl.key.location": copies["client.key"]}


def client_properties(path: str) -> dict[str, str]:
    """A Kafka client properties file (security.protocol, sasl.mechanism, a Plain or Scram
    sasl.jaas.config, a PEM trust store) as librdkafka settings. Not moldau.client's
    translation: that one loads the OAUTHBEARER and GSSAPI logins too, whose packages the
    control node's Ansible venv does not have."""
    props = load_properties(path)
    config = {"security.protocol": props.get("security.protocol", "PLAINTEXT")}
    if "sasl.mechanism" in props:
        credentials = client_credentials(parse_single_login_module(props["sasl.jaas.config"]))
        if credentials is None:
            raise SystemExit(f"{path}: sasl.jaas.config has no username and password")
        config.update({"sasl.mechanism": props["sasl.mechanism"],
                       "sasl.username": credentials[0], "sasl.password": credentials[1]})
    if "ssl.truststore.location" in props:
        config["ssl.ca.location"] = props["ssl.truststore.location"]
    return config


def run(bootstrap: str, topic: str, directory: Path, tls: list[str] | None = None,
        client_config: str | None = None) -> int:
    directory.mkdir(parents=True, exist_ok=True)
    # its own pid (the shell's $! may be setsid's, which forks): stop-stale-probe reads it
    (directory / "pid").write_text(str(os.getpid()))
    config = (tls_config(directory, *tls) if tls
              else client_properties(client_config) if client_config else {})
    create_topic(bootstrap, topic, partitions=6, replication_factor=3, min_insync_replicas=2,
                 config=config, timeout=90)
    producer = TimedRun(bootstrap, topic, rate=RATE, config=config)
    reader = GroupReader(bootstrap, topic, producer.run_id, config)
    reader.start()
    producer.start()
    (directory / "running").write_text(producer.run_id)
    deadline = time.monotonic() + MAX_LIFETIME_S
    while not (directory / "stop").exists():
        if not _still_mine(directory, producer.run_id) or time.monotonic() > deadline:
            # the scenario ended without stopping this probe (its directory was removed
            # or a newer probe took it over): stop producing, report nothing
            reader.stop.set()
            producer.stop(5)
            return 3
        time.sleep(0.5)
    report = verify(producer, timeout=120)
    acked = {p: set(w.acknowledged) for p, w in producer.writes().items()}
    deadline = time.monotonic() + 60  # the group catches up with the end
    while time.monotonic() < deadline and any(
            not acked[p] <= reader.seen.get(p, set()) for p in acked):
        time.sleep(0.5)
    reader.stop.set()
    reader.join(10)
    missed = {p: len(acked[p] - reader.seen.get(p, set())) for p in acked}
    result = {"report": report.to_dict(), "summary": report.summary(),
              "samples": producer.samples, "group_missed": missed,
              "group_skips": reader.skips[:20], "group_errors": reader.errors[:20]}
    (directory / "result.json").write_text(json.dumps(result))
    return 0


def roundtrip(bootstrap: str, topic: str, count: int, client_config: str) -> int:
    """count records produced with acks=all and read back in order by a consumer of its
    own group, every client with the properties of client_config."""
    config = client_properties(client_config)
    create_topic(bootstrap, topic, partitions=1, replication_factor=3, min_insync_replicas=2,
                 config=config, timeout=90)
    tag = f"{os.getpid()}-{time.time_ns()}"
    sent = [f"{tag}-{i}".encode() for i in range(count)]
    errors: list[str] = []

    def delivered(err: KafkaError | None, _message: Any) -> None:
        if err is not None:
            errors.append(err.str())

    producer = Producer({**config, "bootstrap.servers": bootstrap, "acks": "all",
                         "enable.idempotence": True})
    for value in sent:
        producer.produce(topic, value, on_delivery=delivered)
    left = producer.flush(60)
    if left or errors:
        print(f"produce failed: {left} not delivered, errors {errors[:5]}")
        return 1
    consumer = Consumer({**config, "bootstrap.servers": bootstrap,
                         "group.id": f"ops-roundtrip-{tag}", "auto.offset.reset": "earliest",
                         "enable.auto.commit": False})
    consumer.subscribe([topic])
    got: list[bytes] = []
    deadline = time.monotonic() + 60
    while len(got) < count and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is None:
            continue
        error = message.error()
        if error is not None:
            errors.append(f"{error.name()}: {error.str()}")
            continue
        value = message.value() or b""
        if value.startswith(tag.encode() + b"-"):
            got.append(value)
    consumer.close()
    if got != sent or errors:
        print(f"read back {len(got)} of {count} records (in order: {got == sent[:len(got)]}), "
              f"errors {errors[:5]}")
        return 1
    print(f"{count} records produced and read back in order on {topic}")
    return 0


def mark(directory: Path, name: str, edge: str, at: float | None) -> int:
    with (directory / "phases.jsonl").open("a") as f:
        f.write(json.dumps({"name": name, "edge": edge, "at": at or time.time()}) + "\n")
    return 0


def phases(directory: Path) -> list[tuple[str, float, float]]:
    starts: dict[str, float] = {}
    out = []
    for line in (directory / "phases.jsonl").read_text().splitlines():
        entry = json.loads(line)
        if entry["edge"] == "start":
            starts[entry["name"]] = entry["at"]
        else:
            out.append((entry["name"], starts.pop(entry["name"]), entry["at"]))
    return out


def report(directory: Path, limit: float, limits: dict[str, float], strict: bool = False) -> int:
    deadline = time.monotonic() + 300
    while not (directory / "result.json").exists():
        if time.monotonic() > deadline:
            print("no result.json: the probe did not finish")
            return 1
        time.sleep(1)
    result = json.loads((directory / "result.json").read_text())
    print(result["summary"])
    failures = [] if result["report"]["ok"] else ["the checker found lost, duplicated or "
                                                  "out-of-order records"]
    if any(result["group_missed"].values()):
        failures.append(f"the consumer group missed acknowledged records: "
                        f"{result['group_missed']}")
    print(f"consumer group: missed {sum(result['group_missed'].values())} acknowledged "
          f"records, sequence skips {result['group_skips'] or 'none'}")
    print(f"{'playbook':<28} {'seconds':>8} {'records':>8} {'failed':>7} {'longest stall s':>16}")
    for name, start, end in phases(directory):
        inside = [lat for sent, lat in result["samples"] if start <= sent <= end]
        failed = sum(1 for lat in inside if lat is None)
        stall = max((lat for lat in inside if lat is not None), default=0.0)
        allowed = limits.get(name, limit)
        print(f"{name:<28} {end - start:>8.1f} {len(inside):>8} {failed:>7} "
              f"{stall:>16.2f}  (limit {allowed:g})")
        if failed or stall >= allowed or not inside:
            failures.append(f"{name}: longest stall {stall:.2f} s (limit {allowed:g}), "
                            f"{failed} failed, {len(inside)} records")
    if strict:
        failed = sum(1 for _sent, lat in result["samples"] if lat is None)
        if failed or result["group_errors"]:
            failures.append(f"the client saw errors: {failed} failed deliveries, consumer "
                            f"errors {result['group_errors'] or 'none'}")
    for failure in failures:
        print(f"FAILED: {failure}")
    return 1 if failures else 0


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run")
    r.add_argument("bootstrap")
    r.add_argument("topic")
    r.add_argument("directory", type=Path)
    security = r.add_mutually_exclusive_group()
    security.add_argument("--tls", nargs=3, metavar=("CA", "CERT", "KEY"), default=None)
    security.add_argument("--client-config", default=None, metavar="FILE")
    t = sub.add_parser("roundtrip")
    t.add_argument("bootstrap")
    t.add_argument("topic")
    t.add_argument("count", type=int)
    t.add_argument("--client-config", required=True, metavar="FILE")
    m = sub.add_parser("phase")
    m.add_argument("directory", type=Path)
    m.add_argument("name")
    m.add_argument("edge", choices=["start", "end"])
    m.add_argument("--at", type=float, default=None)
    p = sub.add_parser("report")
    p.add_argument("directory", type=Path)
    p.add_argument("--limit", type=float, default=10.0)
    p.add_argument("--limit-for", action="append", default=[], metavar="NAME=SECONDS")
    p.add_argument("--strict", action="store_true")
    args = parser.parse_args(argv)
    if args.command == "run":
        return run(args.bootstrap, args.topic, args.directory, args.tls, args.client_config)
    if args.command == "roundtrip":
        return roundtrip(args.bootstrap, args.topic, args.count, args.client_config)
    if args.command == "phase":
        return mark(args.directory, args.name, args.edge, args.at)
    limits = {k: float(v) for k, v in (item.split("=", 1) for item in args.limit_for)}
    return report(args.directory, args.limit, limits, args.strict)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
