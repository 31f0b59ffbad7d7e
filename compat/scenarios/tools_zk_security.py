"""Kafka's ZkSecurityMigrator (zookeeper-security-migration.sh) and Moldau's, compared by
the znode ACLs they leave.

Each column starts a ZooKeeper node of its own with SASL DIGEST-MD5 (optional, so the
tree can be written anonymously first), writes the znodes a ZooKeeper-mode cluster has
under a chroot (brokers, topics, configs with a SCRAM user, ACLs and their change
notifications, a delegation token, a consumer group of the old consumer), then runs the
tool with a JAAS `Client` login: `--zookeeper.acl=secure`, every znode's ACL read back
(as that login: creator-only znodes hide their ACL from others), `--zookeeper.acl=
unsecure`, read back again. Then the tool's errors: `secure` without a login, a bad
`--zookeeper.acl` value, none. About 10 s a column (a ZooKeeper and five JVMs): `fast=False`.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from pathlib import Path

from kazoo.client import KazooClient

from compat import launcher
from compat.launcher import ToolRun
from compat.normalise import Normaliser, substitute
from compat.scenarios.base import KAFKA, MOLDAU, Context, Scenario, Side
from compat.scenarios.tool_steps import SCRATCH_RULE
from compat.transcript import Transcript
from moldau.cluster.zk_ensemble import ZkServerSasl, ZooKeeperEnsemble
from moldau.security.sasl.jaas import DIGEST_LOGIN_MODULE

MIGRATOR = "kafka.admin.ZkSecurityMigrator"
SCRIPT = "zookeeper-security-migration.sh"
LABEL = "zookeeper-security-migration"
USER, PASSWORD = "kafka", "kafka-zk-secret"
CHROOT = "/migrated"
JAAS_PROPERTY = "java.security.auth.login.config"
# What a ZooKeeper-mode cluster leaves under its chroot (data as the brokers write it
# matters not: the tool sets ACLs only).
ZNODES = (
    "/brokers/ids/1", "/brokers/topics/orders/partitions/0/state", "/brokers/seqid",
    "/config/topics/orders", "/config/users/alice", "/config/clients",
    "/config/changes/config_change_0000000000", "/admin/delete_topics", "/cluster/id",
    "/controller_epoch", "/isr_change_notification", "/latest_producer_id_block",
    "/log_dir_event_notification", "/feature", "/kafka-acl/Topic/orders",
    "/kafka-acl-changes/acl_changes_0000000000", "/kafka-acl-extended/prefixed/Group/app-",
    "/kafka-acl-extended-changes/acl_changes_0000000000",
    "/delegation_token/tokens/token-1", "/consumers/legacy/offsets/orders/0",
)


@contextlib.contextmanager
def sasl_zookeeper(directory: Path) -> Iterator[ZooKeeperEnsemble]:
    ensemble = ZooKeeperEnsemble(directory, size=1, tick_time=500, die_with_parent=True,
                                 sasl=ZkServerSasl({USER: PASSWORD}, required=False))
    ensemble.start(timeout=60)
    try:
        yield ensemble
    finally:
        ensemble.stop()


def _kazoo(hosts: str, login: bool) -> KazooClient:
    sasl = {"mechanism": "DIGEST-MD5", "username": USER, "password": PASSWORD}
    client = KazooClient(hosts=hosts, sasl_options=sasl if login else None)
    client.start(timeout=20)
    return client


def write_tree(hosts: str) -> None:
    client = _kazoo(hosts, login=False)
    try:
        for path in ZNODES:
            client.ensure_path(CHROOT + path)
    finally:
        client.stop()
        client.close()


def read_acls(hosts: str) -> list[str]:
    """`acl <path> <scheme>:<id>:<perms>...` for every znode under the chroot, in order."""
    client = _kazoo(hosts, login=True)
    lines = []
    try:
        pending = [CHROOT]
        while pending:
            path = pending.pop(0)
            acls, _ = client.get_acls(path)
            entries = sorted(f"{a.id.scheme}:{a.id.id}:{a.perms}" for a in acls)
            lines.append(f"acl {path[len(CHROOT):] or '/'} {' '.join(entries)}")
            pending.extend(sorted(f"{path.rstrip('/')}/{child}"
                                  for child in client.get_children(path)))
    finally:
        client.stop()
        client.close()
    return lines


def jaas_file(scratch: Path) -> Path:
    path = scratch / "zk-client-jaas.conf"
    path.write_text(f'Client {{\n  {DIGEST_LOGIN_MODULE} required\n  username="{USER}"\n'
                    f'  password="{PASSWORD}";\n}};\n')
    return path


def _run_kafka(args: list[str], jaas: Path | None) -> ToolRun:
    options = [f"-D{JAAS_PROPERTY}={jaas}"] if jaas is not None else []
    return launcher.run_command(launcher.java_command(MIGRATOR, args, jvm_options=options),
                                timeout=120)


def _run_moldau(args: list[str], jaas: Path | None) -> ToolRun:
    script = Path(sys.executable).parent / SCRIPT
    env = {"KAFKA_OPTS": f"-D{JAAS_PROPERTY}={jaas}" if jaas is not None else ""}
    return launcher.run_command([str(script), *args], timeout=120, env=env)


def migrated(ctx: Context) -> Transcript:
    moldau = ctx.broker == MOLDAU
    transcript = Transcript()
    jaas = jaas_file(ctx.scratch)
    with sasl_zookeeper(ctx.scratch / "zookeeper") as zookeeper:
        hosts = zookeeper.connect_string
        connect = f"--zookeeper.connect={hosts}{CHROOT}"
        write_tree(hosts)
        for mode in ("secure", "unsecure"):
            args = [f"--zookeeper.acl={mode}", connect]
            run = (_run_moldau if moldau else _run_kafka)(args, jaas)
            transcript.command(LABEL, args, run)
            transcript.add(*read_acls(hosts))
        # no login; then, logged in, a bad mode and no mode (each tool checks the login first)
        errors = [(["--zookeeper.acl=secure", connect], None),
                  (["--zookeeper.acl=sideways", connect], jaas), ([connect], jaas)]
        for args, login in errors:
            run = (_run_moldau if moldau else _run_kafka)(args, login)
            transcript.command(LABEL, args, run)
    return transcript


# The column's own ZooKeeper (its port is normalised already) and JAAS file.
RULES: tuple[Normaliser, ...] = (SCRATCH_RULE, substitute(r"\S*/zk-client-jaas\.conf",
                                                           "<jaas>"))

SCENARIOS = [
    Scenario("zk-security.moldau-tool",
             "Moldau's zookeeper-security-migration.sh vs Kafka's ZkSecurityMigrator: the "
             "znode ACLs left by secure and unsecure, and the errors",
             Side("zk-security/kafka-tool@kafka", KAFKA, migrated),
             Side("zk-security/moldau-tool@moldau", MOLDAU, migrated), RULES, fast=False),
]
