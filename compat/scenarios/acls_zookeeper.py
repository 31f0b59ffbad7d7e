"""ACLs written straight into ZooKeeper (the deprecated `--authorizer-properties
zookeeper.connect=...` path), on both brokers' chroots.

`acls.zookeeper-enforced` runs on the ACL pair (compat/acl_setup.py: nobody is a super
user, no ACL means no access): Kafka's client (compat/java/AclProbe.java) as
User:ANONYMOUS is refused a topic and a group, Kafka's AclCommand grants them through
ZooKeeper, the client is allowed, the grants are removed, the client is refused again.
Each broker must follow its chroot's znodes and change notifications.

`acls.zookeeper-moldau-tool` runs on the shared pair: Moldau's kafka-acls.sh writes and
removes ACLs in Moldau's chroot and Kafka's AclCommand lists them from there, beside
Kafka's AclCommand doing both in Kafka's chroot: the znodes Moldau's tool writes must be
the ones Kafka reads."""

from __future__ import annotations

from collections.abc import Sequence

from compat import acl_setup
from compat.acl_setup import ACL_COMMAND, PRINCIPAL
from compat.batch import run_batch
from compat.lab import ACL_PAIR
from compat.normalise import Normaliser
from compat.scenarios.acl_output import STDOUT_FRAMES, sort_acl_blocks
from compat.scenarios.acls import KAFKA_TOOL, LABEL, MOLDAU_TOOL, run_commands
from compat.scenarios.base import KAFKA, MOLDAU, Context, Scenario, Side
from compat.transcript import Transcript

PROBE = "AclProbe"
BEFORE = ("create", "describe", "produce", "consume", "commit", "describe-group")
ALLOWED = ("await-allowed", "describe", "produce", "produce-idempotent", "consume", "commit",
           "describe-group")
DENIED = ("await-denied", "describe", "produce", "consume", "commit", "describe-group")


def enforced(ctx: Context) -> Transcript:
    """One JVM: the probe and Kafka's AclCommand take turns."""
    topic, group = f"acl-{ctx.token}-guarded", f"acl-{ctx.token}-readers"
    zookeeper = acl_setup.zookeeper_args(ctx.zookeeper_connect)
    producer = ["--producer", "--idempotent", "--topic", topic, "--allow-principal", PRINCIPAL]
    consumer = ["--consumer", "--topic", topic, "--group", group, "--allow-principal",
                PRINCIPAL]

    def probe(steps: tuple[str, ...]) -> tuple[str, list[str]]:
        return PROBE, [ctx.bootstrap, topic, group, *steps]

    commands = [
        probe(BEFORE),
        (ACL_COMMAND, [*zookeeper, "--add", *producer]),
        (ACL_COMMAND, [*zookeeper, "--add", *consumer]),
        probe(ALLOWED),
        (ACL_COMMAND, [*zookeeper, "--list", "--topic", topic, "--group", group, "--cluster"]),
        (ACL_COMMAND, [*zookeeper, "--remove", *producer, "--force"]),
        (ACL_COMMAND, [*zookeeper, "--remove", *consumer, "--force"]),
        probe(DENIED),
    ]
    return batch_transcript(commands)


def batch_transcript(commands: list[tuple[str, list[str]]],
                     jvm_options: Sequence[str] = ()) -> Transcript:
    """Run AclProbe and AclCommand steps in one JVM batch; AclProbe's lines without its
    standard error (the client's log is timing, not the broker's answers)."""
    runs = run_batch(commands, timeout=300, jvm_options=jvm_options)
    transcript = Transcript()
    for (main_class, args), run in zip(commands, runs, strict=True):
        if main_class == PROBE:
            transcript.command(PROBE, args, run, stderr=False)
        else:
            transcript.command(LABEL, args, run)
    return transcript


def zookeeper_steps(token: str) -> list[list[str]]:
    """Every kind of znode the tool writes (literal, prefixed and wildcard topics, a group,
    the cluster, a transactional id; allow and deny, hosts), listed, then removed three
    ways: named entries, `match`, a whole resource. Fewer command lines than through the
    Admin API: the command line itself is acls.moldau-tool's business."""
    prefix, ledger = f"acl-{token}-", f"acl-{token}-ledger"
    tx, auditors = f"acl-{token}-tx", f"acl-{token}-auditors"
    producer = ["--producer", "--idempotent", "--topic", ledger, "--transactional-id", tx,
                "--allow-principal", "User:writer"]
    return [
        ["--add", *producer],
        ["--add", "--consumer", "--topic", ledger, "--group", auditors, "--allow-principal",
         "User:reader"],
        ["--add", "--topic", prefix, "--resource-pattern-type", "prefixed", "--allow-principal",
         "User:carol", "--operation", "Describe", "--deny-principal", "User:mallory",
         "--deny-host", "10.0.0.9"],
        ["--add", "--topic", "*", "--allow-principal", "User:dave", "--operation", "Read"],
        ["--list"],
        ["--list", "--topic", f"{ledger}-eu", "--resource-pattern-type", "match"],
        ["--list", "--principal", "User:writer", "--principal", "User:mallory"],
        ["--remove", *producer, "--force"],
        ["--remove", "--topic", ledger, "--resource-pattern-type", "match", "--force"],
        ["--remove", "--group", auditors, "--cluster", "--transactional-id", tx, "--force"],
        ["--list"],
    ]


def written_by(ctx: Context, writer: str) -> Transcript:
    """The steps in the broker's chroot: additions and removals by `writer`, listings by
    Kafka's AclCommand."""
    zookeeper = acl_setup.zookeeper_args(ctx.zookeeper_connect)
    transcript = Transcript()
    run_commands(transcript, [(KAFKA_TOOL if args[0] == "--list" else writer,
                               [*zookeeper, *args]) for args in zookeeper_steps(ctx.token)])
    return transcript


def written_by_kafka(ctx: Context) -> Transcript:
    return written_by(ctx, KAFKA_TOOL)


def written_by_moldau(ctx: Context) -> Transcript:
    return written_by(ctx, MOLDAU_TOOL)


RULES: tuple[Normaliser, ...] = (STDOUT_FRAMES, sort_acl_blocks)

SCENARIOS = [
    Scenario("acls.zookeeper-enforced",
             "ACLs Kafka's AclCommand writes into ZooKeeper grant and revoke a Java client's "
             "access (no super user)",
             Side("acls/zookeeper-enforced@kafka", KAFKA, enforced, ACL_PAIR),
             Side("acls/zookeeper-enforced@moldau", MOLDAU, enforced, ACL_PAIR), RULES),
    Scenario("acls.zookeeper-moldau-tool",
             "Moldau's kafka-acls.sh writing ZooKeeper, Kafka's AclCommand listing it, vs "
             "Kafka's AclCommand doing both",
             Side("acls/zookeeper-kafka-tool@kafka", KAFKA, written_by_kafka),
             Side("acls/zookeeper-moldau-tool@moldau", MOLDAU, written_by_moldau), RULES),
]
