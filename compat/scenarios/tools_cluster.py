"""Kafka's tools against three brokers (the lab's trio): a reassignment that moves
replicas under a throttle, verified until complete (and the throttle gone), a reorder
that a preferred election turns into a new leader, TopicCommand's
`--under-replicated-partitions` and `--unavailable-partitions` while broker 3 is
stopped, the preferred election that gives broker 3 its partition back once it has
returned, and LogDirsCommand over the three brokers. The same command lines run with
Kafka's tools against Kafka's trio and Moldau's, and with Moldau's scripts against
Moldau's; between them the column stops and restarts its broker 3 and waits for its
cluster to show it (Metadata requests), never for a fixed time."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Sequence

from compat.lab import TRIO_PAIR
from compat.launcher import ToolRun
from compat.normalise import Normaliser, substitute
from compat.scenarios import cluster_hanging
from compat.scenarios.base import KAFKA, MOLDAU, Context, Scenario, Side
from compat.scenarios.tool_steps import (
    ADMIN_CLIENT_ID,
    SCRATCH_RULE,
    STDOUT_FRAMES,
    Step,
    kafka_runs,
    moldau_runs,
    step,
    write,
)
from compat.scenarios.tools_offsets import sort_log_dir_partitions
from compat.scenarios.tools_reassign import sort_elected
from compat.transcript import Transcript
from moldau.client.blocking import BlockingConnection
from moldau.protocol.generated.api import ApiKey
from moldau.protocol.generated.metadata_request import MetadataRequest

STOPPED = 3  # the broker each column stops and restarts
SETTLE_TIMEOUT = 120.0  # a Kafka JVM's restart on a busy 2-core machine, then the ISR
VERIFY_TIMEOUT = 120.0

Runs = Callable[[Sequence[Step]], list[ToolRun]]


def _plan(ctx: Context, name: str, replicas: dict[tuple[str, int], list[int]]) -> str:
    partitions = [{"topic": t, "partition": p, "replicas": r} for (t, p), r in replicas.items()]
    return write(ctx, name, json.dumps({"version": 1, "partitions": partitions}))


def _partitions(port: int, topics: Sequence[str]) -> tuple[set[int], list[tuple[int, list[int],
                                                                                 list[int]]]]:
    """(live broker ids, [(leader, replicas, isr)] of the topics' partitions) as the
    broker on `port` sees its cluster."""
    request = MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=t)
                                      for t in topics])
    with BlockingConnection("127.0.0.1", port, timeout=5) as conn:
        response = conn.request(ApiKey.METADATA, 1, request)
    return ({b.node_id for b in response.brokers},
            [(p.leader_id, list(p.replica_nodes), list(p.isr_nodes))
             for t in response.topics for p in t.partitions])


def _wait(what: str, condition: Callable[[], bool]) -> None:
    deadline = time.monotonic() + SETTLE_TIMEOUT
    while True:
        try:
            if condition():
                return
        except (OSError, ConnectionError):
            pass  # a broker still starting: ask again
        if time.monotonic() > deadline:
            raise TimeoutError(f"not within {SETTLE_TIMEOUT:.0f} s: {what}")
        time.sleep(0.5)


def _gone(port: int, topics: Sequence[str]) -> bool:
    """Broker STOPPED left the cluster: no leader, nor ISR member beside others."""
    live, partitions = _partitions(port, topics)
    return STOPPED not in live and bool(partitions) and all(
        leader != STOPPED and (STOPPED not in isr or isr == [STOPPED])
        for leader, _, isr in partitions)


def _healed(port: int, topics: Sequence[str]) -> bool:
    """Every broker is back and every partition has a leader and its whole ISR."""
    live, partitions = _partitions(port, topics)
    return STOPPED in live and bool(partitions) and all(
        leader >= 0 and sorted(isr) == sorted(replicas) for leader, replicas, isr in partitions)


class Column:
    """One column's run: its steps through `runs`, into `transcript`."""

    def __init__(self, ctx: Context, runs: Runs) -> None:
        self.ctx, self.runs, self.transcript = ctx, runs, Transcript()
        assert ctx.lab.trio is not None, "the cluster scenarios need Lab.start(with_trio=True)"
        self.brokers = ctx.lab.trio.brokers(ctx.broker)

    def do(self, *steps: Step) -> None:
        for s, result in zip(steps, self.runs(steps), strict=True):
            self.transcript.command(s.tool, s.args, result, stderr=s.stderr)

    def verify(self, plan: str) -> None:
        """--verify until nothing is in progress; the last run goes in the transcript
        (how many it took depends on the machine, not on the broker)."""
        check = step("kafka-reassign-partitions", "--bootstrap-server", self.ctx.bootstrap,
                     "--verify", "--reassignment-json-file", plan)
        deadline = time.monotonic() + VERIFY_TIMEOUT
        while True:
            (result,) = self.runs([check])
            if "still in progress" not in result.stdout or time.monotonic() > deadline:
                break
            time.sleep(1)
        self.transcript.command(check.tool, check.args, result)

    def hang(self, topic: str, transactional_id: str) -> None:
        """A transactional batch on broker 2 whose coordinator never heard of it."""
        code = cluster_hanging.produce_unverified(self.brokers[1].port, topic, transactional_id)
        self.transcript.add(f"# transactional batch without AddPartitionsToTxn: error {code}")

    def stop_broker(self, topics: Sequence[str]) -> None:
        code = self.brokers[STOPPED - 1].stop()
        self.transcript.add(f"# broker {STOPPED} stopped "
                            f"{'cleanly' if code in (0, 143) else f'with exit code {code}'}")
        _wait(f"broker {STOPPED} out of the cluster",
              lambda: _gone(self.brokers[0].port, topics))

    def restart_broker(self, topics: Sequence[str]) -> None:
        assert self.ctx.lab.trio is not None
        self.ctx.lab.trio.start_again(self.brokers[STOPPED - 1])
        self.transcript.add(f"# broker {STOPPED} restarted")
        _wait(f"broker {STOPPED} back in every ISR",
              lambda: _healed(self.brokers[0].port, topics))


def run_column(ctx: Context, runs: Runs) -> Transcript:
    column = Column(ctx, runs)
    topic, single = f"cluster-{ctx.token}", f"cluster-{ctx.token}-single"
    hanging = f"cluster-{ctx.token}-hanging"
    ours = f"cluster-{ctx.token}.*"  # a regex: this run's topics, not an earlier run's
    boot = ("--bootstrap-server", ctx.bootstrap)
    topics = ("kafka-topics", *boot)
    reassign = ("kafka-reassign-partitions", *boot)
    elect = ("kafka-leader-election", *boot)
    configs = ("kafka-configs", *boot, "--describe")
    log_dirs = step("kafka-log-dirs", *boot, "--describe", "--topic-list", f"{topic},{single}")
    to_move = write(ctx, "topics.json", json.dumps({"version": 1, "topics": [{"topic": topic}]}))
    move = _plan(ctx, "move.json", {(topic, 0): [2, 3], (topic, 1): [3, 1]})
    reorder = _plan(ctx, "reorder.json", {(topic, 2): [1, 3]})
    election = write(ctx, "election.json", json.dumps({"partitions": [
        {"topic": topic, "partition": p} for p in range(3)]}))
    column.do(
        step(*topics, "--create", "--topic", topic, "--replica-assignment", "1:2,2:3,3:1"),
        step(*topics, "--create", "--topic", single, "--replica-assignment", "3"),
        step(*topics, "--describe", "--topic", ours),
        log_dirs,
        step(*reassign, "--generate", "--topics-to-move-json-file", to_move,
             "--broker-list", "1,2"),
        # replicas move to other brokers: 1 leaves partition 0, 2 leaves partition 1
        step(*reassign, "--execute", "--reassignment-json-file", move, "--throttle", "1000000"),
        step(*configs, "--entity-type", "topics", "--entity-name", topic),
        step(*configs, "--entity-type", "brokers", "--entity-name", "3"))
    column.verify(move)
    column.do(
        step(*configs, "--entity-type", "topics", "--entity-name", topic),
        step(*configs, "--entity-type", "brokers", "--entity-name", "3"),
        step(*topics, "--describe", "--topic", topic),
        # the same replicas, another preferred leader: the leader stays until an election
        step(*reassign, "--execute", "--reassignment-json-file", reorder))
    column.verify(reorder)
    column.do(
        step(*topics, "--describe", "--topic", topic),
        step(*elect, "--election-type", "preferred", "--topic", topic, "--partition", "2"),
        step(*elect, "--election-type", "preferred", "--topic", topic, "--partition", "2"),
        step(*topics, "--describe", "--topic", topic))
    column.stop_broker([topic, single])
    column.do(
        step(*topics, "--describe", "--under-replicated-partitions", "--topic", ours),
        step(*topics, "--describe", "--unavailable-partitions", "--topic", ours),
        step(*topics, "--describe", "--topic", ours),
        step(*elect, "--election-type", "preferred", "--path-to-json-file", election))
    column.restart_broker([topic, single])
    column.do(
        step(*topics, "--describe", "--under-replicated-partitions", "--topic", ours),
        step(*topics, "--describe", "--unavailable-partitions", "--topic", ours),
        step(*topics, "--describe", "--topic", topic),
        # broker 3 is back but leads nothing: the preferred election gives it partition 1
        step(*elect, "--election-type", "preferred", "--path-to-json-file", election),
        step(*topics, "--describe", "--topic", ours),
        log_dirs)
    # find-hanging: a transaction its coordinator does not track (cluster_hanging.py)
    verification = "transaction.partition.verification.enable"
    brokers_default = ("kafka-configs", *boot, "--alter", "--entity-type", "brokers",
                       "--entity-default")
    txns = ("kafka-transactions", *boot)
    column.do(
        step(*topics, "--create", "--topic", hanging, "--replica-assignment", "2"),
        step(*brokers_default, "--add-config", f"{verification}=false"))
    column.hang(hanging, f"hanging-{ctx.token}")
    column.do(
        step(*txns, "find-hanging", "--broker-id", "2", "--max-transaction-timeout", "0"),
        step(*txns, "find-hanging", "--topic", hanging),
        step(*txns, "abort", "--topic", hanging, "--partition", "0", "--start-offset", "0"),
        step(*txns, "find-hanging", "--broker-id", "2"),
        step(*brokers_default, "--delete-config", verification),
        step(*topics, "--delete", "--topic", topic),
        step(*topics, "--delete", "--topic", single),
        step(*topics, "--delete", "--topic", hanging))
    return column.transcript


def sort_proposed_replicas(lines: list[str]) -> list[str]:
    """--generate proposes replicas from a random start broker: with as many brokers as
    replicas only their order varies, sorted here on both sides."""
    out: list[str] = []
    for line in lines:
        if out and out[-1] == "Proposed partition reassignment configuration":
            document = json.loads(line)
            for partition in document["partitions"]:
                partition["replicas"] = sorted(partition["replicas"])
            line = json.dumps(document, separators=(",", ":"))
        out.append(line)
    return out


TOPIC_LINE = re.compile(r"^\t?Topic: (\S+)\t")


def sort_topic_blocks(lines: list[str]) -> list[str]:
    """TopicCommand's --describe prints topics in the order of a Java HashMap of their
    names, and the names hold the run's token: each run of topic lines is sorted by
    topic, each topic's own lines kept in order."""
    out: list[str] = []
    blocks: dict[str, list[str]] = {}
    for line in [*lines, None]:
        match = TOPIC_LINE.match(line) if line is not None else None
        if match:
            blocks.setdefault(match.group(1), []).append(line)  # type: ignore[arg-type]
            continue
        for name in sorted(blocks):
            out.extend(blocks[name])
        blocks = {}
        if line is not None:
            out.append(line)
    return out


RULES: tuple[Normaliser, ...] = (
    STDOUT_FRAMES, SCRATCH_RULE, ADMIN_CLIENT_ID, sort_log_dir_partitions, sort_elected,
    sort_proposed_replicas, sort_topic_blocks,
    # find-hanging's last column: minutes since the batch's fixed timestamp, until now
    substitute(rf"^(.*\s{cluster_hanging.PRODUCER_ID}\s.*\s)\d+\s*$", r"\1<minutes>"),
    # brokers 2 and 3's log dirs (broker 1's is the column's <data>)
    substitute(r"<lab>/trio-(?:kafka|moldau)-(\d)/data", r"<lab>/trio-<kind>-\1/data"))

_ON_KAFKA = Side("cluster/kafka-tool@kafka", KAFKA, lambda ctx: run_column(ctx, kafka_runs),
                 pair=TRIO_PAIR)

SCENARIOS = [
    Scenario("cluster.kafka-tool",
             "Kafka's reassignment, election, topic and log-dir tools on three brokers",
             _ON_KAFKA,
             Side("cluster/kafka-tool@moldau", MOLDAU, lambda ctx: run_column(ctx, kafka_runs),
                  pair=TRIO_PAIR),
             RULES, fast=False),
    Scenario("cluster.moldau-tool",
             "Moldau's kafka-reassign-partitions/-leader-election/-topics/-log-dirs on "
             "three brokers vs Kafka's tools on Kafka's",
             _ON_KAFKA,
             Side("cluster/moldau-tool@moldau", MOLDAU,
                  lambda ctx: run_column(ctx, moldau_runs), pair=TRIO_PAIR),
             RULES, fast=False),
]
