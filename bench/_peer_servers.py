"""The systems of the peer benchmarks, on 127.0.0.1 with free ports, and their driver.

- Moldau: one broker (and one ZooKeeper node) from the repository, as the tests start it.
- NATS JetStream 2.9 (Debian's nats-server): file storage in the run's directory.
- Redis 7.0 (Debian's redis-server): AOF with appendfsync everysec, no RDB snapshots.
- RabbitMQ 3.10 (Debian's rabbitmq-server) with its stream plugin, on request
  (`start_rabbitmq`), for the Python-client rounds: Debian has no native stream client.
- bench/drivers/peerbench: the Go load driver of NATS and Redis, built offline from
  Debian's Go packages (GOPATH mode), and bench/drivers/rdkperf, Moldau's C driver on
  librdkafka; both into a cache keyed by their sources' hash.

Everything is installed by the suite itself (scripts/bench-packages.txt), only when
missing, and every process started here is stopped by `Servers.stop()`.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import _support as s

PACKAGES = s.REPO / "scripts" / "bench-packages.txt"
DRIVER_SRC = s.REPO / "bench" / "drivers" / "peerbench"
RDKPERF_SRC = s.REPO / "bench" / "drivers" / "rdkperf"
GOCODE = Path("/usr/share/gocode")
CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "moldau-bench"


def install_packages() -> None:
    subprocess.run([str(s.REPO / "scripts" / "install-debian-packages"), str(PACKAGES)],
                   check=True)


def build_driver() -> Path:
    """The peerbench binary, rebuilt only when its Go sources change."""
    digest = hashlib.sha256()
    for path in sorted(DRIVER_SRC.glob("*.go")):
        digest.update(path.name.encode() + path.read_bytes())
    binary = CACHE / f"peerbench-{digest.hexdigest()[:16]}"
    if binary.exists():
        return binary
    gopath = Path(tempfile.mkdtemp(prefix="moldau-bench-go-"))
    try:
        (gopath / "src").mkdir()
        shutil.copytree(DRIVER_SRC, gopath / "src" / "peerbench")
        env = dict(os.environ, GO111MODULE="off", GOFLAGS="", GOPROXY="off",
                   GOPATH=f"{gopath}:{GOCODE}", GOCACHE=str(CACHE / "gocache"))
        CACHE.mkdir(parents=True, exist_ok=True)
        subprocess.run(["go", "build", "-o", str(binary), "."], cwd=gopath / "src" / "peerbench",
                       env=env, check=True)
    finally:
        shutil.rmtree(gopath, ignore_errors=True)
    return binary


def build_rdkperf() -> Path:
    """The C librdkafka drivers, rebuilt only when their sources change."""
    sources = sorted(RDKPERF_SRC.glob("*.c"))
    digest = hashlib.sha256(b"".join(path.read_bytes() for path in sources))
    binary = CACHE / f"rdkperf-{digest.hexdigest()[:16]}"
    if not binary.exists():
        CACHE.mkdir(parents=True, exist_ok=True)
        flags = subprocess.run(["pkg-config", "--cflags", "--libs", "rdkafka"], check=True,
                               capture_output=True, text=True).stdout.split()
        subprocess.run(["gcc", "-O2", "-Wall", "-o", str(binary), *map(str, sources), *flags,
                        "-lpthread"], check=True)
    return binary


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_port(port: int, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


def version(command: list[str]) -> str:
    try:
        out = subprocess.run(command, capture_output=True, text=True, timeout=30)
        return (out.stdout or out.stderr).strip().splitlines()[0]
    except (OSError, subprocess.SubprocessError, IndexError):
        return "not installed"


@dataclass
class System:
    """One system under test: its name in the tables, address and server process."""

    name: str
    kind: str  # the driver's -system: kafka, nats, redis
    port: int
    pid: int
    durability: str

    @property
    def addr(self) -> str:
        return f"127.0.0.1:{self.port}"


@dataclass
class Servers:
    """Moldau, NATS and Redis started for one suite run, in a temporary directory."""

    partitions: int = 1
    peers: bool = True  # False: only Moldau (the profile and capacity suites)
    properties: dict[str, str] = field(default_factory=dict)  # extra broker properties
    workdir: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="moldau-peers-")))
    systems: dict[str, System] = field(default_factory=dict)
    _procs: list[subprocess.Popen[bytes]] = field(default_factory=list)
    _stoppers: list[Any] = field(default_factory=list)
    broker: Any = None  # the BrokerProcess

    def start(self) -> Servers:
        try:
            self._start_moldau()
            if self.peers:
                self._start_nats()
                self._start_redis()
        except BaseException:
            self.stop()
            raise
        return self

    def _spawn(self, args: list[str], log: str,
               env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
        out = open(self.workdir / log, "ab")  # noqa: SIM115
        proc = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, cwd=self.workdir,
                                env=None if env is None else {**os.environ, **env})
        out.close()
        self._procs.append(proc)
        return proc

    def _start_moldau(self) -> None:
        sys.path.insert(0, str(s.REPO / "broker" / "src"))
        from moldau.cluster.zk_ensemble import ZooKeeperEnsemble
        from moldau.devcluster.brokers import BrokerProcess

        ensemble = ZooKeeperEnsemble(self.workdir / "zk", size=1, die_with_parent=True).start()
        self._stoppers.append(ensemble.stop)
        broker = BrokerProcess(str(self.workdir / "moldau"), 1,
                               ensemble.connect_string + "/bench",
                               properties={**s.AUTOTUNED_SOCKETS,
                                           "num.partitions": str(self.partitions),
                                           "log.segment.bytes": str(1 << 30),
                                           **self.properties})
        broker.start(wait=60.0)
        self._stoppers.append(broker.stop)
        self.broker = broker
        pid = broker.pid()
        assert pid is not None
        self._warm_group_coordinator(broker.bootstrap)
        self.systems["Moldau"] = System(
            "Moldau", "kafka", broker.port, pid,
            "acks=1: acknowledged once appended to the leader's log (page cache); no fsync"
            " (log.flush.interval.messages unset, Kafka's default)")

    @staticmethod
    def _warm_group_coordinator(addr: str) -> None:
        warm_group_coordinator(addr, "peers-warmup")

    def _start_nats(self) -> None:
        port = free_port()
        store = self.workdir / "nats"
        store.mkdir()
        proc = self._spawn(["nats-server", "-a", "127.0.0.1", "-p", str(port), "-js",
                            "-sd", str(store)], "nats.log")
        wait_port(port)
        self.systems["NATS JetStream"] = System(
            "NATS JetStream", "nats", port, proc.pid,
            "file storage, publish acknowledged once stored (page cache); fsync every 2 min"
            " (the default sync_interval)")

    def _start_redis(self) -> None:
        port = free_port()
        proc = self._spawn(["redis-server", "--port", str(port), "--bind", "127.0.0.1",
                            "--appendonly", "yes", "--appendfsync", "everysec", "--save", "",
                            "--dir", str(self.workdir), "--protected-mode", "no"], "redis.log")
        wait_port(port)
        self.systems["Redis Streams"] = System(
            "Redis Streams", "redis", port, proc.pid,
            "XADD acknowledged once in memory and the AOF buffer (written before the reply"
            " is sent); fsync every second (appendfsync everysec)")

    def start_rabbitmq(self) -> None:
        """RabbitMQ with its stream plugin, only for the Python-client rounds (its Erlang
        VM would otherwise sit beside the native-driver rounds). Everything lives in the
        run's directory: node name, ports, data, logs, the Erlang cookie (HOME), and an
        epmd of its own on a free port, started here so that `stop()` ends it too."""
        home = self.workdir / "rabbitmq"
        home.mkdir()
        epmd, amqp, dist, stream = (free_port() for _ in range(4))
        (home / "rabbitmq.conf").write_text(
            f"listeners.tcp.1 = 127.0.0.1:{amqp}\n"
            f"stream.listeners.tcp.1 = 127.0.0.1:{stream}\n"
            "stream.advertised_host = 127.0.0.1\n"
            f"stream.advertised_port = {stream}\n")
        (home / "enabled_plugins").write_text("[rabbitmq_stream].\n")
        env = {"HOME": str(home), "ERL_EPMD_PORT": str(epmd), "ERL_EPMD_ADDRESS": "127.0.0.1",
               "RABBITMQ_NODENAME": f"moldau-bench-{stream}@localhost",
               "RABBITMQ_DIST_PORT": str(dist), "RABBITMQ_MNESIA_BASE": str(home / "mnesia"),
               "RABBITMQ_LOG_BASE": str(home / "log"),
               "RABBITMQ_CONFIG_FILE": str(home / "rabbitmq.conf"),
               "RABBITMQ_ENABLED_PLUGINS_FILE": str(home / "enabled_plugins"),
               "RABBITMQ_ADVANCED_CONFIG_FILE": str(home / "advanced.config"),
               # idle schedulers sleep instead of spinning: 2 cores are shared
               "RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS": "+sbwt none +sbwtdcpu none +sbwtdio none"}
        self._spawn(["epmd", "-port", str(epmd)], "epmd.log", env)
        wait_port(epmd)
        # the script runs the VM as its child and stops it gracefully on SIGTERM
        script = self._spawn(["/usr/lib/rabbitmq/bin/rabbitmq-server"], "rabbitmq.log", env)
        wait_port(stream, timeout=180)
        children = Path(f"/proc/{script.pid}/task/{script.pid}/children").read_text().split()
        self.systems["RabbitMQ streams"] = System(
            "RabbitMQ streams", "rabbitmq", stream, int(children[0]) if children else script.pid,
            "one node, stream protocol: a publish is confirmed once written to the stream's"
            " log (page cache); streams never fsync, they leave it to the OS (RabbitMQ's"
            " streams guide, data safety)")

    def create_topic(self, name: str, partitions: int, compression: str = "none") -> None:
        """Moldau topics are created up front, so produce runs never wait for metadata."""
        from confluent_kafka.admin import AdminClient, NewTopic

        admin = AdminClient({"bootstrap.servers": self.systems["Moldau"].addr})
        config = {} if compression == "none" else {"compression.type": "producer"}
        admin.create_topics([NewTopic(name, partitions, 1, config=config)])[name].result(60)
        deadline = time.monotonic() + 60
        while True:
            meta = admin.list_topics(name, timeout=10).topics[name]
            if meta.error is None and all(p.leader >= 0 for p in meta.partitions.values()):
                return
            if time.monotonic() > deadline:
                raise TimeoutError(f"topic {name} has no leaders")
            time.sleep(0.1)

    def stop(self) -> None:
        for proc in reversed(self._procs):
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(30)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(10)
        for stop in reversed(self._stoppers):
            try:
                stop()
            except Exception as exc:  # keep stopping the others
                print(f"stopping: {exc}", file=sys.stderr)
        shutil.rmtree(self.workdir, ignore_errors=True)


def drive(driver: Path, system: System, mode: str, **flags: object) -> dict[str, Any]:
    """One run of the Go driver; its JSON result plus the server's CPU share."""
    args = [str(driver), "-system", system.kind, "-mode", mode, "-addr", system.addr]
    for key, value in flags.items():
        args += [f"-{key}", str(value)]
    return run_json(args, system)


def run_json(args: list[str], system: System) -> dict[str, Any]:
    """Run a driver that prints one JSON object; add the server's CPU share and the
    command (with the binary's name, not its cache path)."""
    cpu0, t0 = cpu_seconds(system.pid), time.perf_counter()
    out = subprocess.run(args, capture_output=True, text=True, timeout=900)
    wall = time.perf_counter() - t0
    if out.returncode != 0:
        raise RuntimeError(f"{' '.join(args)} failed: {out.stderr.strip()}")
    result: dict[str, Any] = json.loads(out.stdout)
    result["server_cpu"] = (cpu_seconds(system.pid) - cpu0) / wall
    result["command"] = " ".join([Path(args[0]).name.split("-")[0], *args[1:]])
    return result


def warm_group_coordinator(addr: str, group: str) -> None:
    """Create __consumer_offsets now: any client with a group.id (librdkafka looks up its
    coordinator even when it only assigns) would otherwise create its partitions in the
    middle of a measurement."""
    from confluent_kafka import Consumer, KafkaException, TopicPartition

    consumer = Consumer({"bootstrap.servers": addr, "group.id": group})
    deadline = time.monotonic() + 120
    try:
        while True:
            try:
                consumer.committed([TopicPartition(group, 0)], timeout=10)
                return
            except KafkaException:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)
    finally:
        consumer.close()
