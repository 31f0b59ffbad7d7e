"""The local development cluster: a ZooKeeper ensemble and brokers as processes on
127.0.0.1, under one directory, so `up`, `status` and `down` can find them again.

Layout of DIR: `zookeeper/` (the ensemble, see ZooKeeperEnsemble), `broker-<id>/` per
broker (server.properties, data/, logs/, broker.pid) and `cluster.json` (what `up`
started). Brokers listen on 9092, 9093, ... by default.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from moldau.cluster.zk_ensemble import ZooKeeperEnsemble

from .brokers import BrokerProcess

STATE_FILE = "cluster.json"
CHROOT = "/moldau"
FIRST_BROKER_PORT = 9092


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

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(b.bootstrap for b in self.brokers)

    @classmethod
    def create(cls, directory: str | os.PathLike[str], brokers: int = 1, zookeepers: int = 1,
               first_port: int = FIRST_BROKER_PORT,
               properties: dict[str, str] | None = None) -> DevCluster:
        root = Path(directory).absolute()
        if (root / STATE_FILE).exists():
            return cls.load(root)
        root.mkdir(parents=True, exist_ok=True)
        ensemble = ZooKeeperEnsemble(root / "zookeeper", size=zookeepers)
        connect = ensemble.connect_string + CHROOT
        shared = {**internal_topic_properties(brokers), **(properties or {})}
        processes = [
            BrokerProcess(str(root / f"broker-{i}"), i, connect, port=first_port + i - 1,
                          properties=dict(shared), die_with_parent=False)
            for i in range(1, brokers + 1)
        ]
        cluster = cls(root, ensemble, processes)
        state = {"brokers": [{"id": b.broker_id, "port": b.port} for b in processes],
                 "zookeeper_connect": connect}
        (root / STATE_FILE).write_text(json.dumps(state, indent=2) + "\n")
        return cluster

    @classmethod
    def load(cls, directory: str | os.PathLike[str]) -> DevCluster:
        root = Path(directory).absolute()
        try:
            state = json.loads((root / STATE_FILE).read_text())
        except FileNotFoundError:
            raise FileNotFoundError(f"no development cluster in {root} (run "
                                    "`moldau dev-cluster up` first)") from None
        ensemble = ZooKeeperEnsemble.load(root / "zookeeper")
        processes = [BrokerProcess(str(root / f"broker-{b['id']}"), b["id"],
                                   state["zookeeper_connect"], port=b["port"],
                                   die_with_parent=False)
                     for b in state["brokers"]]
        return cls(root, ensemble, processes)

    def up(self, timeout: float = 60.0) -> None:
        """Start whatever is not running and wait until everything is healthy."""
        if not all(self.zookeeper.running(i) for i in range(self.zookeeper.size)):
            self.zookeeper.start(timeout=timeout)
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

    def down(self) -> None:
        """Stop the brokers cleanly first (they deregister from ZooKeeper), then ZooKeeper."""
        for broker in self.brokers:
            broker.stop()
        self.zookeeper.stop()
