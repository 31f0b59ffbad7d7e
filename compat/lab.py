"""The reference cluster: one ZooKeeper node, a real Apache Kafka 3.9.1 broker and a Moldau
broker of the same shape, each under its own chroot, on 127.0.0.1 free ports.

ZooKeeper is the project's own `ZooKeeperEnsemble` (Debian's zookeeper, as in the tests),
the Moldau broker the tests' `BrokerProcess`; only the Kafka broker is new here. Both
brokers get the same server.properties (broker id 1, one partition, RF 1 for the internal
topics, no initial rebalance delay, Kafka's AclAuthorizer with the lab's clients, which
PLAINTEXT makes User:ANONYMOUS, as super user), so what differs between them is the
broker alone.

The ACL scenarios also get a second pair (`acl_pair`) on the same ZooKeeper where nobody
is a super user: User:ANONYMOUS may do only what ACLs grant it (compat/acl_setup.py), and
named principals log in over SASL or with TLS client certificates (compat/acl_tls.py).
The cluster scenarios get a `trio`: three Kafka brokers and three Moldau brokers (ids
1 to 3), each kind a cluster under a chroot of its own.

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
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from compat import acl_kerberos, acl_oauth, acl_setup, acl_tls, launcher
from moldau import properties as java_properties
from moldau.client.blocking import BlockingConnection
from moldau.cluster.zk_ensemble import ZooKeeperEnsemble
from moldau.devcluster.brokers import BrokerProcess, free_port
from moldau.protocol.generated.api import ApiKey
from moldau.protocol.generated.metadata_request import MetadataRequest

BROKER_ID = 1
SHARED_PAIR = "shared"
ACL_PAIR = "acl"
TRIO_PAIR = "trio"  # the first broker of each kind's three-broker cluster
TRIO_IDS = (1, 2, 3)
PR_SET_PDEATHSIG = 1  # prctl(2)
ZK_TICK_MS = 500  # as the tests' ensembles: sessions of 1 s to 10 s
ACL_AUTHORIZER = "kafka.security.authorizer.AclAuthorizer"
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
    # Kafka's authorizer on both, the lab's own connections allowed everything: the
    # ACL scenarios add and list ACLs here, the others never notice.
    "authorizer.class.name": ACL_AUTHORIZER,
    "super.users": "User:ANONYMOUS",
}


# The trio's own: leaders move only when a scenario moves them (Kafka's controller checks
# the balance 5 s after it starts, then every 300 s, whenever the scenario happens to be).
TRIO_PROPERTIES: Mapping[str, str] = {"auto.leader.rebalance.enable": "false"}


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
    jvm_options: Sequence[str] = ()  # launcher.jmx_options(port) turns JMX on

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
                                        broker=True, log_dir=self.log_dir,
                                        jvm_options=self.jvm_options)
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
class BrokerPair:
    """A Kafka broker and a Moldau broker of the same shape, each under its own chroot."""

    kafka: KafkaBroker
    moldau: BrokerProcess

    @classmethod
    def create(cls, base: Path, zookeeper: str, name: str,
               properties: Mapping[str, str]) -> BrokerPair:
        """Brokers in `base/<name>kafka` and `base/<name>moldau`, on chroots named alike
        and unique to this run (several labs may share a ZooKeeper)."""
        run = uuid.uuid4().hex[:8]
        return cls(KafkaBroker(base / f"{name}kafka", f"{zookeeper}/{name}kafka-{run}",
                               properties=properties),
                   BrokerProcess(str(base / f"{name}moldau"), BROKER_ID,
                                 f"{zookeeper}/{name}moldau-{run}", properties=properties))

    def stop(self) -> dict[str, int | None]:
        """Both at once (Kafka's controlled shutdown takes seconds); their exit codes."""
        with ThreadPoolExecutor(2) as pool:
            kafka, moldau = pool.submit(self.kafka.stop), pool.submit(self.moldau.stop)
            return {"kafka": kafka.result(), "moldau": moldau.result()}


# Lives as long as the process (an idle pool thread never ends): see Trio.start_again.
_STARTER = ThreadPoolExecutor(1, thread_name_prefix="lab-starter")


@dataclass
class Trio:
    """Three Kafka 3.9.1 brokers and three Moldau brokers (ids TRIO_IDS): each kind is a
    cluster of its own under a chroot of its own, with the same settings."""

    kafka: list[KafkaBroker]
    moldau: list[BrokerProcess]

    @classmethod
    def create(cls, base: Path, zookeeper: str, properties: Mapping[str, str]) -> Trio:
        run = uuid.uuid4().hex[:8]
        props = {**properties, **TRIO_PROPERTIES}
        return cls([KafkaBroker(base / f"trio-kafka-{i}", f"{zookeeper}/trio-kafka-{run}",
                                broker_id=i, properties=props) for i in TRIO_IDS],
                   [BrokerProcess(str(base / f"trio-moldau-{i}"), i,
                                  f"{zookeeper}/trio-moldau-{run}", properties=props)
                    for i in TRIO_IDS])

    def brokers(self, kind: str) -> list[KafkaBroker] | list[BrokerProcess]:
        """The three brokers of one kind ("kafka" or "moldau"), by id."""
        return self.kafka if kind == "kafka" else self.moldau

    def start(self) -> None:
        """Every JVM and broker process, without waiting (`wait_ready` waits)."""
        for kafka in self.kafka:
            kafka.start()
        for moldau in self.moldau:
            moldau.start(wait=None)

    def wait_ready(self) -> None:
        for moldau in self.moldau:
            moldau.wait_healthy(60)
        for kafka in self.kafka:
            kafka.wait_ready()

    @staticmethod
    def start_again(broker: KafkaBroker | BrokerProcess) -> None:
        """Start a broker a scenario stopped, without waiting. Its process is forked from
        the lab's own starter thread: PR_SET_PDEATHSIG kills a child when the *thread*
        that forked it ends, and a scenario's column runs in a worker thread that ends
        with the scenario."""
        start = broker.start if isinstance(broker, KafkaBroker) else (
            lambda: broker.start(wait=None))
        _STARTER.submit(start).result()

    def stop(self) -> dict[str, int | None]:
        """All six at once; their exit codes as `kafka-1` ... `moldau-3`."""
        brokers: list[KafkaBroker | BrokerProcess] = [*self.kafka, *self.moldau]
        with ThreadPoolExecutor(len(brokers)) as pool:
            codes = [pool.submit(broker.stop) for broker in brokers]
            return {f"{'kafka' if isinstance(b, KafkaBroker) else 'moldau'}-{b.broker_id}":
                    code.result() for b, code in zip(brokers, codes, strict=True)}


class Stoppable(Protocol):
    def stop(self) -> None: ...


def _acl_pair(base: Path, zookeeper: str,
              props: Mapping[str, str]) -> tuple[BrokerPair, Stoppable | None]:
    """The ACL scenarios' pair, not started: SASL and SSL listeners beside PLAINTEXT, and
    GSSAPI with a KDC of the lab's own (started here) when Kerberos is installed."""
    pair = BrokerPair.create(base, zookeeper, "acl-", acl_setup.properties(props))
    pki = acl_tls.LabPki.create(base / acl_tls.PKI_DIR)
    oauth = acl_oauth.LabOAuth.create(base / acl_oauth.OAUTH_DIR)
    for broker in (pair.kafka, pair.moldau):
        acl_setup.add_sasl_listener(broker)  # named principals, over SASL
        acl_tls.add_tls_listeners(broker, pki, oauth)  # client certificates, signed tokens
    if not acl_kerberos.available():
        return pair, None
    kerberos, kdc = acl_kerberos.LabKerberos.start(base / acl_kerberos.KDC_DIR)
    for broker in (pair.kafka, pair.moldau):
        kerberos.configure(broker)
    pair.kafka.jvm_options = [*pair.kafka.jvm_options, *kerberos.jvm_options]
    pair.moldau.env = {**pair.moldau.env, **kerberos.environment()}
    return pair, kdc


@dataclass
class Lab:
    """The running reference cluster: `kafka` and `moldau` share `zookeeper`; the ACL
    scenarios' `acl_pair`, when started, too."""

    directory: Path
    zookeeper: ZooKeeperEnsemble
    kafka: KafkaBroker
    moldau: BrokerProcess
    acl_pair: BrokerPair | None = None
    kdc: Stoppable | None = None  # the ACL pair's Kerberos realm, when it has one
    trio: Trio | None = None  # the cluster scenarios' three brokers of each kind

    @classmethod
    def start(cls, directory: str | os.PathLike[str],
              properties: Mapping[str, str] | None = None, with_acl_pair: bool = False,
              with_trio: bool = False) -> Lab:
        """ZooKeeper first, then the brokers side by side (Kafka's JVMs start while
        Moldau's brokers do), each under a chroot of its own; the ACL pair's chroots get
        their first ACLs before its brokers start. `with_trio` adds the two three-broker
        clusters."""
        base = Path(directory).absolute()
        launcher.kafka_classpath()  # fail before starting anything when the jars are missing
        props = {**SHARED_PROPERTIES, **(properties or {})}
        zookeeper = ZooKeeperEnsemble(base / "zookeeper", size=1, tick_time=ZK_TICK_MS,
                                      die_with_parent=True)
        zookeeper.start(timeout=60)
        shared = BrokerPair.create(base, zookeeper.connect_string, "", props)
        pairs = [shared]
        kdc: Stoppable | None = None
        if with_acl_pair:
            try:
                acl_pair, kdc = _acl_pair(base, zookeeper.connect_string, props)
            except BaseException:
                zookeeper.stop()
                raise
            pairs.append(acl_pair)
        trio = Trio.create(base, zookeeper.connect_string, props) if with_trio else None
        try:
            shared.kafka.start()
            if trio is not None:
                trio.start()
            if with_acl_pair:  # Kafka's AclCommand in a JVM, while the first Kafka starts
                acl_setup.seed([pairs[1].kafka.zookeeper_connect,
                               pairs[1].moldau.zookeeper_connect])
                pairs[1].kafka.start()
            for pair in pairs:
                pair.moldau.start(wait=None)
            for pair in pairs:
                pair.moldau.wait_healthy(60)
                pair.kafka.wait_ready()
            if trio is not None:
                trio.wait_ready()
        except BaseException:
            for pair in pairs:
                pair.stop()
            if trio is not None:
                trio.stop()
            zookeeper.stop()
            if kdc is not None:
                kdc.stop()
            raise
        return cls(base, zookeeper, shared.kafka, shared.moldau,
                   pairs[1] if with_acl_pair else None, kdc, trio)

    @classmethod
    @contextlib.contextmanager
    def started(cls, directory: str | os.PathLike[str],
                properties: Mapping[str, str] | None = None,
                with_acl_pair: bool = False, with_trio: bool = False) -> Iterator[Lab]:
        lab = cls.start(directory, properties, with_acl_pair, with_trio)
        try:
            yield lab
        finally:
            lab.stop()

    def pair(self, name: str) -> BrokerPair:
        """The shared pair (SHARED_PAIR), the ACL scenarios' (ACL_PAIR), or the first
        broker of each trio (TRIO_PAIR; `trio` has the others)."""
        if name == SHARED_PAIR:
            return BrokerPair(self.kafka, self.moldau)
        if name == ACL_PAIR and self.acl_pair is not None:
            return self.acl_pair
        if name == TRIO_PAIR and self.trio is not None:
            return BrokerPair(self.trio.kafka[0], self.trio.moldau[0])
        raise LookupError(f"the lab has no {name} pair (Lab.start(with_acl_pair=True) "
                          "starts the ACL pair, with_trio=True the trio)")

    def stop(self) -> dict[str, int | None]:
        """Every broker cleanly (controlled shutdown), the pairs at once, then ZooKeeper;
        returns the brokers' exit codes (0 after a clean shutdown): `kafka`, `moldau`,
        `acl-kafka`, `acl-moldau` for the ACL pair, `trio-kafka-1` ... for the trio."""
        pairs: dict[str, BrokerPair | Trio] = {"": BrokerPair(self.kafka, self.moldau)}
        if self.acl_pair is not None:
            pairs["acl-"] = self.acl_pair
        if self.trio is not None:
            pairs["trio-"] = self.trio
        try:
            with ThreadPoolExecutor(len(pairs)) as pool:
                stopped = {prefix: pool.submit(pair.stop) for prefix, pair in pairs.items()}
                return {prefix + name: code for prefix, future in stopped.items()
                        for name, code in future.result().items()}
        finally:
            self.zookeeper.stop()
            if self.kdc is not None:
                self.kdc.stop()
