"""The Molecule verify step's client on the control node (confluent-kafka, i.e. librdkafka):
talks to the lab brokers over the network the way an application does.

  kafka_check.py brokers BOOTSTRAP 1,2,3       the cluster lists exactly these brokers
  kafka_check.py roundtrip BOOTSTRAP TOPIC N   create TOPIC (RF 3) unless it exists, wait
                                               for full ISRs, produce N records with
                                               acks=all, consume them back in order
  kafka_check.py isr BOOTSTRAP TOPIC           every partition of TOPIC has a full ISR
  kafka_check.py refused BOOTSTRAP             an SSL client without a certificate gets
                                               no metadata (needs --pki)
  kafka_check.py stream BOOTSTRAP TOPIC DIR    produce and consume TOPIC without pause
                                               until DIR/stop appears (DIR/ready once
                                               records flow), then every record must be
                                               acknowledged and read back, and neither
                                               client may have reported an error (DIR/
                                               group-log: why nothing was read in 60 s)
--pki DIR: connect over SSL with DIR/ca.crt and the client certificate DIR/client-admin.*
(the certificates role's directory on the control node). --replicas N: the replication
factor of the topics (3; the broker role's one-broker scenario uses 1).
Exit 0 when the check holds; otherwise 1 with the reason."""

from __future__ import annotations

import argparse
import collections
import logging
import os
import sys
import time
import uuid
from collections.abc import Callable

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

TIMEOUT_S = 90.0  # a loaded 2-core machine runs six hosts and this client
SECURITY: dict[str, str] = {}  # the SSL settings of --pki, merged into every client
REPLICAS = 3  # --replicas


def client_config(bootstrap: str, **extra: object) -> dict[str, object]:
    return {"bootstrap.servers": bootstrap, **SECURITY, **extra}


class GroupTrace:
    """librdkafka's consumer group log (debug=cgrp), kept in memory: a consumer that
    reads nothing reports why (coordinator lookups, offset fetches) when the check fails."""

    def __init__(self) -> None:
        self.lines: collections.deque[str] = collections.deque(maxlen=5000)
        self.logger = logging.getLogger(f"librdkafka-{id(self)}")
        self.logger.propagate = False
        self.logger.setLevel(logging.DEBUG)
        handler = logging.Handler()
        handler.emit = lambda record: self.lines.append(record.getMessage())  # type: ignore[method-assign]
        self.logger.addHandler(handler)

    def config(self) -> dict[str, object]:
        return {"debug": "cgrp", "logger": self.logger}

    def summary(self, limit: int = 15) -> str:
        """The last distinct lines that say what the group is waiting for."""
        words = ("error", "coordinator is", "changing coordinator", "offset", "wait-broker")
        picked: list[str] = []
        for line in reversed(self.lines):
            text = line.split("]: ", 1)[-1]
            if any(w in text.lower() for w in words) and text not in picked:
                picked.append(text)
            if len(picked) == limit:
                break
        return "\n".join(reversed(picked)) or "(no group log)"


def use_pki(directory: str, certificate: bool = True) -> None:
    SECURITY.update({"security.protocol": "SSL", "ssl.ca.location": f"{directory}/ca.crt"})
    if certificate:
        SECURITY.update({"ssl.certificate.location": f"{directory}/client-admin.crt",
                         "ssl.key.location": f"{directory}/client-admin.key"})


def wait_for(condition: Callable[[], str | None], what: str) -> None:
    """Poll until condition() returns None (success); it returns the reason otherwise."""
    deadline = time.monotonic() + TIMEOUT_S
    reason: str | None = "not checked"
    while time.monotonic() < deadline:
        try:
            reason = condition()
        except KafkaException as exc:
            reason = str(exc)
        if reason is None:
            return
        time.sleep(1)
    raise SystemExit(f"{what}: still failing after {TIMEOUT_S:.0f}s: {reason}")


def check_brokers(bootstrap: str, expected: str) -> None:
    want = sorted(int(b) for b in expected.split(","))
    admin = AdminClient(client_config(bootstrap))

    def listed() -> str | None:
        have = sorted(admin.list_topics(timeout=10).brokers)
        return None if have == want else f"brokers {have}, expected {want}"
    wait_for(listed, "registered brokers")
    print(f"brokers {want} registered")


def full_isr(admin: AdminClient, topic: str) -> str | None:
    metadata = admin.list_topics(topic, timeout=10).topics[topic]
    if metadata.error is not None:
        return str(metadata.error)
    short = {p: (m.replicas, m.isrs) for p, m in metadata.partitions.items()
             if len(m.replicas) != REPLICAS or sorted(m.isrs) != sorted(m.replicas) or m.leader < 0}
    if metadata.partitions and not short:
        return None
    return f"partitions short of RF {REPLICAS}: {short}"


def check_isr(bootstrap: str, topic: str) -> None:
    admin = AdminClient(client_config(bootstrap))
    wait_for(lambda: full_isr(admin, topic), f"{topic} ISR")
    print(f"{topic}: every partition has {REPLICAS} replicas in sync")


def roundtrip(bootstrap: str, topic: str, count: int) -> None:
    admin = AdminClient(client_config(bootstrap))
    if topic not in admin.list_topics(timeout=10).topics:
        futures = admin.create_topics([NewTopic(topic, 3, REPLICAS)], operation_timeout=60)
        futures[topic].result(90)
    wait_for(lambda: full_isr(admin, topic), f"{topic} ISR")
    run = uuid.uuid4().hex[:8]
    sent = [f"{run}-{i}".encode() for i in range(count)]
    producer = Producer(client_config(bootstrap, **{"acks": "all", "enable.idempotence": True,
                                                    "message.timeout.ms": 60000}))
    failures: list[str] = []
    for i, value in enumerate(sent):
        producer.produce(topic, value, key=str(i).encode(),
                         on_delivery=lambda err, _msg: err and failures.append(str(err)))
    if producer.flush(90) or failures:
        raise SystemExit(f"produce failed: {failures[:3]} ({len(failures)} errors)")
    trace = GroupTrace()
    consumer = Consumer(client_config(bootstrap, **{"group.id": f"verify-{run}",
                                                    "auto.offset.reset": "earliest",
                                                    "enable.auto.commit": False},
                                      **trace.config()))
    partitions = admin.list_topics(topic, timeout=10).topics[topic].partitions
    consumer.assign([TopicPartition(topic, p) for p in partitions])
    mine: list[bytes] = []  # this run's records (the topic may hold earlier runs')
    deadline = time.monotonic() + TIMEOUT_S
    while time.monotonic() < deadline and len(mine) < count:
        message = consumer.poll(1.0)
        if message is not None and message.error() is None \
                and message.value().startswith(run.encode()):
            mine.append(message.value())
    consumer.close()
    if sorted(mine) != sorted(sent) or len(mine) != len(set(mine)):
        raise SystemExit(f"read back {len(mine)} of {count} records (duplicates or losses); "
                         f"the consumer's group log:\n{trace.summary()}")
    print(f"{topic}: {count} records produced with acks=all and read back")


def stream(bootstrap: str, topic: str, control: str) -> None:
    """A producer and a consumer that keep going while something happens to the cluster
    (a certificate renewal): any error either client reports fails the check."""
    admin = AdminClient(client_config(bootstrap))
    if topic not in admin.list_topics(timeout=10).topics:
        admin.create_topics([NewTopic(topic, 3, REPLICAS)], operation_timeout=60)[topic].result(90)
    wait_for(lambda: full_isr(admin, topic), f"{topic} ISR")
    errors: list[str] = []  # error_cb: transport, TLS and broker-wide errors

    def on_error(err: object) -> None:
        errors.append(str(err))
    run = uuid.uuid4().hex[:8]
    producer = Producer(client_config(bootstrap, **{
        "acks": "all", "enable.idempotence": True, "message.timeout.ms": 60000,
        "linger.ms": 5, "error_cb": on_error}))
    trace = GroupTrace()
    consumer = Consumer(client_config(bootstrap, **{
        "group.id": f"stream-{run}", "auto.offset.reset": "earliest",
        "enable.auto.commit": False, "error_cb": on_error}, **trace.config()))
    partitions = admin.list_topics(topic, timeout=10).topics[topic].partitions
    consumer.assign([TopicPartition(topic, p) for p in partitions])
    sent: list[bytes] = []
    acked: list[bytes] = []
    failures: list[str] = []
    received: list[bytes] = []

    def delivered(err: object, message: object) -> None:
        if err is not None:
            failures.append(str(err))
        else:
            acked.append(message.value())  # type: ignore[attr-defined]

    def consume(timeout: float) -> None:
        message = consumer.poll(timeout)
        if message is None:
            return
        if message.error() is not None:
            errors.append(str(message.error()))
        elif message.value().startswith(run.encode()):
            received.append(message.value())

    ready = os.path.join(control, "ready")
    stop = os.path.join(control, "stop")
    started = next_send = time.monotonic()
    reported = False
    while not os.path.exists(stop):
        if time.monotonic() >= next_send:  # 20 records a second: steady, cheap on 2 cores
            value = f"{run}-{len(sent)}".encode()
            producer.produce(topic, value, on_delivery=delivered)
            sent.append(value)
            next_send += 0.05
        producer.poll(0)
        consume(max(0.0, next_send - time.monotonic()))  # waits here between records
        if received and not os.path.exists(ready):
            open(ready, "w").close()
        if time.monotonic() - started > 900:
            raise SystemExit("no stop file after 15 minutes")
        if not received and time.monotonic() - started > 60 and not reported:
            reported = True  # the caller gives up waiting for DIR/ready: this says why
            with open(os.path.join(control, "group-log"), "w") as out:
                out.write(f"nothing read after 60 s; the consumer's group log:\n"
                          f"{trace.summary()}\n")
    remaining = producer.flush(90)
    deadline = time.monotonic() + TIMEOUT_S
    while len(received) < len(acked) and time.monotonic() < deadline:
        consume(1.0)
    consumer.close()
    problems = []
    if remaining or failures:
        problems.append(f"{remaining} unacknowledged, {len(failures)} failed: {failures[:3]}")
    if errors:
        problems.append(f"{len(errors)} client errors: {errors[:5]}")
    if sorted(received) != sorted(sent) or len(received) != len(set(received)):
        problems.append(f"read back {len(received)} ({len(set(received))} distinct) of "
                        f"{len(sent)}; the consumer's group log:\n{trace.summary()}")
    if problems:
        raise SystemExit(f"{topic}: " + "; ".join(problems))
    print(f"{topic}: {len(sent)} records produced and read back over "
          f"{time.monotonic() - started:.0f}s, no client errors")


def check_refused(bootstrap: str) -> None:
    """Without a client certificate the SSL listener (ssl.client.auth=required) must not
    serve even metadata."""
    admin = AdminClient(client_config(bootstrap, log_level=0))  # the refusals are expected
    try:
        admin.list_topics(timeout=10)
    except KafkaException as exc:
        print(f"refused without a client certificate: {exc}")
        return
    raise SystemExit("an SSL client without a certificate was served")


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pki", help="SSL with the CA and client certificate in this directory")
    parser.add_argument("--replicas", type=int, default=3, help="replication factor of the topics")
    parser.add_argument("check", choices=["brokers", "roundtrip", "isr", "refused", "stream"])
    parser.add_argument("bootstrap")
    parser.add_argument("args", nargs="*")
    args = parser.parse_args(argv)
    global REPLICAS
    REPLICAS = args.replicas
    if args.pki:
        use_pki(args.pki, certificate=args.check != "refused")
    if args.check == "brokers" and len(args.args) == 1:
        check_brokers(args.bootstrap, args.args[0])
    elif args.check == "roundtrip" and len(args.args) == 2:
        roundtrip(args.bootstrap, args.args[0], int(args.args[1]))
    elif args.check == "isr" and len(args.args) == 1:
        check_isr(args.bootstrap, args.args[0])
    elif args.check == "stream" and len(args.args) == 2:
        stream(args.bootstrap, args.args[0], args.args[1])
    elif args.check == "refused" and args.pki and not args.args:
        check_refused(args.bootstrap)
    else:
        print(__doc__, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
