"""The local development cluster: a ZooKeeper ensemble and brokers as processes on
127.0.0.1, under one directory, so `up`, `status` and `down` can find them again.

Layout of DIR: `zookeeper/` (the ensemble, see ZooKeeperEnsemble), `broker-<id>/` per
broker (server.properties, data/, logs/, broker.pid) and `cluster.json` (what `up`
started). Brokers listen on 9092, 9093, ... by default.

With a SASL mechanism (`--sasl`), each broker also serves clients on a SASL_SSL listener
(9192, 9193, ... by default) and DIR holds the CA, the admin password and a
client.properties (see sasl.py and tls.py). The mechanism is part of cluster.json: it is
chosen once, when the cluster is created.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from moldau.cluster.zk_ensemble import ZooKeeperEnsemble

from .brokers import BrokerProcess
from .sasl import ADMIN_USER, SASL_LISTENER, DevSasl

STATE_FILE = "cluster.json"
CHROOT = "/moldau"
FIRST_BROKER_PORT = 9092
# The SASL_SSL listeners are numbered from here above the PLAINTEXT ones (9192, ...), so
# up to 100 brokers never collide.
SASL_PORT_OFFSET = 100


class DevClusterConfigError(ValueError):
    """What `up` was asked for contradicts the cluster that exists in the directory."""


def internal_topic_properties(brokers: int) -> dict[str, str]:
    """Kafka's replication of the offsets and transaction topics (3, min ISR 2) where the
    cluster has the brokers for it; otherwise on every broker, with a min ISR of one less
    (at least 1), so one broker alone still serves groups and transactions."""
    replicas = min(brokers, 3)
    return {"offsets.topic.replication.factor": str(replicas),
            "transaction.state.log.replication.factor": str(replicas),
            "transaction.state.log.min.isr": str(max(1, min(replicas - 1, 2)))}


@dataclass
class DevCluster:
    directory: Path
    zookeeper: ZooKeeperEnsemble
    brokers: list[BrokerProcess]
    sasl: DevSasl | None = None  # None: PLAINTEXT listeners only
    sasl_ports: dict[int, int] = field(default_factory=dict)  # broker id -> SASL_SSL port

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(b.bootstrap for b in self.brokers)

    @property
    def sasl_bootstrap_servers(self) -> str:
        """The SASL_SSL listeners ("" without SASL)."""
        return ",".join(f"127.0.0.1:{self.sasl_ports[b.broker_id]}" for b in self.brokers
                        if b.broker_id in self.sasl_ports)

    @classmethod
    def create(cls, directory: str | os.PathLike[str], brokers: int = 1, zookeepers: int = 1,
               first_port: int = FIRST_BROKER_PORT,
               properties: dict[str, str] | None = None, sasl: str | None = None,
               first_sasl_port: int | None = None, authorizer: bool = False) -> DevCluster:
        """A new cluster's layout and cluster.json (nothing starts), or the existing one.

        `sasl`: a `--sasl` choice (plain, scram-sha-256, scram-sha-512) or None. For an
        existing cluster None keeps whatever it has; another mechanism than its own raises
        DevClusterConfigError (changing it means a new cluster). `authorizer` (with `sasl`):
        Kafka's AclAuthorizer, admin the super user, the brokers talking over SASL_SSL;
        like the mechanism, chosen when the cluster is created."""
        root = Path(directory).absolute()
        if (root / STATE_FILE).exists():
            state = _read_state(root)
            _check_same_sasl(root, state.get("sasl"), sasl)
            if authorizer and not state.get("authorizer"):
                raise DevClusterConfigError(
                    f"the development cluster in {root} was created without --authorizer; "
                    f"run `moldau dev-cluster down` and remove {root} (or choose another "
                    "--dir) for a cluster that enforces ACLs")
            return cls.load(root)
        if authorizer and sasl is None:
            raise DevClusterConfigError("--authorizer needs --sasl: ACLs are granted to the "
                                        "users SASL authenticates")
        dev_sasl = DevSasl.from_choice(root, sasl, authorizer) if sasl is not None else None
        sasl_start = first_port + SASL_PORT_OFFSET if first_sasl_port is None \
            else first_sasl_port
        if dev_sasl is not None and _overlap(first_port, sasl_start, brokers):
            raise DevClusterConfigError(
                f"the SASL_SSL ports from {sasl_start} overlap the PLAINTEXT ports "
                f"{first_port}-{first_port + brokers - 1}: choose another --sasl-port")
        root.mkdir(parents=True, exist_ok=True)
        if dev_sasl is not None:
            dev_sasl.prepare()
        ensemble = ZooKeeperEnsemble(root / "zookeeper", size=zookeepers)
        connect = ensemble.connect_string + CHROOT
        shared = internal_topic_properties(brokers)
        processes: list[BrokerProcess] = []
        sasl_ports: dict[int, int] = {}
        for i in range(1, brokers + 1):
            port = first_port + i - 1
            own = dict(shared)
            if dev_sasl is not None:
                sasl_ports[i] = sasl_start + i - 1
                own |= dev_sasl.broker_properties(port, sasl_ports[i])
            own |= properties or {}
            processes.append(BrokerProcess(str(root / f"broker-{i}"), i, connect, port=port,
                                           properties=own, die_with_parent=False))
        cluster = cls(root, ensemble, processes, dev_sasl, sasl_ports)
        (root / STATE_FILE).write_text(json.dumps(cluster._state(), indent=2) + "\n")
        return cluster

    def _state(self) -> dict[str, object]:
        brokers: list[dict[str, int]] = []
        for b in self.brokers:
            entry = {"id": b.broker_id, "port": b.port}
            if b.broker_id in self.sasl_ports:
                entry["sasl_port"] = self.sasl_ports[b.broker_id]
            brokers.append(entry)
        state: dict[str, object] = {"brokers": brokers,
                                    "zookeeper_connect": self.zookeeper_connect}
        if self.sasl is not None:
            state["sasl"] = self.sasl.mechanism
            if self.sasl.authorizer:
                state["authorizer"] = True
        return state

    @property
    def zookeeper_connect(self) -> str:
        """The brokers' zookeeper.connect (with the chroot)."""
        return self.zookeeper.connect_string + CHROOT

    @classmethod
    def load(cls, directory: str | os.PathLike[str]) -> DevCluster:
        root = Path(directory).absolute()
        state = _read_state(root)
        ensemble = ZooKeeperEnsemble.load(root / "zookeeper")
        processes = [BrokerProcess(str(root / f"broker-{b['id']}"), b["id"],
                                   state["zookeeper_connect"], port=b["port"],
                                   die_with_parent=False)
                     for b in state["brokers"]]
        mechanism = state.get("sasl")
        dev_sasl = (DevSasl(root, mechanism, bool(state.get("authorizer")))
                    if mechanism is not None else None)
        sasl_ports = {b["id"]: b["sasl_port"] for b in state["brokers"] if "sasl_port" in b}
        return cls(root, ensemble, processes, dev_sasl, sasl_ports)

    def up(self, timeout: float = 60.0) -> None:
        """Start whatever is not running and wait until everything is healthy. With SASL,
        the admin user's SCRAM credential is in ZooKeeper before any broker starts, and
        client.properties is (re)written."""
        if not all(self.zookeeper.running(i) for i in range(self.zookeeper.size)):
            self.zookeeper.start(timeout=timeout)
        if self.sasl is not None:
            self.sasl.register_admin(self.zookeeper_connect)
            self.sasl.write_client_properties(self.sasl_bootstrap_servers)
        for broker in self.brokers:
            if not broker.running():
                broker.start(wait=None)
        for broker in self.brokers:
            broker.wait_healthy(timeout)

    def status(self) -> list[str]:
        lines = []
        for i in range(self.zookeeper.size):
            port = self.zookeeper.client_ports[i]
            if not self.zookeeper.running(i):
                state = "stopped"
            else:
                state = self.zookeeper.mode(i) or "running, not serving"
            lines.append(f"zookeeper {i + 1}  127.0.0.1:{port}  {state}")
        for broker in self.brokers:
            if not broker.running():
                state = "stopped"
            else:
                state = "healthy" if broker.healthy() else "running, not healthy"
            lines.append(f"broker {broker.broker_id}     {broker.bootstrap}  {state}  "
                         f"(logs: {broker.log_dir})")
        return lines

    def connection_lines(self) -> list[str]:
        """How clients reach the cluster: the bootstrap servers, and with SASL the
        SASL_SSL ones and the client.properties that logs in as the admin user."""
        lines = [f"bootstrap servers: {self.bootstrap_servers}"]
        if self.sasl is None:
            return lines
        properties = self.sasl.client_properties_path
        return [
            *lines,
            f"{SASL_LISTENER} bootstrap servers: {self.sasl_bootstrap_servers} "
            f"({self.sasl.mechanism}, user {ADMIN_USER})",
            f"client properties: {properties}",
            f"  e.g. kafka-topics.sh --bootstrap-server {self.sasl_bootstrap_servers} "
            f"--command-config {properties} --list",
            *([f"ACLs are enforced (AclAuthorizer); {ADMIN_USER} is the super user: grant "
               f"others with kafka-acls.sh --bootstrap-server {self.sasl_bootstrap_servers} "
               f"--command-config {properties} --add ..."] if self.sasl.authorizer else []),
        ]

    def down(self) -> None:
        """Stop the brokers cleanly first (they deregister from ZooKeeper), then ZooKeeper."""
        for broker in self.brokers:
            broker.stop()
        self.zookeeper.stop()


def _read_state(root: Path) -> dict[str, Any]:
    # Any: cluster.json is JSON this module wrote; its fields are read where they are used
    try:
        state: dict[str, Any] = json.loads((root / STATE_FILE).read_text())
    except FileNotFoundError:
        raise FileNotFoundError(f"no development cluster in {root} (run "
                                "`moldau dev-cluster up` first)") from None
    return state


def _check_same_sasl(root: Path, existing: str | None, wanted: str | None) -> None:
    """`up --sasl X` on an existing cluster must name the mechanism it was created with."""
    if wanted is None or (existing is not None and existing.lower() == wanted.lower()):
        return
    has = f"with --sasl {existing.lower()}" if existing is not None else "without --sasl"
    raise DevClusterConfigError(
        f"the development cluster in {root} was created {has}, not with --sasl "
        f"{wanted.lower()}; the mechanism cannot change: run `moldau dev-cluster down` "
        f"and remove {root} (or choose another --dir) for a cluster with --sasl "
        f"{wanted.lower()}")


def _overlap(first_port: int, first_sasl_port: int, brokers: int) -> bool:
    return abs(first_port - first_sasl_port) < brokers
