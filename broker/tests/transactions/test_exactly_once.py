"""Exactly once, shown with three clients on three brokers.

1. confluent-kafka copiers (consume-transform-produce in one group, read_committed,
   send_offsets_to_transaction, a third of the transactions aborted on purpose and
   rewound) move 5,000 records from a 3-partition topic (RF 3, min ISR 2) while the
   transaction coordinator of their transactional ids (the leader of that
   `__transaction_state` partition) is killed with kill -9 and started again: the sink,
   read with read_committed, holds each source record exactly once, in order per
   partition, nothing of an aborted transaction, no transaction torn. The copiers' group
   is coordinated by another broker: librdkafka's send_offsets_to_transaction can block
   forever when the group coordinator it found leaves the cluster metadata
   (confluentinc/librdkafka#5511, open in the bundled 2.16; Kafka's brokers trigger it
   the same way), and a copier thread cannot be killed; the soak (kill -9 of copier
   processes) covers the group coordinator's death.
2. The same copy, smaller and without faults, with kafka-python and with aiokafka.
3. `moldau checker --transactional-id`: the checker's transactional mode end to end.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient
from replication.conftest import Cluster
from replication.faults import isrs_full

from moldau.checker.producer import ProducerRun
from moldau.checker.records import parse
from moldau.checker.report import Report
from moldau.checker.txn_report import (
    ABORTED,
    COMMITTED,
    IN_DOUBT,
    TAG_HEADER,
    TransactionCheck,
    TransactionWrites,
)
from moldau.cli import main
from moldau.coordinator.transaction.partitioning import transaction_partition_for

from .conftest import TRANSACTION_PROPERTIES
from .copiers import copy_run, group_progress, judge

TXN_PARTITIONS = int(TRANSACTION_PROPERTIES["transaction.state.log.num.partitions"])
RECORDS = 5000
SMALL = 300
TOPIC_CONFIG = {"min.insync.replicas": "2"}


def fill(cluster: Cluster, prefix: str, records: int) -> tuple[str, str, ProducerRun]:
    """A source topic holding `records` checker records (acknowledged, idempotent) and an
    empty sink topic; both 3 partitions, RF 3, min ISR 2."""
    source = cluster.create_topic(f"{prefix}-in", 3, 3, **TOPIC_CONFIG)
    sink = cluster.create_topic(f"{prefix}-out", 3, 3, **TOPIC_CONFIG)
    run = ProducerRun(cluster.bootstrap, source, rate=None, max_records=records,
                      record_size=100)
    writes = run.run(duration=120)
    assert sum(len(w.acknowledged) for w in writes.values()) == records, run.counters()
    return source, sink, run


def ids_sharing_a_coordinator(count: int) -> list[str]:
    """Transactional ids that hash to one `__transaction_state` partition."""
    ids: list[str] = []
    target = None
    while len(ids) < count:
        tid = f"copier-{uuid.uuid4().hex[:8]}"
        partition = transaction_partition_for(tid, TXN_PARTITIONS)
        if target is None:
            target = partition
        if partition == target:
            ids.append(tid)
    return ids


def coordinator_leader(cluster: Cluster, tid: str, topic: str = "__transaction_state",
                       partitions: int = TXN_PARTITIONS) -> int:
    """The leader of the key's partition of an internal topic (its coordinator)."""
    partition = transaction_partition_for(tid, partitions)  # Kafka's rule for groups too
    metadata = AdminClient({"bootstrap.servers": cluster.bootstrap}).list_topics(
        topic, timeout=10)
    leader = metadata.topics[topic].partitions[partition].leader
    assert leader in cluster.brokers, metadata.topics[topic].partitions
    return int(leader)


def group_coordinated_elsewhere(cluster: Cluster, broker: int) -> str:
    """A group id whose coordinator is not `broker` (`__consumer_offsets` created first)."""
    offsets = int(TRANSACTION_PROPERTIES["offsets.topic.num.partitions"])
    cluster.wait_for(lambda: group_progress(cluster.bootstrap, "probe", "probe", [0]) == 0,
                     30, "__consumer_offsets")
    while True:
        group = f"copiers-{uuid.uuid4().hex[:8]}"
        leader = cluster.wait_for(lambda g=group: coordinator_leader(  # type: ignore[misc]
            cluster, g, "__consumer_offsets", offsets), 30, f"the coordinator of {group}")
        if leader != broker:
            return group


def assert_exactly_once(report: Report, records: int) -> None:
    assert report.ok, report.summary()
    totals = report.totals()
    assert totals["read"] == records and totals["lost"] == totals["duplicated"] == 0
    assert isinstance(report.transactions, TransactionCheck)
    assert report.transactions.counts[ABORTED] > 0


def test_copiers_copy_exactly_once_across_a_coordinator_kill(txn_cluster: Cluster,
                                                             tmp_path: Path) -> None:
    cluster = txn_cluster
    cluster.ensure_all_running()
    source, sink, filled = fill(cluster, "eos", RECORDS)
    tids = ids_sharing_a_coordinator(3)
    first = Producer({"bootstrap.servers": cluster.bootstrap, "transactional.id": tids[0]})
    first.init_transactions(60)  # creates __transaction_state: its leader is the victim
    del first
    victim = coordinator_leader(cluster, tids[0])
    group = group_coordinated_elsewhere(cluster, victim)
    with copy_run(bootstrap=cluster.bootstrap, source=source, sink=sink,
                  source_run_id=filled.run_id, total=RECORDS, partitions=[0, 1, 2],
                  log_dir=tmp_path, transactional_ids=tids, group=group) as copy:
        copy.start_all()
        cluster.wait_for(lambda: copy.progress() >= RECORDS // 4, 60,
                         "a quarter of the source copied")
        assert coordinator_leader(cluster, tids[0]) == victim
        at_kill = copy.progress()
        cluster.brokers[victim].kill()  # kill -9, mid-run
        started = time.monotonic()
        cluster.wait_for(lambda: copy.progress() > at_kill + 500, 60,
                         f"copying going on without broker {victim}")
        took_over = time.monotonic() - started
        assert coordinator_leader(cluster, tids[0]) != victim
        cluster.start(victim)
        copy.wait_done(90)
        copy.stop()
    cluster.wait_for(lambda: isrs_full(cluster), 45, "every ISR full again")
    report = copy.judge()
    print(f"\ncopiers: killed coordinator {victim} at {at_kill} records, copying went on "
          f"after {took_over:.1f}s; replaced {copy.replaced}\n{report.summary()}")
    assert_exactly_once(report, RECORDS)
    assert isinstance(report.transactions, TransactionCheck)
    assert report.transactions.counts[COMMITTED] >= RECORDS // 50


# --- kafka-python and aiokafka ----------------------------------------------------------


def small_source(cluster: Cluster, prefix: str) -> tuple[str, str, ProducerRun]:
    cluster.ensure_all_running()
    return fill(cluster, prefix, SMALL)


def test_kafka_python_copies_exactly_once(txn_cluster: Cluster) -> None:
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition  # type: ignore[import-untyped]
    from kafka.structs import OffsetAndMetadata  # type: ignore[import-untyped]

    source, sink, filled = small_source(txn_cluster, "kp")
    bootstrap = txn_cluster.bootstrap.split(",")
    consumer = KafkaConsumer(
        source, bootstrap_servers=bootstrap, group_id=f"kp-{uuid.uuid4().hex[:8]}",
        isolation_level="read_committed", enable_auto_commit=False,
        auto_offset_reset="earliest")
    producer = KafkaProducer(bootstrap_servers=bootstrap,
                             transactional_id=f"kp-{uuid.uuid4().hex[:8]}")
    transactions: list[TransactionWrites] = []
    try:
        producer.init_transactions()
        copied = 0
        deadline = time.monotonic() + 60
        while copied < SMALL:
            assert time.monotonic() < deadline, f"copied {copied} of {SMALL}"
            polled = consumer.poll(timeout_ms=1000, max_records=60)
            batch = [r for records in polled.values() for r in records]
            if not batch:
                continue
            txn = TransactionWrites(f"kp:{len(transactions)}", IN_DOUBT,
                                    on_purpose=len(transactions) == 1)
            transactions.append(txn)
            producer.begin_transaction()
            offsets = {}
            for r in batch:
                record = parse(r.key, r.value)
                assert record is not None
                producer.send(sink, key=r.key, value=r.value, partition=r.partition,
                              headers=[(TAG_HEADER, txn.tag.encode())])
                txn.records.setdefault(r.partition, []).append(record.sequence)
                offsets[TopicPartition(source, r.partition)] = OffsetAndMetadata(
                    r.offset + 1, "", -1)
            producer.send_offsets_to_transaction(offsets, consumer.group_metadata())
            if txn.on_purpose:
                producer.abort_transaction()
                txn.outcome = ABORTED
                # back to the committed offsets (RequireStable: kafka-python asks it
                # with read_committed, so a just committed transaction's offsets count)
                for tp in consumer.assignment():
                    committed = consumer.committed(tp)
                    if committed is None:
                        consumer.seek_to_beginning(tp)
                    else:
                        consumer.seek(tp, committed)
            else:
                producer.commit_transaction()
                txn.outcome = COMMITTED
                copied += len(batch)
    finally:
        consumer.close()
        producer.close()
    report = judge(txn_cluster.bootstrap, filled.run_id, sink, SMALL, [0, 1, 2], transactions)
    print(f"\nkafka-python: {report.summary()}")
    assert_exactly_once(report, SMALL)


def test_aiokafka_copies_exactly_once(txn_cluster: Cluster) -> None:
    source, sink, filled = small_source(txn_cluster, "aio")
    transactions = asyncio.run(aiokafka_copy(txn_cluster.bootstrap, source, sink))
    report = judge(txn_cluster.bootstrap, filled.run_id, sink, SMALL, [0, 1, 2], transactions)
    print(f"\naiokafka: {report.summary()}")
    assert_exactly_once(report, SMALL)


async def aiokafka_copy(bootstrap: str, source: str, sink: str) -> list[TransactionWrites]:
    from aiokafka import (  # type: ignore[import-untyped]
        AIOKafkaConsumer,
        AIOKafkaProducer,
        TopicPartition,
    )

    group = f"aio-{uuid.uuid4().hex[:8]}"
    consumer = AIOKafkaConsumer(source, bootstrap_servers=bootstrap, group_id=group,
                                isolation_level="read_committed", enable_auto_commit=False,
                                auto_offset_reset="earliest")
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap,
                                transactional_id=f"aio-{uuid.uuid4().hex[:8]}")
    transactions: list[TransactionWrites] = []
    # aiokafka's committed() does not ask OffsetFetch for stable offsets (RequireStable),
    # so after an abort the copier rewinds to the offsets of its last committed transaction,
    # which it knows (it is the group's only member)
    committed: dict[TopicPartition, int] = {}
    await consumer.start()
    await producer.start()
    try:
        copied = 0
        deadline = time.monotonic() + 60
        while copied < SMALL:
            assert time.monotonic() < deadline, f"copied {copied} of {SMALL}"
            polled = await consumer.getmany(timeout_ms=1000, max_records=60)
            batch = [r for records in polled.values() for r in records]
            if not batch:
                continue
            txn = TransactionWrites(f"aio:{len(transactions)}", IN_DOUBT,
                                    on_purpose=len(transactions) == 1)
            transactions.append(txn)
            offsets: dict[TopicPartition, int] = {}
            await producer.begin_transaction()
            for r in batch:
                record = parse(r.key, r.value)
                assert record is not None
                await producer.send(sink, key=r.key, value=r.value, partition=r.partition,
                                    headers=[(TAG_HEADER, txn.tag.encode())])
                txn.records.setdefault(r.partition, []).append(record.sequence)
                offsets[TopicPartition(source, r.partition)] = r.offset + 1
            await producer.send_offsets_to_transaction(offsets, group)
            if txn.on_purpose:
                await producer.abort_transaction()
                txn.outcome = ABORTED
                for tp in consumer.assignment():
                    if tp in committed:
                        consumer.seek(tp, committed[tp])
                    else:
                        await consumer.seek_to_beginning(tp)
            else:
                await producer.commit_transaction()
                txn.outcome = COMMITTED
                committed.update(offsets)
                copied += len(batch)
    finally:
        await consumer.stop()
        await producer.stop()
    return transactions


# --- the checker's transactional mode -------------------------------------------------------


def test_checker_transactional_mode(txn_cluster: Cluster, tmp_path: Path,
                                    capsys: pytest.CaptureFixture[str]) -> None:
    txn_cluster.ensure_all_running()
    report_file = tmp_path / "report.json"
    code = main(["checker", "--bootstrap-server", txn_cluster.bootstrap,
                 "--topic", f"txn-check-{uuid.uuid4().hex[:6]}", "--create",
                 "--transactional-id", "checker", "--transaction-records", "20",
                 "--abort-ratio", "0.34", "--max-records", "600", "--rate", "0",
                 "--duration", "60", "--read-timeout", "30", "--quiet",
                 "--report-file", str(report_file)])
    out = capsys.readouterr().out
    assert code == 0, out
    assert out.splitlines()[-1] == "RESULT: OK"
    report = json.loads(report_file.read_text())
    txns = report["transactions"]
    assert txns["counts"] == {"committed": 20, "aborted": 10, "in_doubt": 0}, (
        txns["in_doubt_errors"])
    assert txns["aborted_on_purpose"] == 10
    totals = report["totals"]
    assert totals["sent"] == 600 and totals["acknowledged"] == 400
    assert totals["aborted"] == 200 and totals["aborted_visible"] == 0
    assert totals["read"] == 400 and totals["lost"] == totals["duplicated"] == 0
    # the aborted records are in the log (600 records and a marker per transaction and
    # partition), and read_committed hid them
    assert sum(p["end_offset"] for p in report["partitions"]) == 600 + 30 * 3


def test_checker_transactional_mode_bad_options(txn_cluster: Cluster,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["checker", "--bootstrap-server", txn_cluster.bootstrap, "--topic", "x",
                 "--transactional-id", "checker", "--abort-ratio", "1.5", "--quiet"])
    assert code == 2
    assert "abort ratio 1.5" in capsys.readouterr().err
