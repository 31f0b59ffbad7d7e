"""Named principals on the ACL pair's SASL_PLAINTEXT listener (SCRAM-SHA-256, the users of
compat/acl_setup.py), and the delegation tokens those logins may ask for.

`acls.sasl-principals`: Kafka's AclCommand grants User:alice a producer and a consumer of a
prefixed topic and a group through ZooKeeper, with two host-restricted denies (one for
127.0.0.1, where the lab's clients are, one for another host); Kafka's client
(compat/java/AclProbe.java) then logs in as alice, as bob (no ACL) and with a wrong
password, and each step's outcome (or authorization error) is compared.

`tokens.kafka-tool` / `tokens.moldau-tool`: Kafka's DelegationTokenCommand, and Moldau's
kafka-delegation-tokens.sh, as alice and bob: create (bob the renewer), describe (own
tokens, by owner, as the renewer), renew, expire, and the errors (a PLAINTEXT login, an
unknown HMAC, a missing option)."""

from __future__ import annotations

import re

from compat import acl_setup
from compat.acl_setup import ACL_COMMAND
from compat.batch import run_batch
from compat.lab import ACL_PAIR
from compat.normalise import Normaliser, substitute
from compat.scenarios.acl_output import STDOUT_FRAMES, sort_acl_blocks
from compat.scenarios.acls_zookeeper import PROBE, batch_transcript
from compat.scenarios.base import KAFKA, MOLDAU, Context, Scenario, Side, lab_broker, moldau_tool
from compat.scenarios.tool_steps import SCRATCH_RULE, write
from compat.transcript import Transcript
from moldau import properties as java_properties

ALICE_STEPS = ("await-allowed", "describe", "produce", "produce-idempotent", "consume",
               "commit", "describe-group")
REFUSED_STEPS = ("describe", "produce", "consume", "commit", "describe-group")


def sasl_address(ctx: Context) -> str:
    """The column's broker's SASL_PLAINTEXT listener."""
    return acl_setup.sasl_bootstrap(lab_broker(ctx.lab, ctx.pair, ctx.broker))


def sasl_bootstrap(ctx: Context, user: str, password: str | None = None) -> str:
    """AclProbe's BOOTSTRAP for a SCRAM login: USER:PASSWORD@HOST:PORT."""
    secret = acl_setup.USERS[user] if password is None else password
    return f"{user}:{secret}@{sasl_address(ctx)}"


def principals(ctx: Context) -> Transcript:
    """One JVM: AclCommand's grants through ZooKeeper, then the probe as each login."""
    prefix = f"acl-{ctx.token}-alice-"
    orders, audit, group = f"{prefix}orders", f"{prefix}audit", f"{prefix}readers"
    zookeeper = acl_setup.zookeeper_args(ctx.zookeeper_connect)
    alice, bob = sasl_bootstrap(ctx, "alice"), sasl_bootstrap(ctx, "bob")
    prefixed = ["--topic", prefix, "--resource-pattern-type", "prefixed"]
    commands: list[tuple[str, list[str]]] = [
        (ACL_COMMAND, [*zookeeper, "--add", "--producer", *prefixed,
                       "--allow-principal", "User:alice"]),
        (ACL_COMMAND, [*zookeeper, "--add", "--consumer", *prefixed, "--group", group,
                       "--allow-principal", "User:alice"]),
        (ACL_COMMAND, [*zookeeper, "--add", "--topic", audit, "--deny-principal",
                       "User:alice", "--deny-host", "127.0.0.1", "--operation", "Read"]),
        (ACL_COMMAND, [*zookeeper, "--add", *prefixed, "--deny-principal", "User:alice",
                       "--deny-host", "10.0.0.9", "--operation", "Write"]),
        (ACL_COMMAND, [*zookeeper, "--add", "--group", group, "--allow-principal", "User:bob",
                       "--operation", "Describe"]),
        (PROBE, [ctx.bootstrap, orders, group, "create"]),  # User:ANONYMOUS may create
        (PROBE, [ctx.bootstrap, audit, group, "create"]),
        (PROBE, [alice, orders, group, *ALICE_STEPS]),
        (PROBE, [alice, audit, group, "describe", "produce", "consume", "commit"]),
        (PROBE, [bob, orders, group, *REFUSED_STEPS]),
        (PROBE, [sasl_bootstrap(ctx, "alice", "not-her-secret"), orders, group, "describe"]),
    ]
    return batch_transcript(commands)


TOKEN_TOOL = "org.apache.kafka.tools.DelegationTokenCommand"
TOKEN_LABEL = "kafka-delegation-tokens"
TOKEN_SCRIPT = "kafka-delegation-tokens.sh"
CREATED = re.compile(r"^Created delegation token with tokenId : (\S+)")


def _logins(ctx: Context) -> dict[str, str]:
    """--command-config files: alice and bob over SCRAM, and a PLAINTEXT one."""
    settings = {user: acl_setup.client_properties(user) for user in acl_setup.USERS}
    settings["plaintext"] = {"security.protocol": "PLAINTEXT"}
    return {name: write(ctx, f"{name}.properties", java_properties.dumps(props))
            for name, props in settings.items()}


def token_steps(ctx: Context, hmac: str | None) -> list[list[str]]:
    """Before the token exists (`hmac` None): its creation and the errors; after: the
    rest, with the created token's HMAC."""
    logins = _logins(ctx)

    def as_user(user: str, *args: str) -> list[str]:
        return ["--bootstrap-server", sasl_address(ctx), "--command-config",
                logins[user], *args]

    if hmac is None:
        return [
            as_user("alice", "--create", "--renewer-principal", "User:bob",
                    "--max-life-time-period", "-1"),
            ["--bootstrap-server", ctx.bootstrap, "--command-config", logins["plaintext"],
             "--create", "--max-life-time-period", "-1"],
            ["--bootstrap-server", sasl_address(ctx), "--create"],
            as_user("alice", "--renew", "--renew-time-period", "-1"),
        ]
    return [
        as_user("alice", "--describe"),
        as_user("alice", "--describe", "--owner-principal", "User:alice"),
        as_user("bob", "--describe", "--owner-principal", "User:alice"),
        as_user("bob", "--renew", "--hmac", hmac, "--renew-time-period", "-1"),
        as_user("alice", "--renew", "--hmac", "bm90LWEtdG9rZW4=", "--renew-time-period", "-1"),
        as_user("alice", "--expire", "--hmac", hmac, "--expiry-time-period", "-1"),
        as_user("alice", "--describe", "--owner-principal", "User:alice"),
        as_user("bob", "--renew", "--hmac", hmac, "--renew-time-period", "-1"),
    ]


class _TokenRun:
    """Runs the steps with Kafka's tool (in batches) or Moldau's script, in two rounds:
    the second needs the HMAC the first created."""

    def __init__(self, ctx: Context, moldau_script: bool) -> None:
        self.ctx, self.moldau_script = ctx, moldau_script
        self.transcript = Transcript()

    def round(self, steps: list[list[str]]) -> None:
        if self.moldau_script:
            for args in steps:
                moldau_tool(self.transcript, TOKEN_SCRIPT, TOKEN_LABEL, args)
            return
        for args, run in zip(steps, run_batch([(TOKEN_TOOL, args) for args in steps]),
                             strict=True):
            self.transcript.command(TOKEN_LABEL, args, run)

    def run(self) -> Transcript:
        self.round(token_steps(self.ctx, None))
        created = next((m for line in self.transcript.lines if (m := CREATED.match(line))),
                       None)
        if created is None:
            self.transcript.add("no token was created")
            return self.transcript
        self.round(token_steps(self.ctx, self._hmac()))
        # the token's own id and HMAC differ between brokers: placeholders
        token_id, hmac = created.group(1), self._hmac()
        self.transcript.lines = [line.replace(token_id, "<token-id>").replace(hmac, "<hmac>")
                                 for line in self.transcript.lines]
        return self.transcript

    def _hmac(self) -> str:
        lines = self.transcript.lines
        header = next(i for i, line in enumerate(lines) if line.startswith("TOKENID"))
        row = next(line for line in lines[header + 1:] if line.strip())  # after an empty line
        return row.split()[1]


def tokens_kafka_tool(ctx: Context) -> Transcript:
    return _TokenRun(ctx, moldau_script=False).run()


def tokens_moldau_tool(ctx: Context) -> Transcript:
    return _TokenRun(ctx, moldau_script=True).run()


DATE = substitute(re.compile(r"\b\d{4}-\d{2}-\d{2}T\d{2}:\d{2}\b"), "<date>")
# ids and HMACs have fixed lengths (22 and 88 characters), so the table's padding matches
TOKEN_RULES: tuple[Normaliser, ...] = (SCRATCH_RULE, STDOUT_FRAMES, DATE)
TOKENS_REFERENCE = Side("tokens/kafka-tool@kafka", KAFKA, tokens_kafka_tool, ACL_PAIR)

SCENARIOS = [
    Scenario("acls.sasl-principals",
             "ACLs for User:alice and User:bob (SCRAM-SHA-256 logins on a SASL_PLAINTEXT "
             "listener), prefixed, group and host-restricted, enforced on a Java client",
             Side("acls/sasl-principals@kafka", KAFKA, principals, ACL_PAIR),
             Side("acls/sasl-principals@moldau", MOLDAU, principals, ACL_PAIR),
             (STDOUT_FRAMES, sort_acl_blocks)),
    Scenario("tokens.kafka-tool",
             "Kafka's DelegationTokenCommand over SCRAM logins: create, describe, renew, "
             "expire, errors",
             TOKENS_REFERENCE,
             Side("tokens/kafka-tool@moldau", MOLDAU, tokens_kafka_tool, ACL_PAIR),
             TOKEN_RULES, fast=False),  # about 11 s: make test has acls.sasl-principals
    Scenario("tokens.moldau-tool",
             "Moldau's kafka-delegation-tokens.sh against Moldau vs DelegationTokenCommand "
             "against Kafka",
             TOKENS_REFERENCE,
             Side("tokens/moldau-tool@moldau", MOLDAU, tokens_moldau_tool, ACL_PAIR),
             TOKEN_RULES, fast=False),
]
