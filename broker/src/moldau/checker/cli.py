"""`moldau checker`: produce sequenced records, read them back, report loss, duplicates
and reordering; exit 0 when the report is ok, 1 when it is not, 2 when the check could
not run (no cluster, no topic, bad arguments). With --transactional-id the records are
written in transactions, some aborted on purpose, and read back with read_committed
(`transactional`, `txn_report`).

confluent-kafka is imported only when the command runs, so `moldau` itself does not
need it.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # confluent_kafka is imported only when a check runs
    from moldau.checker.producer import ClientConfig

DEFAULTS = {"partitions": 3, "replication_factor": 3, "min_insync_replicas": 2,
            "duration": 30.0, "rate": 100.0, "record_size": 100}


def add_checker_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]
                       ) -> argparse.ArgumentParser:
    """Register `checker` on the `moldau` subcommands."""
    p = commands.add_parser(
        "checker", help="durability check: acks=all idempotent writes, read back, report",
        description="Produce sequenced records with acks=all and idempotence for a while "
                    "(faults may happen meanwhile), read every partition back and report "
                    "acknowledged-but-lost, duplicated and out-of-order records per "
                    "partition. Exit 0 when none, 1 otherwise, 2 when the check cannot run.")
    p.add_argument("--bootstrap-server", required=True, help="HOST:PORT[,HOST:PORT...]")
    p.add_argument("--topic", required=True)
    p.add_argument("--create", action="store_true",
                   help="create the topic first (an existing one is used as it is)")
    p.add_argument("--partitions", type=int, default=DEFAULTS["partitions"],
                   help="with --create (default %(default)s)")
    p.add_argument("--replication-factor", type=int, default=DEFAULTS["replication_factor"],
                   help="with --create (default %(default)s)")
    p.add_argument("--min-insync-replicas", type=int, default=DEFAULTS["min_insync_replicas"],
                   help="with --create: the topic's min.insync.replicas (default %(default)s)")
    p.add_argument("--duration", type=float, default=DEFAULTS["duration"],
                   help="seconds of producing (default %(default)s)")
    p.add_argument("--rate", type=float, default=DEFAULTS["rate"],
                   help="records per second over all partitions; 0: unlimited "
                        "(default %(default)s)")
    p.add_argument("--record-size", type=int, default=DEFAULTS["record_size"],
                   help="value size in bytes, padded (default %(default)s)")
    p.add_argument("--max-records", type=int, default=None,
                   help="stop producing after this many records")
    p.add_argument("--delivery-timeout-ms", type=int, default=None,
                   help="the producer's delivery.timeout.ms (default 60000)")
    p.add_argument("--request-timeout-ms", type=int, default=None,
                   help="the producer's request.timeout.ms (default 10000)")
    p.add_argument("--flush-timeout", type=float, default=None,
                   help="seconds to wait for outstanding acknowledgements after producing "
                        "(default: delivery timeout + 10 s); the rest is in doubt")
    p.add_argument("--read-timeout", type=float, default=60.0,
                   help="seconds for reading everything back (default %(default)s)")
    p.add_argument("--command-config",
                   help="client properties file (security settings), Kafka tool style")
    txn = p.add_argument_group(
        "transactional mode", "write in transactions (a share aborted on purpose) and read "
        "back with isolation.level=read_committed: also reports aborted-but-visible "
        "records and torn transactions")
    txn.add_argument("--transactional-id", metavar="PREFIX",
                     help="turn the mode on; the writer's transactional.id is PREFIX-<run id>")
    txn.add_argument("--transaction-records", type=int, default=10, metavar="N",
                     help="records per transaction (default %(default)s)")
    txn.add_argument("--abort-ratio", type=float, default=1 / 3, metavar="R",
                     help="share of transactions aborted on purpose, spread evenly "
                          "(default 1/3: every third)")
    txn.add_argument("--transaction-timeout-ms", type=int, default=None,
                     help="the producer's transaction.timeout.ms (default 30000); a commit "
                          "or abort is retried this long before it counts as in doubt")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.add_argument("--report-file", help="also write the JSON report to this file")
    p.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    return p


def client_config(props: Mapping[str, str]) -> dict[str, str]:
    """librdkafka properties from a Kafka tool's --command-config properties
    (moldau.client.security.librdkafka_settings: SASL logins from sasl.jaas.config or a
    KAFKA_OPTS JAAS file, Kafka's key and trust stores, Java-only keys dropped); a config
    that cannot work raises ValueError naming what is wrong."""
    # imported when a check runs, as confluent_kafka is: `moldau` itself needs neither
    from moldau.client.security import librdkafka_settings

    return librdkafka_settings(props)


def _progress(args: argparse.Namespace, text: str) -> None:
    if not args.quiet:
        print(f"moldau checker: {text}", file=sys.stderr, flush=True)


def create_topic(bootstrap: str, topic: str, partitions: int, replication_factor: int,
                 min_insync_replicas: int, config: ClientConfig | None = None,
                 timeout: float = 30.0) -> bool:
    """Create the topic and wait until every partition has a leader. False: it existed."""
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({**dict(config or {}), "bootstrap.servers": bootstrap})
    new = NewTopic(topic, num_partitions=partitions, replication_factor=replication_factor,
                   config={"min.insync.replicas": str(min_insync_replicas)})
    created = True
    try:
        admin.create_topics([new], operation_timeout=timeout,
                            request_timeout=timeout)[topic].result()
    except KafkaException as exc:
        if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
            raise
        created = False
    deadline = time.monotonic() + timeout
    while True:
        meta = admin.list_topics(topic, timeout=10).topics.get(topic)
        if (meta is not None and meta.error is None and meta.partitions
                and all(p.leader >= 0 for p in meta.partitions.values())):
            return created
        if time.monotonic() >= deadline:
            raise KafkaException(f"topic {topic!r} has no leader for every partition "
                                 f"after {timeout:g} s")
        time.sleep(0.2)


def run_checker(args: argparse.Namespace) -> int:
    from confluent_kafka import KafkaException

    from moldau.checker.consumer import verify
    from moldau.checker.producer import (
        DEFAULT_DELIVERY_TIMEOUT_MS,
        DEFAULT_REQUEST_TIMEOUT_MS,
        ProducerRun,
    )
    from moldau.checker.transactional import (
        DEFAULT_TRANSACTION_TIMEOUT_MS,
        TransactionalRun,
        verify_transactions,
    )

    try:
        config: dict[str, str] = {}
        if args.command_config:
            from moldau import properties
            # ISO-8859-1 and Java's rules, as Kafka's tools read --command-config
            config = client_config(properties.load(args.command_config))
        if args.create:
            created = create_topic(args.bootstrap_server, args.topic, args.partitions,
                                   args.replication_factor, args.min_insync_replicas, config)
            _progress(args, f"{'created' if created else 'using the existing'} topic "
                            f"{args.topic!r}")
        run: ProducerRun | TransactionalRun
        if args.transactional_id:
            from moldau.checker.producer import new_run_id

            run_id = new_run_id()
            run = TransactionalRun(
                args.bootstrap_server, args.topic, f"{args.transactional_id}-{run_id}",
                run_id=run_id, rate=args.rate or None, record_size=args.record_size,
                config=config, max_records=args.max_records,
                transaction_records=args.transaction_records, abort_ratio=args.abort_ratio,
                transaction_timeout_ms=(args.transaction_timeout_ms
                                        or DEFAULT_TRANSACTION_TIMEOUT_MS),
                request_timeout_ms=args.request_timeout_ms or DEFAULT_REQUEST_TIMEOUT_MS)
        else:
            run = ProducerRun(
                args.bootstrap_server, args.topic, rate=args.rate or None,
                record_size=args.record_size, config=config, max_records=args.max_records,
                delivery_timeout_ms=args.delivery_timeout_ms or DEFAULT_DELIVERY_TIMEOUT_MS,
                request_timeout_ms=args.request_timeout_ms or DEFAULT_REQUEST_TIMEOUT_MS)
    except (KafkaException, ValueError, OSError) as exc:
        print(f"moldau checker: {exc}", file=sys.stderr)
        return 2
    rate = f"{args.rate:g} records/s" if args.rate else "unlimited rate"
    _progress(args, f"run {run.run_id}: producing to {args.topic!r} partitions "
                    f"{run.partitions} at {rate} for {args.duration:g} s")
    run.start()
    deadline = time.monotonic() + args.duration
    next_progress = time.monotonic() + 10
    try:
        while run.running and time.monotonic() < deadline:
            time.sleep(min(0.2, max(0.0, deadline - time.monotonic())))
            if time.monotonic() >= next_progress:
                _progress(args, f"{run.counters()}")
                next_progress += 10
    except KeyboardInterrupt:
        _progress(args, "interrupted: stopping the producer early")
    try:
        if isinstance(run, TransactionalRun):
            _progress(args, f"stopping after the transaction under way: {run.counters()}")
            run.stop()
            _progress(args, f"reading back with read_committed: {run.counters()}")
            report = verify_transactions(run, timeout=args.read_timeout)
        else:
            _progress(args, f"stopping, waiting for acknowledgements: {run.counters()}")
            run.stop(args.flush_timeout)
            _progress(args, f"reading back: {run.counters()}")
            report = verify(run, timeout=args.read_timeout)
    except KafkaException as exc:
        print(f"moldau checker: reading back failed: {exc}", file=sys.stderr)
        return 2
    print(report.to_json() if args.json else report.summary())
    if args.report_file:
        with open(args.report_file, "w", encoding="utf-8") as f:
            f.write(report.to_json() + "\n")
    return 0 if report.ok else 1
