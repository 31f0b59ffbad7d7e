"""Kafka's AclCommand (`kafka.admin.AclCommand`, in the core jar) through the Admin API
against both brokers, and Moldau's kafka-acls.sh with the same arguments against Kafka
beside Kafka's tool: add (literal and prefixed topics, a group, the cluster, a
transactional id, --producer --idempotent, --consumer), list (everything, by resource,
--resource-pattern-type match and any, --principal), remove with --force, and the
errors (no action, an operation the resource type lacks, match with --add, a name the
broker refuses, a malformed principal).

Both run on the shared pair, where the lab's connections are super users, and every run
removes what it added: the listings of everything see this run's ACLs only."""

from __future__ import annotations

from collections.abc import Sequence

from compat.normalise import Normaliser
from compat.scenarios.acl_output import STDOUT_FRAMES, sort_acl_blocks
from compat.scenarios.base import KAFKA, MOLDAU, Context, Scenario, Side, kafka_tools, moldau_tool
from compat.transcript import Transcript

ACL_COMMAND = "kafka.admin.AclCommand"
MOLDAU_SCRIPT = "kafka-acls.sh"
LABEL = "kafka-acls"
# who runs a command line: Kafka's AclCommand or Moldau's kafka-acls.sh
KAFKA_TOOL = "kafka"
MOLDAU_TOOL = "moldau"


def _names(token: str) -> dict[str, str]:
    """The run's resource names (the token keeps runs apart; normalised to <run>)."""
    return {name: f"acl-{token}-{name}" for name in
            ("orders", "group", "tx", "ledger", "auditors")} | {"prefix": f"acl-{token}-"}


def _producer(token: str) -> list[str]:
    n = _names(token)
    return ["--producer", "--idempotent", "--topic", n["ledger"], "--transactional-id", n["tx"],
            "--allow-principal", "User:writer"]


def _consumer(token: str) -> list[str]:
    n = _names(token)
    return ["--consumer", "--topic", n["ledger"], "--group", n["auditors"],
            "--allow-principal", "User:reader"]


def additions(token: str) -> list[list[str]]:
    """A literal, a prefixed and the wildcard topic, a group, the cluster, a transactional
    id, and the --producer --idempotent and --consumer expansions."""
    n = _names(token)
    return [
        ["--add", "--topic", n["orders"], "--allow-principal", "User:alice", "--allow-principal",
         "User:bob", "--operation", "Read", "--operation", "Write"],
        ["--add", "--topic", n["prefix"], "--resource-pattern-type", "prefixed",
         "--allow-principal", "User:carol", "--operation", "Describe", "--deny-principal",
         "User:mallory", "--deny-host", "10.0.0.9"],
        # every topic: listings by `match` include it, and a `match` removal takes it
        ["--add", "--topic", "*", "--allow-principal", "User:dave", "--operation", "Read"],
        ["--add", "--group", n["group"], "--allow-principal", "User:alice", "--operation",
         "Read", "--allow-host", "10.0.0.1", "--allow-host", "10.0.0.2"],
        ["--add", "--cluster", "--allow-principal", "User:admin", "--operation", "Alter",
         "--operation", "DescribeConfigs"],
        ["--add", "--transactional-id", n["tx"], "--allow-principal", "User:alice",
         "--operation", "Describe"],
        ["--add", *_producer(token)],
        ["--add", *_consumer(token)],
    ]


def listings(token: str) -> list[list[str]]:
    """Everything, by resource, by pattern matching, by principal."""
    n = _names(token)
    return [
        ["--list"],
        ["--list", "--topic", n["orders"]],
        ["--list", "--group", n["group"], "--cluster"],
        # match: the prefixed pattern applies to the name; any: every pattern of the name
        ["--list", "--topic", f"{n['orders']}-eu", "--resource-pattern-type", "match"],
        ["--list", "--topic", n["ledger"], "--resource-pattern-type", "any"],
        ["--list", "--principal", "User:alice", "--principal", "User:nobody"],
    ]


def removals(token: str) -> list[list[str]]:
    """Every ACL of `additions` removed, then everything listed (nothing)."""
    n = _names(token)
    return [
        ["--remove", "--topic", n["orders"], "--allow-principal", "User:bob", "--operation",
         "Write", "--force"],
        ["--list", "--topic", n["orders"]],
        ["--remove", "--topic", n["orders"], "--force"],
        ["--remove", *_producer(token), "--force"],
        ["--remove", "--topic", n["ledger"], "--resource-pattern-type", "match", "--force"],
        ["--remove", "--group", n["group"], "--group", n["auditors"], "--cluster",
         "--transactional-id", n["tx"], "--force"],
        ["--list"],
    ]


def failures(token: str) -> list[list[str]]:
    """Command lines Kafka refuses: its usage errors, a name the broker refuses, a
    principal without a type."""
    n = _names(token)
    return [
        ["--topic", n["orders"], "--allow-principal", "User:alice"],
        ["--add", "--group", n["group"], "--allow-principal", "User:alice", "--operation",
         "Write"],
        ["--add", "--topic", n["orders"], "--cluster", "--allow-principal", "User:alice",
         "--operation", "ClusterAction"],
        ["--add", "--topic", n["orders"], "--allow-principal", "User:alice",
         "--resource-pattern-type", "match"],
        ["--add", "--topic", "", "--allow-principal", "User:alice"],
        ["--add", "--topic", n["orders"], "--allow-principal", "alice"],
    ]


def run_commands(transcript: Transcript, commands: Sequence[tuple[str, list[str]]]) -> None:
    """(tool, arguments) in order; consecutive ones of Kafka's tool in one JVM."""
    pending: list[list[str]] = []

    def run_pending() -> None:
        if pending:
            kafka_tools(transcript, ACL_COMMAND, LABEL, pending)
            pending.clear()

    for tool, args in commands:
        if tool == KAFKA_TOOL:
            pending.append(args)
        else:
            run_pending()
            moldau_tool(transcript, MOLDAU_SCRIPT, LABEL, args)
    run_pending()


def through_admin(ctx: Context, tool: str) -> Transcript:
    transcript = Transcript()
    steps = [*additions(ctx.token), *listings(ctx.token), *removals(ctx.token),
             *failures(ctx.token)]
    run_commands(transcript, [(tool, ["--bootstrap-server", ctx.bootstrap, *args])
                              for args in steps])
    return transcript


def with_kafka_tool(ctx: Context) -> Transcript:
    return through_admin(ctx, KAFKA_TOOL)


def with_moldau_tool(ctx: Context) -> Transcript:
    return through_admin(ctx, MOLDAU_TOOL)


RULES: tuple[Normaliser, ...] = (STDOUT_FRAMES, sort_acl_blocks)

KAFKA_TOOL_ON_KAFKA = Side("acls/kafka-tool@kafka", KAFKA, with_kafka_tool)

SCENARIOS = [
    Scenario("acls.kafka-tool",
             "Kafka's AclCommand --bootstrap-server against each broker: add, list, remove, "
             "errors",
             KAFKA_TOOL_ON_KAFKA, Side("acls/kafka-tool@moldau", MOLDAU, with_kafka_tool),
             RULES),
    # Moldau's tool talks to Kafka while nothing else does: after the reference column
    Scenario("acls.moldau-tool",
             "Moldau's kafka-acls.sh against Kafka vs Kafka's AclCommand against Kafka",
             KAFKA_TOOL_ON_KAFKA, Side("acls/moldau-tool@kafka", KAFKA, with_moldau_tool),
             RULES, requires=("acls.kafka-tool",)),
]
