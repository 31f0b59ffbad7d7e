"""The ACL scenarios' own pair of brokers: Kafka's AclAuthorizer with nobody a super user
and `allow.everyone.if.no.acl.found=false`, so the lab's clients (User:ANONYMOUS on
PLAINTEXT) may do only what ACLs grant them.

Before the pair starts, Kafka's AclCommand writes the grants it cannot start without into
both chroots, through ZooKeeper: ClusterAction on the cluster (Kafka's controller sends
its own broker LeaderAndIsr and UpdateMetadata over the listener, as that principal) and
Create on the cluster (the scenarios create their topics). Every topic and group is
denied until a scenario grants it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from compat import batch

ACL_COMMAND = "kafka.admin.AclCommand"
PRINCIPAL = "User:ANONYMOUS"
FIRST_GRANTS = ("--add", "--cluster", "--allow-principal", PRINCIPAL,
                "--operation", "ClusterAction", "--operation", "Create")


class SeedError(RuntimeError):
    """Kafka's AclCommand could not write the first grants."""


def properties(shared: Mapping[str, str]) -> dict[str, str]:
    """The shared pair's settings without its super user, and no ACL means no access."""
    props = {key: value for key, value in shared.items() if key != "super.users"}
    props["allow.everyone.if.no.acl.found"] = "false"
    return props


def zookeeper_args(zookeeper_connect: str) -> list[str]:
    """AclCommand's deprecated path straight into a chroot."""
    return ["--authorizer-properties", f"zookeeper.connect={zookeeper_connect}"]


def seed(chroots: Sequence[str]) -> None:
    """The first grants into each chroot (`host:port/chroot`), in one JVM."""
    runs = batch.run_batch([(ACL_COMMAND, [*zookeeper_args(chroot), *FIRST_GRANTS])
                            for chroot in chroots], timeout=120)
    for chroot, run in zip(chroots, runs, strict=True):
        if run.exit_code != 0:
            raise SeedError(f"AclCommand could not write the first ACLs into {chroot} "
                            f"(exit {run.exit_code}):\n{run.stdout}\n{run.stderr}")
