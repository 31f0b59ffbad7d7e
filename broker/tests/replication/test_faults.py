"""The fault matrix: the durability checker (idempotent acks=all writes to a topic of three
partitions, replication factor 3, min.insync.replicas 2) runs while the cluster is hurt, and
must find every acknowledged record exactly once and in order, with writes acknowledged
again once the fault is over.

* kill -9 of the controller, then a restart;
* kill -9 of two brokers one after the other, each restarted before the next goes;
* SIGSTOP of a leader for longer than its ZooKeeper session, then SIGCONT: it must find its
  session gone, register again and follow the leader elected meanwhile;
* loss of one node of the three-node ZooKeeper ensemble during writes;
* a rolling restart (SIGTERM, one broker at a time), with writes acknowledged throughout;
* a leader's ISR write that landed in ZooKeeper while its answer was lost (as across a
  session expiry): the leader must adopt what ZooKeeper holds, not stay stuck.

Every test leaves all brokers running with every ISR full, even when it fails."""

from __future__ import annotations

import dataclasses
import os
import signal
import time
from typing import Any

from .conftest import SESSION_S, Cluster
from .faults import (
    broker_epoch,
    checker,
    isrs_full,
    judge,
    leaders,
    log_text,
    restore,
    survivor,
    wait_acks,
)

# --- the faults ---------------------------------------------------------------------------


def test_kill_9_of_the_controller(cluster: Cluster) -> None:
    restore(cluster)
    with checker(cluster, "kill-controller") as (run, watch):
        try:
            with cluster.zookeeper() as zk:
                victim = zk.get_controller_id()
                assert victim in cluster.brokers, victim
                epoch = zk.get_controller_epoch()[0]
                cluster.brokers[victim].kill()
                # its session expires: another broker becomes controller and moves the
                # leadership of the victim's partitions
                cluster.wait_for(lambda: (zk.get_controller_epoch() or (0,))[0] > epoch
                                 and zk.get_controller_id() not in (None, victim),
                                 3 * SESSION_S, "a new controller")
                other = survivor(cluster, victim)
                cluster.wait_for(lambda: all(leader not in (victim, -1) for leader
                                             in leaders(cluster, run.topic, other).values()),
                                 15, "leaders other than the killed controller")
                wait_acks(cluster, run, "after the failover")
            cluster.start(victim)
            cluster.wait_for(lambda: isrs_full(cluster, run.topic), 30,
                             f"broker {victim} back in every ISR")
            wait_acks(cluster, run, "after the restart")
        finally:
            restore(cluster)
        judge(run, watch, "controller kill -9")


def test_kill_9_of_two_brokers_one_after_the_other(cluster: Cluster) -> None:
    restore(cluster)
    with checker(cluster, "kill-two") as (run, watch):
        try:
            first = leaders(cluster, run.topic)[0]
            killed = []
            for round_ in (1, 2):
                if round_ == 1:
                    victim = first
                else:  # another broker, a leader of something if one is
                    current = leaders(cluster, run.topic)
                    candidates = [b for b in cluster.brokers if b != first]
                    victim = next((b for b in candidates if b in current.values()),
                                  candidates[0])
                killed.append(victim)
                cluster.brokers[victim].kill()
                other = survivor(cluster, victim)
                cluster.wait_for(lambda v=victim, o=other: all(
                    m.leader not in (v, -1) and v not in m.isrs
                    for m in cluster.partitions(run.topic, o).values()),
                    3 * SESSION_S, f"broker {victim} out of every leadership and ISR")
                wait_acks(cluster, run, f"with broker {victim} dead")
                cluster.start(victim)
                cluster.wait_for(lambda: isrs_full(cluster, run.topic), 30,
                                 f"broker {victim} back in every ISR")
            assert killed[0] != killed[1]
            wait_acks(cluster, run, "after both restarts")
        finally:
            restore(cluster)
        judge(run, watch, "two kill -9s")


def test_sigstop_of_a_leader_beyond_its_zookeeper_session(cluster: Cluster) -> None:
    restore(cluster)
    # librdkafka times out an in-flight produce request at its first message's
    # delivery.timeout.ms, not at request.timeout.ms, and only then turns to the new
    # leader: a short delivery timeout keeps the stall short
    with checker(cluster, "sigstop", delivery_timeout_ms=15_000) as (run, watch):
        victim = leaders(cluster, run.topic)[0]
        other = survivor(cluster, victim)
        pid = cluster.brokers[victim].pid()
        assert pid is not None
        try:
            with cluster.zookeeper() as zk:
                epoch_before = broker_epoch(zk, victim)
                os.kill(pid, signal.SIGSTOP)
                stopped_at = time.monotonic()
                # the session expires: the controller elects another leader from the ISR
                cluster.wait_for(lambda: leaders(cluster, run.topic, other)[0]
                                 not in (victim, -1), 3 * SESSION_S,
                                 "a new leader for partition 0")
                # the client's produce requests to the stopped leader hang until their
                # messages' delivery timeout; only then does it turn to the new leader
                wait_acks(cluster, run, "while the old leader is stopped", timeout=45)
                time.sleep(max(0.0, stopped_at + 1.5 * SESSION_S - time.monotonic()))
                assert broker_epoch(zk, victim) is None  # its registration went with it
                os.kill(pid, signal.SIGCONT)
                # the old leader finds its session gone, registers again and follows
                cluster.wait_for(lambda: broker_epoch(zk, victim) not in (None, epoch_before),
                                 3 * SESSION_S, f"broker {victim} registered again")
            # asked through another broker: the victim's own metadata may still be what it
            # was before the stop (leader, full ISR) until the controller updates it
            cluster.wait_for(lambda: isrs_full(cluster, run.topic, other), 30,
                             f"broker {victim} back in every ISR")
            assert leaders(cluster, run.topic, other)[0] != victim
            assert "Re-registered broker" in log_text(cluster, victim)
            wait_acks(cluster, run, "after the old leader came back")
        finally:
            restore(cluster)
        judge(run, watch, "SIGSTOP of a leader")


def test_loss_of_one_zookeeper_node(cluster: Cluster, zk_ensemble: Any) -> None:
    restore(cluster)
    with checker(cluster, "zk-node") as (run, watch), cluster.zookeeper() as zk:
        epochs = {b: broker_epoch(zk, b) for b in cluster.brokers}
        controller_epoch = zk.get_controller_epoch()
        # the ZooKeeper leader: the remaining two must elect one, the harder case
        node = next(i for i in range(zk_ensemble.size) if zk_ensemble.mode(i) == "leader")
        try:
            zk_ensemble.stop_node(node)
            time.sleep(1.0)
            wait_acks(cluster, run, f"with ZooKeeper node {node} down", timeout=10)
            time.sleep(2.0)
        finally:
            zk_ensemble.start_node(node)
            try:
                zk_ensemble.wait_node(node, 30)
            finally:
                restore(cluster)
        wait_acks(cluster, run, f"with ZooKeeper node {node} back")
        # no broker lost its session, the controller stayed
        assert {b: broker_epoch(zk, b) for b in cluster.brokers} == epochs
        assert zk.get_controller_epoch() == controller_epoch
        stall = judge(run, watch, "ZooKeeper node loss")
    assert stall <= 3.0, f"acknowledgements stalled for {stall:.2f}s"


def test_rolling_restart(cluster: Cluster) -> None:
    restore(cluster)
    with checker(cluster, "rolling") as (run, watch):
        try:
            done = "Controlled shutdown request returned successfully"
            for broker_id, broker in cluster.brokers.items():
                before = log_text(cluster, broker_id).count(done)
                code = broker.stop()
                assert code == 0, broker.tail()
                assert log_text(cluster, broker_id).count(done) == before + 1
                broker.start()
                cluster.wait_for(lambda: isrs_full(cluster), 30,
                                 f"broker {broker_id} back in every ISR")
                wait_acks(cluster, run, f"after broker {broker_id} restarted", timeout=10)
        finally:
            restore(cluster)
        stall = judge(run, watch, "rolling restart")
    # leadership moves before each broker exits: writes never wait long
    assert stall <= 3.0, f"acknowledgements stalled for {stall:.2f}s during the restarts"


def test_an_isr_write_whose_answer_was_lost(cluster: Cluster) -> None:
    """ZooKeeper holds an ISR the leader wrote but never heard back about (kazoo retries a
    write cut off by a connection loss or session expiry, and the retry meets the landed
    write as a version conflict). Only the leader writes the ISR within a leader epoch, so
    it must adopt what ZooKeeper holds and go on changing it. Waiting for the controller
    would wait forever: no controller request follows a leader's own ISR write (the
    cluster scenario's power loss left partitions under-replicated so). No broker stops
    or starts here, since that makes the controller re-read every partition state."""
    restore(cluster)
    topic = cluster.create_topic("isr-answer-lost", partitions=1)
    with cluster.zookeeper() as zk:
        def state() -> tuple[Any, int]:
            found = zk.get_partition_state(topic, 0)
            assert found is not None
            return found

        current, version = state()
        leader = current.leader
        paused = max(b for b in cluster.brokers if b != leader)
        # the "lost" write: this leader, this leader epoch, one follower left out
        zk.update_partition_state(
            topic, 0, dataclasses.replace(current, isr=[leader, paused]), version)
        pid = cluster.brokers[paused].pid()
        assert pid is not None
        shrinks = log_text(cluster, leader).count("Shrinking ISR")
        os.kill(pid, signal.SIGSTOP)
        try:
            # past replica.lag.time.max.ms (3 s), within the session (6 s): the leader
            # drops the paused follower, with a write based on the version it knows
            cluster.wait_for(lambda: log_text(cluster, leader).count("Shrinking ISR")
                             > shrinks, 0.9 * SESSION_S, "the leader shrinking its ISR")
        finally:
            os.kill(pid, signal.SIGCONT)
        cluster.wait_for(lambda: sorted(state()[0].isr) == sorted(cluster.brokers), 30,
                         "the full ISR in ZooKeeper again")
        assert state()[0].leader_epoch == current.leader_epoch  # no controller election
    assert "from this leader's earlier write" in log_text(cluster, leader)
    restore(cluster)
