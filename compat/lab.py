"""The reference cluster: one ZooKeeper node, a real Apache Kafka 3.9.1 broker and a Moldau
broker of the same shape, each under its own chroot, on 127.0.0.1 free ports.

ZooKeeper is the project's own `ZooKeeperEnsemble` (Debian's zookeeper, as in the tests),
the Moldau broker the tests' `BrokerProcess`; only the Kafka broker is new here. Both
brokers get the same server.properties (broker id 1, one partition, RF 1 for the internal
topics, no initial rebalance delay), so what differs between them is the broker alone.

    with Lab.started(directory) as lab:
        lab.kafka.bootstrap, lab.moldau.bootstrap
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from compat import launcher
from moldau import properties as java_properties
from moldau.client.blocking import BlockingConnection
from moldau.cluster.zk_ensemble import ZooKeeperEnsemble
from moldau.devcluster.brokers import BrokerProcess, free_port
from moldau.protocol.generated.api import ApiKey
from moldau.protocol.generated.metadata_request import MetadataRequest

BROKER_ID = 1
PR_SET_PDEATHSIG = 1  # prctl(2)
ZK_TICK_MS = 500  # as the tests' ensembles: sessions of 1 s to 10 s
# The settings both brokers share: what makes them "the same shape".
SHARED_PROPERTIES: Mapping[str, str] = {
    "num.partitions": "1",
    "default.replication.factor": "1",
    "offsets.topic.replication.factor": "1",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
    "group.initial.rebalance.delay.ms": "0",
    "auto.create.topics.enable": "true",
    "delete.topic.enable": "true",
}


def lists_itself(port: int, broker_id: int) -> bool:
    """Ready: a Metadata request on the listener names this broker, i.e. it registered
    in ZooKeeper and its metadata cache knows itself (BrokerProcess's health rule)."""
    try:
        with BlockingConnection("127.0.0.1", port, timeout=2) as conn:
            response = conn.request(ApiKey.METADATA, 1, MetadataRequest(topics=[]))
    except (OSError, ConnectionError):
        return False
    return any(b.node_id == broker_id for b in response.brokers)


def _die_with_parent() -> None:  # runs in the child between fork and exec
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


@dataclass
class KafkaBroker:
    """An Apache Kafka broker in ZooKeeper mode, started with the lab's launcher."""

    directory: Path
    zookeeper_connect: str  # with the chroot
    broker_id: int = BROKER_ID
    properties: Mapping[str, str] = field(default_factory=dict)
    port: int = 0
    process: subprocess.Popen[bytes] | None = None

    @property
    def data_dir(self) -> Path:
        return self.directory / "data"

    @property
    def log_dir(self) -> Path:
        return self.directory / "logs"

    @property
    def config_path(self) -> Path:
        return self.directory / "server.properties"

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def write_config(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        if self.port == 0:
            self.port = free_port()
        props = {
            "broker.id": str(self.broker_id),
            "listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "log.dirs": str(self.data_dir),
            "zookeeper.connect": self.zookeeper_connect,
            **self.properties,
        }
        self.config_path.write_text(
            java_properties.dumps(props, comments="written by Moldau's reference lab"),
            encoding="latin-1")

    def start(self) -> None:
        """Start the JVM and return at once (`wait_ready` waits)."""
        self.write_config()
        self.log_dir.mkdir(parents=True, exist_ok=True)
        command = launcher.java_command(launcher.KAFKA_MAIN, [str(self.config_path)],
                                        broker=True, log_dir=self.log_dir)
        with open(self.log_dir / "stdout.log", "ab") as out:
            self.process = subprocess.Popen(
                command, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                start_new_session=True, preexec_fn=_die_with_parent)

    def wait_ready(self, timeout: float = 90.0) -> None:
        _wait_until(lambda: lists_itself(self.port, self.broker_id), timeout,
                    self._exit_code, f"Kafka broker {self.broker_id}", self.log_dir)

    def _exit_code(self) -> int | None:
        return self.process.poll() if self.process is not None else None

    def stop(self, timeout: float = 60.0) -> int | None:
        """SIGTERM (Kafka's controlled shutdown), SIGKILL after the timeout."""
        if self.process is None or self.process.poll() is not None:
            return self._exit_code()
        with contextlib.suppress(ProcessLookupError):
            self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            return self.process.wait()


def _wait_until(ready: Callable[[], bool], timeout: float,
                exit_code: Callable[[], int | None], name: str, log_dir: Path) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        code = exit_code()
        if code is not None:
            raise RuntimeError(f"{name} exited with code {code}; see {log_dir}\n"
                               + _tail(log_dir / "stdout.log"))
        if ready():
            return
        time.sleep(0.2)
    raise TimeoutError(f"{name} not ready after {timeout:.0f} s; see {log_dir}\n"
                       + _tail(log_dir / "stdout.log"))


def _tail(path: Path, lines: int = 30) -> str:
    try:
        return "".join(path.read_text(errors="replace").splitlines(keepends=True)[-lines:])
    except OSError:
        return ""


@dataclass
class Lab:
    """The running reference cluster: `kafka` and `moldau` share `zookeeper`."""

    directory: Path
    zookeeper: ZooKeeperEnsemble
    kafka: KafkaBroker
    moldau: BrokerProcess

    @classmethod
    def start(cls, directory: str | os.PathLike[str],
              properties: Mapping[str, str] | None = None) -> Lab:
        """ZooKeeper first, then both brokers side by side (Kafka's JVM starts while
        Moldau's broker does), each under a chroot of its own."""
        base = Path(directory).absolute()
        launcher.kafka_classpath()  # fail before starting anything when the jars are missing
        props = {**SHARED_PROPERTIES, **(properties or {})}
        zookeeper = ZooKeeperEnsemble(base / "zookeeper", size=1, tick_time=ZK_TICK_MS,
                                      die_with_parent=True)
        zookeeper.start(timeout=60)
        run = uuid.uuid4().hex[:8]
        kafka = KafkaBroker(base / "kafka", f"{zookeeper.connect_string}/kafka-{run}",
                            properties=props)
        moldau = BrokerProcess(str(base / "moldau"), BROKER_ID,
                               f"{zookeeper.connect_string}/moldau-{run}", properties=props)
        try:
            kafka.start()
            moldau.start(wait=60)
            kafka.wait_ready()
        except BaseException:
            kafka.stop()
            moldau.stop()
            zookeeper.stop()
            raise
        return cls(base, zookeeper, kafka, moldau)

    @classmethod
    @contextlib.contextmanager
    def started(cls, directory: str | os.PathLike[str],
                properties: Mapping[str, str] | None = None) -> Iterator[Lab]:
        lab = cls.start(directory, properties)
        try:
            yield lab
        finally:
            lab.stop()

    def stop(self) -> dict[str, int | None]:
        """Both brokers cleanly (controlled shutdown), then ZooKeeper; returns the
        brokers' exit codes (0 after a clean shutdown)."""
        try:
            return {"kafka": self.kafka.stop(), "moldau": self.moldau.stop()}
        finally:
            self.zookeeper.stop()
