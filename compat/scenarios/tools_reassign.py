"""Reassignment and leader election with Kafka's tools and Moldau's, on the lab's single
broker: what one broker allows (a plan that keeps the replicas, with and without a
throttle, verified, listed, cancelled; elections that find the leader already elected)
and the errors (a broker or partition that does not exist, duplicate replicas, a
malformed plan, missing or conflicting actions)."""

from __future__ import annotations

import json
import re

from compat.normalise import Normaliser
from compat.scenarios.base import Context
from compat.scenarios.tool_steps import (
    ADMIN_CLIENT_ID,
    SCRATCH_RULE,
    STDOUT_FRAMES,
    Step,
    step,
    tool_scenarios,
    write,
)


def _plan(ctx: Context, name: str, replicas: dict[tuple[str, int], list[int]]) -> str:
    partitions = [{"topic": t, "partition": p, "replicas": r} for (t, p), r in replicas.items()]
    return write(ctx, name, json.dumps({"version": 1, "partitions": partitions}))


def steps(ctx: Context) -> list[Step]:
    topic, missing = f"reassign-{ctx.token}", f"reassign-{ctx.token}-missing"
    boot = ("--bootstrap-server", ctx.bootstrap)
    reassign = ("kafka-reassign-partitions", *boot)
    elect = ("kafka-leader-election", *boot)
    to_move = write(ctx, "topics.json", json.dumps({"version": 1, "topics": [{"topic": topic}]}))
    missing_to_move = write(ctx, "missing-topics.json",
                            json.dumps({"version": 1, "topics": [{"topic": missing}]}))
    stay = _plan(ctx, "stay.json", {(topic, 0): [1], (topic, 1): [1]})
    unknown_broker = _plan(ctx, "unknown-broker.json", {(topic, 0): [2]})
    duplicate = _plan(ctx, "duplicate.json", {(topic, 0): [1, 1]})
    no_partition = _plan(ctx, "no-partition.json", {(topic, 7): [1]})
    malformed = write(ctx, "malformed.json", '{"version":1,"partitions":[')
    election = write(ctx, "election.json", json.dumps({"partitions": [
        {"topic": topic, "partition": 0}, {"topic": topic, "partition": 1}]}))
    return [
        step("kafka-topics", *boot, "--create", "--topic", topic, "--partitions", "2",
             "--replication-factor", "1"),
        step(*reassign, "--generate", "--topics-to-move-json-file", to_move,
             "--broker-list", "1"),
        step(*reassign, "--generate", "--topics-to-move-json-file", to_move,
             "--broker-list", "1,2"),
        step(*reassign, "--generate", "--topics-to-move-json-file", missing_to_move,
             "--broker-list", "1"),
        step(*reassign, "--execute", "--reassignment-json-file", stay),
        step(*reassign, "--verify", "--reassignment-json-file", stay),
        step(*reassign, "--list"),
        step(*reassign, "--execute", "--reassignment-json-file", stay, "--throttle", "1000000"),
        step(*reassign, "--verify", "--reassignment-json-file", stay),
        step(*reassign, "--execute", "--reassignment-json-file", stay, "--additional"),
        step(*reassign, "--cancel", "--reassignment-json-file", stay),
        step(*reassign, "--list"),
        step(*reassign, "--execute", "--reassignment-json-file", unknown_broker),
        step(*reassign, "--execute", "--reassignment-json-file", duplicate),
        step(*reassign, "--execute", "--reassignment-json-file", no_partition),
        step(*reassign, "--execute", "--reassignment-json-file", malformed),
        step(*reassign, "--verify"),
        step(*reassign),
        step(*reassign, "--list", "--verify"),
        step(*elect, "--election-type", "preferred", "--topic", topic, "--partition", "0"),
        step(*elect, "--election-type", "unclean", "--topic", topic, "--partition", "1"),
        step(*elect, "--election-type", "PREFERRED", "--path-to-json-file", election),
        step(*elect, "--election-type", "preferred", "--topic", missing, "--partition", "0"),
        step(*elect, "--election-type", "preferred", "--topic", topic, "--partition", "9"),
        step(*elect, "--election-type", "preferred"),
        step(*elect, "--election-type", "fastest", "--topic", topic, "--partition", "0"),
        step(*elect, "--topic", topic, "--partition", "0"),
        step(*elect, "--election-type", "preferred", "--topic", topic),
        step(*elect, "--election-type", "preferred", "--all-topic-partitions", "--topic", topic),
        step("kafka-topics", *boot, "--delete", "--topic", topic),
    ]


ELECTED = re.compile(r"^((?:Valid replica already elected|Successfully completed leader "
                     r"election \(\w+\)) for partitions )(.*)$")


def sort_elected(lines: list[str]) -> list[str]:
    """LeaderElectionCommand lists the partitions of one outcome from a Java set (hash
    order, which changes between runs): sorted on both sides."""
    out = []
    for line in lines:
        match = ELECTED.match(line)
        out.append(match.group(1) + ", ".join(sorted(match.group(2).split(", ")))
                   if match else line)
    return out


RULES: tuple[Normaliser, ...] = (STDOUT_FRAMES, SCRATCH_RULE, ADMIN_CLIENT_ID, sort_elected)

SCENARIOS = tool_scenarios(
    "reassign", steps, RULES,
    "ReassignPartitionsCommand and LeaderElectionCommand against each broker",
    "Moldau's kafka-reassign-partitions/-leader-election vs Kafka's tools on Kafka")
