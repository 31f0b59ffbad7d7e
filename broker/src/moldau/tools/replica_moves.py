"""The log-dir half of kafka-reassign-partitions (Kafka 3.9's ReassignPartitionsCommand):
`log_dirs` of a reassignment JSON moves replicas between a broker's log dirs through
AlterReplicaLogDirs (--execute, after the partition reassignment, retried while a
replica does not exist yet), and --verify reports each move from DescribeLogDirs."""

from __future__ import annotations

import time

from moldau.protocol.generated.alter_replica_log_dirs_request import (
    AlterReplicaLogDirsRequest as A,
)
from moldau.protocol.generated.describe_log_dirs_request import DescribeLogDirsRequest as D
from moldau.tools.admin import Admin
from moldau.tools.kafka_errors import ADMIN_FAILED, error_text, exception_class
from moldau.tools.options import ToolError
from moldau.tools.runner import ArgumentError

# (topic, partition, broker) -> the log dir asked for it (Kafka's TopicPartitionReplica)
Replica = tuple[str, int, int]
REPLICA_NOT_AVAILABLE = 9
RETRY_S = 0.1


def _order(replica: Replica) -> tuple[int, str, int]:
    return replica[2], replica[0], replica[1]  # broker, topic, partition: Kafka's order


def _name(replica: Replica) -> str:
    return f"{replica[0]}-{replica[1]}-{replica[2]}"


def alter_log_dirs(admin: Admin, moves: dict[Replica, str]) -> set[Replica]:
    """AlterReplicaLogDirs to each broker: the replicas whose move started (a replica
    not there yet answers REPLICA_NOT_AVAILABLE: asked again later)."""
    started = set()
    for broker in sorted({b for _, _, b in moves}):
        by_dir: dict[str, dict[str, list[int]]] = {}
        for (topic, partition, b), path in moves.items():
            if b == broker:
                by_dir.setdefault(path, {}).setdefault(topic, []).append(partition)
        answer = admin.call("AlterReplicaLogDirs", 2, broker, dirs=[
            A.AlterReplicaLogDir(path=path, topics=[
                A.AlterReplicaLogDirTopic(name=t, partitions=ps) for t, ps in topics.items()])
            for path, topics in by_dir.items()])
        for result in answer.results:
            for p in result.partitions:
                replica = (result.topic_name, p.partition_index, broker)
                if not p.error_code:
                    started.add(replica)
                elif p.error_code != REPLICA_NOT_AVAILABLE:
                    raise MoveFailed(replica, p.error_code)
    return started


class MoveFailed(ToolError):
    """Kafka's AdminCommandFailedException, caused by the broker's error: `java` is what
    kafka-reassign-partitions prints under `Error: ...`."""

    def __init__(self, replica: Replica, code: int) -> None:
        super().__init__(f"Failed to alter dir for {_name(replica)}")
        cause = f"{exception_class(code)}: {error_text(code)}"
        self.java = (f"{ADMIN_FAILED}: {self}\nCaused by: "
                     f"java.util.concurrent.ExecutionException: {cause}")


def execute_moves(admin: Admin, moves: dict[Replica, str], timeout_ms: int) -> None:
    """Kafka's executeMoves: retry until every move started, or the timeout."""
    deadline = time.monotonic() + timeout_ms / 1000
    pending = dict(moves)
    while True:
        started = alter_log_dirs(admin, pending)
        for replica in sorted(started, key=_order):
            print(f"Successfully started moving log directory to {pending[replica]} for "
                  f"replica {replica[0]}-{replica[1]} with broker {replica[2]} ")
            del pending[replica]
        if not pending:
            return
        if time.monotonic() >= deadline:
            raise ArgumentError(
                f"Timed out before log directory move{'' if len(pending) == 1 else 's'} "
                "could be started for: " + ",".join(map(_name, sorted(pending, key=_order))))
        time.sleep(RETRY_S)


def replica_dirs(admin: Admin, replicas: list[Replica]
                 ) -> dict[Replica, tuple[str | None, str | None]]:
    """AdminClient.describeReplicaLogDirs: (current dir, future dir) of each replica on a
    broker that answered (None where it has none)."""
    found: dict[Replica, tuple[str | None, str | None]] = {}
    for broker in sorted({b for _, _, b in replicas}):
        mine = [r for r in replicas if r[2] == broker]
        topics: dict[str, list[int]] = {}
        for topic, partition, _ in mine:
            topics.setdefault(topic, []).append(partition)
        try:
            answer = admin.call("DescribeLogDirs", 2, broker, topics=[
                D.DescribableLogDirTopic(topic=t, partitions=ps) for t, ps in topics.items()])
        except (OSError, ToolError):
            continue  # a broker that does not answer: its replicas are not found
        dirs: dict[tuple[str, int], list[str | None]] = {}
        for result in answer.results:
            for t in result.topics:
                for p in t.partitions:
                    entry = dirs.setdefault((t.name, p.partition_index), [None, None])
                    entry[1 if p.is_future_key else 0] = result.log_dir
        for replica in mine:
            current, future = dirs.get((replica[0], replica[1]), [None, None])
            found[replica] = (current, future)
    return found


def move_states(admin: Admin, moves: dict[Replica, str]) -> tuple[str, bool]:
    """Kafka's replicaMoveStatesToString for --verify, and whether a move goes on."""
    described = replica_dirs(admin, list(moves))
    lines, ongoing = [], False
    for replica in sorted(moves, key=_order):
        topic, partition, broker = replica
        target = moves[replica]
        tp = f"{topic}-{partition}"
        if replica not in described:
            lines.append(f"Partition {tp} cannot be found in any live log directory on "
                         f"broker {broker}.")
            continue
        current, future = described[replica]
        if current is None:
            lines.append(f"Partition {tp} is not found in any live log dir on broker "
                         f"{broker}. There is likely an offline log directory on the broker.")
        elif future is None and current == target:
            lines.append(f"Reassignment of replica {_name(replica)} completed successfully.")
        elif future is None:
            lines.append(f"Partition {tp} on broker {broker} is not being moved from log dir "
                         f"{current} to {target}.")
        elif future == target:
            ongoing = True
            lines.append(f"Reassignment of replica {_name(replica)} is still in progress.")
        else:
            ongoing = True
            lines.append(f"Partition {tp} on broker {broker} is being moved to log dir "
                         f"{future} instead of {target}.")
    return "\n".join(lines), ongoing
