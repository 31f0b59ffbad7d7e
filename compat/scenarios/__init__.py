"""Every differential scenario, in the order `make compat` runs them (a scenario that
reads another's data comes after it)."""

from __future__ import annotations

from compat.lab import ACL_PAIR, TRIO_PAIR
from compat.scenarios import (
    acls,
    acls_logins,
    acls_sasl,
    acls_zookeeper,
    control_plane,
    dump_log,
    groups,
    java_admin,
    java_client,
    java_groups,
    java_txn,
    mixed_cluster,
    tools_cluster,
    tools_configs,
    tools_console,
    tools_offsets,
    tools_perf,
    tools_reassign,
    tools_zk_security,
    topics,
)
from compat.scenarios.base import Scenario

ALL: list[Scenario] = [*topics.SCENARIOS, *java_client.SCENARIOS, *groups.SCENARIOS,
                       *dump_log.SCENARIOS, *acls.SCENARIOS, *acls_zookeeper.SCENARIOS]
# Kafka's other tools against both brokers, and Moldau's kafka-*.sh beside them.
ALL += [*tools_reassign.SCENARIOS, *tools_offsets.SCENARIOS, *tools_configs.SCENARIOS,
        *tools_console.SCENARIOS, *tools_perf.SCENARIOS]
# Kafka's Java consumer in groups, its AdminClient and its transactional producer.
ALL += [*java_groups.SCENARIOS, *java_admin.SCENARIOS, *java_txn.SCENARIOS]
# Named principals over SASL (SCRAM) on the ACL pair, their delegation tokens, and
# ZkSecurityMigrator on a SASL ZooKeeper of its own.
ALL += [*acls_sasl.SCENARIOS, *tools_zk_security.SCENARIOS]
# The other SASL mechanisms and TLS client certificates on the ACL pair.
ALL += [*acls_logins.SCENARIOS]
# A Kafka and a Moldau broker in one cluster (slow: make compat only).
ALL += [*mixed_cluster.SCENARIOS]
# control.plane.listener.name on two brokers of each kind (make compat only).
ALL += [*control_plane.SCENARIOS]
# Kafka's tools against three brokers of each kind (the lab's trio; make compat only).
ALL += [*tools_cluster.SCENARIOS]


def by_name() -> dict[str, Scenario]:
    return {scenario.name: scenario for scenario in ALL}


def select(names: list[str] | None = None, fast_only: bool = False) -> list[Scenario]:
    """The scenarios named (all when none), with the ones they require, in run order."""
    index = by_name()
    unknown = [name for name in names or [] if name not in index]
    if unknown:
        raise KeyError(f"no scenario {', '.join(unknown)} (there are: {', '.join(index)})")
    wanted = set(names) if names else {s.name for s in ALL if s.fast or not fast_only}
    pending = list(wanted)
    while pending:
        for required in index[pending.pop()].requires:
            if required not in wanted:
                wanted.add(required)
                pending.append(required)
    return [s for s in ALL if s.name in wanted]


def need_acl_pair(chosen: list[Scenario]) -> bool:
    """Whether the lab must start the ACL scenarios' own pair of brokers for these."""
    return any(ACL_PAIR in scenario.pairs for scenario in chosen)


def need_trio(chosen: list[Scenario]) -> bool:
    """Whether the lab must start its three brokers of each kind for these."""
    return any(TRIO_PAIR in scenario.pairs for scenario in chosen)
