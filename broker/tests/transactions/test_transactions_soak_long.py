"""`make test-long` (MOLDAU_LONG=1): a transactions soak in the spirit of Kafka's
transactions system test (tests/kafkatest/tests/core/transactions_test.py).

Three copier processes (confluent-kafka consume-transform-produce, one group,
read_committed, a third of the transactions aborted on purpose and rewound) move 50,000
records from a 3-partition source (RF 3, min ISR 2) to a sink while, in turn:

* a broker is bounced cleanly (SIGTERM, controlled shutdown, started again): the
  coordinator of a copier's transactional id, then another broker;
* a broker is bounced hard (kill -9, started again once its ZooKeeper session expired),
  the coordinator included;
* a copier is killed with kill -9 and a new instance with the same transactional.id takes
  its place;
* a copier is paused (SIGSTOP) and replaced while it still lives: the replacement's
  InitProducerId fences it, and resumed (SIGCONT) the zombie must not get a transaction
  through.

Each broker fault waits for every ISR to be full again before the next, so at most one
broker is down at a time (RF 3, min ISR 2: nothing acknowledged may be lost). Then the
sink is read with read_committed: every source record exactly once, in order per
partition, nothing of an aborted transaction, no transaction torn.
"""

from __future__ import annotations

import os
import signal
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
from replication.conftest import Cluster
from replication.faults import isrs_full

from moldau.checker.txn_report import TransactionCheck

from .copiers import CopierProcess, copy_run
from .test_exactly_once import assert_exactly_once, coordinator_leader, fill

pytestmark = pytest.mark.skipif(os.environ.get("MOLDAU_LONG") != "1",
                                reason="make test-long only (MOLDAU_LONG=1)")

RECORDS = 50_000
STEP = 1_500  # records copied between two faults (after recovery)
PAUSE = 0.1  # seconds each copier waits between transactions: faults land mid-copy


def test_transactions_soak(txn_cluster: Cluster, tmp_path: Path) -> None:
    cluster = txn_cluster
    began = time.monotonic()
    source, sink, filled = fill(cluster, "soak", RECORDS)
    tids = [f"soak-{slot}-{uuid.uuid4().hex[:6]}" for slot in range(3)]
    log: list[str] = []
    zombies: list[CopierProcess] = []  # paused, replaced, resumed: judged at the end

    with copy_run(bootstrap=cluster.bootstrap, source=source, sink=sink,
                  source_run_id=filled.run_id, total=RECORDS, partitions=[0, 1, 2],
                  log_dir=tmp_path, transactional_ids=tids, batch=100,
                  pause=PAUSE) as copy:
        copy.start_all(CopierProcess)

        def progress_by(count: int, what: str, timeout: float = 240) -> bool:
            """False once everything is copied (no more faults)."""
            target = min(RECORDS, copy.progress() + count)

            def moved() -> bool:
                copy.supervise(CopierProcess)
                return copy.progress() >= target

            cluster.wait_for(moved, timeout, f"{count} records copied {what}")
            return copy.progress() < RECORDS

        def bounce(broker: int, hard: bool) -> None:
            kind = "hard" if hard else "clean"
            at = copy.progress()
            if hard:
                cluster.brokers[broker].kill()
            else:
                code = cluster.brokers[broker].stop()
                assert code == 0, f"broker {broker} exited with {code} on SIGTERM"
            cluster.start(broker)
            cluster.wait_for(lambda: isrs_full(cluster), 60, "every ISR full again")
            log.append(f"{kind} bounce of broker {broker} at {at}")

        def kill_copier(slot: int) -> None:
            at = copy.progress()
            copy.instances[slot].kill()  # kill -9; supervise() starts a new instance
            copy.supervise(CopierProcess)
            log.append(f"kill -9 of copier {slot} at {at}")

        def zombie_copier(slot: int) -> None:
            at = copy.progress()
            zombie = copy.instances[slot]
            os.kill(zombie.process.pid, signal.SIGSTOP)
            copy.start(slot, CopierProcess)  # same transactional.id: fences the zombie
            progress_by(STEP // 2, "with a paused zombie copier")
            os.kill(zombie.process.pid, signal.SIGCONT)
            zombies.append(zombie)
            log.append(f"zombie copier {slot} at {at}")

        def coordinator(slot: int) -> int:
            return coordinator_leader(cluster, tids[slot])

        def other_than(broker: int) -> int:
            return next(b for b in cluster.brokers if b != broker)

        faults: list[tuple[str, Callable[[], None]]] = [
            ("clean bounce of a coordinator", lambda: bounce(coordinator(0), hard=False)),
            ("kill -9 of a copier", lambda: kill_copier(1)),
            ("hard bounce of a coordinator", lambda: bounce(coordinator(1), hard=True)),
            ("a zombie copier", lambda: zombie_copier(2)),
            ("clean bounce of a broker", lambda: bounce(other_than(coordinator(2)),
                                                         hard=False)),
            ("kill -9 of a copier", lambda: kill_copier(0)),
            ("hard bounce of a coordinator", lambda: bounce(coordinator(2), hard=True)),
            ("kill -9 of a copier", lambda: kill_copier(2)),
        ]
        index = 0
        while progress_by(STEP, f"before fault {index}"):
            name, fault = faults[index % len(faults)]
            fault()
            index += 1
            print(f"{time.monotonic() - began:6.0f}s fault {index} ({name}): {log[-1]}",
                  flush=True)
        copy.wait_done(300, CopierProcess)
        copy.stop()
        # a resumed zombie that tried to write ended by itself, fenced; one that found
        # nothing to do stops when told. Either way the sink shows nothing of it.
        fates = []
        for zombie in zombies:
            ended_alone = not zombie.alive()
            zombie.stop()
            fates.append(str(zombie.ended()))
            if ended_alone:
                assert "fenced" in fates[-1].lower(), fates
    copied = time.monotonic() - began
    cluster.wait_for(lambda: isrs_full(cluster), 60, "every ISR full at the end")
    report = copy.judge(timeout=180)
    print(f"\nsoak: {RECORDS} records in {copied:.0f}s with {index} faults:\n  "
          + "\n  ".join(log) + f"\nreplaced copiers: {copy.replaced}\nhung copiers "
          f"killed: {copy.watchdog_kills}\nzombies: {fates}\n" + report.summary())
    assert_exactly_once(report, RECORDS)
    assert index >= len(faults), f"only {index} faults happened: {log}"
    assert isinstance(report.transactions, TransactionCheck)

