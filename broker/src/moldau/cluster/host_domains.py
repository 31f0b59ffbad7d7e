"""The host as a failure domain (`moldau.broker.host`, a Moldau extension): which host
each broker is on, from the registrations in /brokers/ids, and the partitions of an
assignment that have two replicas on one host.

Placement (assignment.py) avoids that whenever there are enough hosts. An explicit
assignment that does it is accepted, as Kafka accepts any explicit assignment, and the
admin path logs a warning naming the partition and the host; so does a placement whose
replication factor is larger than the number of hosts (Kafka would create the topic: it
counts brokers, not servers)."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence

from .zk_broker_znode import BrokerRegistration

HOST_KEY = "moldau.broker.host"


def hosts_of(registrations: Iterable[BrokerRegistration]) -> dict[int, str]:
    """Broker id -> host, for the brokers that registered one."""
    return {r.id: r.moldau_host for r in registrations if r.moldau_host is not None}


def shared_hosts(assignment: Mapping[int, Sequence[int]],
                 hosts: Mapping[int, str]) -> dict[int, dict[str, list[int]]]:
    """Partition -> {host: its brokers} for every host holding more than one replica of
    the partition. Brokers without a host are hosts of their own and never count."""
    found: dict[int, dict[str, list[int]]] = {}
    for partition, replicas in assignment.items():
        by_host: dict[str, list[int]] = {}
        for broker in replicas:
            host = hosts.get(broker)
            if host is not None:
                by_host.setdefault(host, []).append(broker)
        crowded = {h: b for h, b in by_host.items() if len(b) > 1}
        if crowded:
            found[partition] = crowded
    return found


def warn_explicit(log: logging.Logger, topic: str, assignment: Mapping[int, Sequence[int]],
                  hosts: Mapping[int, str]) -> None:
    """One warning per partition and host of an operator's assignment that puts two
    replicas on one server."""
    for partition, crowded in sorted(shared_hosts(assignment, hosts).items()):
        for host, brokers in crowded.items():
            log.warning("The assignment puts replicas %s of %s-%d on one host, %s (%s): "
                        "losing that server loses all of them",
                        ",".join(map(str, brokers)), topic, partition, host, HOST_KEY)


def warn_placed(log: logging.Logger, topic: str, assignment: Mapping[int, Sequence[int]],
                hosts: Mapping[int, str], brokers: Sequence[int]) -> None:
    """One warning for a placement that had to share hosts: the replication factor is
    larger than the number of hosts of the brokers it could use."""
    crowded = shared_hosts(assignment, hosts)
    if not crowded:
        return
    factor = max(len(r) for r in assignment.values())
    host_count = len({hosts.get(b, f"broker {b}") for b in brokers})
    log.warning("Replication factor %d of %s is larger than the %d hosts (%s) of its "
                "brokers: %d of its partitions have more than one replica on one host",
                factor, topic, host_count, HOST_KEY, len(crowded))
