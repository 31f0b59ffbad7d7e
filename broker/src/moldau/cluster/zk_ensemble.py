"""ZooKeeperEnsemble: Debian's ZooKeeper 3.8 as local java processes on 127.0.0.1.

For tests and the development cluster. Each node has its own directory under `base_dir`:

    base_dir/ensemble.json        ports, size and tick (ZooKeeperEnsemble.load reads it)
    base_dir/node<i>/zoo.cfg      (i = 0 .. size-1; ZooKeeper's myid is i + 1)
    base_dir/node<i>/data/myid
    base_dir/node<i>/log4j.properties, log/zookeeper.log, log/stdout.log
    base_dir/node<i>/zk.pid

With `tls=ZkServerTls(...)` every node also serves a secure client port (Netty, TLS, client
certificates authenticated by ZooKeeper's x509 provider, so ACLs can name them):
`secure_connect_string` reaches those ports.

With `sasl=ZkServerSasl(...)` the nodes authenticate clients with SASL DIGEST-MD5 (the
users of a JAAS `Server` section, base_dir/node<i>/jaas.conf), or with Kerberos when it
holds a `ZkServerKerberos` (the server's keytab login; clients' principals stripped of
host and realm), and, by default, refuse any request from a client that has not
authenticated (ZooKeeper 3.8's `enforce.auth`), so ACLs can name `sasl:<user>` identities.
The TLS and SASL settings are zk_server_security's.

Debian's zkServer.sh forces /etc/zookeeper and /var/log/zookeeper and a classpath without a
logging binding, so the nodes are started with java directly (see the reference notes,
zookeeper-clients-pyspark.md §1.4). Processes run in their own session: they outlive the
Python process that started them, and `load(base_dir)` finds them again by pid file.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import threading
import time
from dataclasses import asdict
from pathlib import Path

from moldau.cluster.zk_server_security import ZkServerSasl, ZkServerTls

JAVA_DIR = Path("/usr/share/java")
CLASSPATH_JARS = ("zookeeper.jar", "slf4j-log4j12.jar", "log4j-1.2.jar", "servlet-api.jar")
# The secure client port needs ZooKeeper's Netty connection factory (Debian's libnetty-java,
# a dependency of the zookeeper package; its netty-all.jar holds no classes).
NETTY_JARS = tuple(f"netty-{part}.jar" for part in (
    "buffer", "codec", "common", "handler", "resolver", "transport",
    "transport-native-epoll", "transport-native-unix-common"))
MAIN_CLASS = "org.apache.zookeeper.server.quorum.QuorumPeerMain"
JVM_OPTS = ("-Xms64m", "-Xmx256m", "-XX:+UseSerialGC")
STATE_FILE = "ensemble.json"
PID_FILE = "zk.pid"
INSTALL_HINT = "install Debian's zookeeper package: apt-get install zookeeper"
SERVING_MODES = ("leader", "follower", "standalone")

LOG4J_PROPERTIES = """\
log4j.rootLogger=INFO, ROLLINGFILE
log4j.appender.ROLLINGFILE=org.apache.log4j.RollingFileAppender
log4j.appender.ROLLINGFILE.Threshold=INFO
log4j.appender.ROLLINGFILE.File=${zookeeper.log.dir}/zookeeper.log
log4j.appender.ROLLINGFILE.MaxFileSize=10MB
log4j.appender.ROLLINGFILE.MaxBackupIndex=3
log4j.appender.ROLLINGFILE.layout=org.apache.log4j.PatternLayout
log4j.appender.ROLLINGFILE.layout.ConversionPattern=%d{ISO8601} [myid:%X{myid}] - %-5p [%t] - %m%n
"""


SERVER_JAAS_FILE = "jaas.conf"


class ZooKeeperEnsembleError(RuntimeError):
    """The ensemble cannot be started (missing java or jars, a node that exits, no quorum)."""


def _write_private(path: Path, text: str) -> None:
    """Write a file only its owner may read (it may hold passwords)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(text)
    os.chmod(path, 0o600)  # an existing file keeps its mode through O_CREAT


def _ephemeral_range() -> tuple[int, int]:
    try:
        low, high = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
        return int(low), int(high)
    except (OSError, ValueError):
        return 32768, 60999


def free_ports(count: int, host: str = "127.0.0.1") -> list[int]:
    """`count` distinct ports free on `host` right now.

    They are taken below the kernel's ephemeral range when there is room: a port inside it
    can be grabbed by any outgoing connection before ZooKeeper binds it (a follower binds
    its quorum port only once it becomes leader)."""
    low = _ephemeral_range()[0]
    candidates = list(range(10000, low)) if low > 12000 else []
    random.shuffle(candidates)
    sockets: list[socket.socket] = []
    try:
        for port in candidates:
            if len(sockets) == count:
                break
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            try:
                s.bind((host, port))
            except OSError:
                s.close()
                continue
            sockets.append(s)
        while len(sockets) < count:  # no room below the range: let the kernel choose
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind((host, 0))
            sockets.append(s)
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


def four_letter_word(port: int, command: str, host: str = "127.0.0.1",
                     timeout: float = 2.0) -> str | None:
    """Send a ZooKeeper four-letter command and return the answer (None when unreachable)."""
    try:
        with socket.create_connection((host, port), timeout=timeout) as sock:
            sock.sendall(command.encode("ascii"))
            chunks = []
            while True:
                chunk = sock.recv(65536)
                if not chunk:
                    break
                chunks.append(chunk)
            return b"".join(chunks).decode("utf-8", "replace")
    except OSError:
        return None


def find_java() -> str:
    """java from JAVA_HOME, else from PATH (as Kafka's kafka-run-class.sh picks it)."""
    java_home = os.environ.get("JAVA_HOME")
    if java_home and os.access(os.path.join(java_home, "bin", "java"), os.X_OK):
        return os.path.join(java_home, "bin", "java")
    java = shutil.which("java")
    if java is None:
        raise ZooKeeperEnsembleError(f"java was not found on PATH: {INSTALL_HINT}"
                                     " (it pulls in a Java runtime)")
    return java


def classpath(conf_dir: Path | None, tls: bool = False) -> str:
    """Debian's ZooKeeper jars with a logging binding (and Netty for a secure port),
    after `conf_dir` when given (where log4j.properties is looked up)."""
    jars = CLASSPATH_JARS + (NETTY_JARS if tls else ())
    missing = [j for j in jars if not (JAVA_DIR / j).exists()]
    if missing:
        raise ZooKeeperEnsembleError(
            f"{', '.join(str(JAVA_DIR / j) for j in missing)} missing: {INSTALL_HINT}")
    first = [str(conf_dir)] if conf_dir is not None else []
    return ":".join(first + [str(JAVA_DIR / j) for j in jars])


class ZooKeeperEnsemble:
    """A local ZooKeeper ensemble of `size` nodes (1 = standalone), indexed 0 .. size-1."""

    def __init__(
        self,
        base_dir: str | os.PathLike[str],
        size: int = 3,
        client_ports: list[int] | None = None,
        tick_time: int = 2000,
        *,
        quorum_ports: list[int] | None = None,
        election_ports: list[int] | None = None,
        die_with_parent: bool = False,
        tls: ZkServerTls | None = None,
        secure_client_ports: list[int] | None = None,
        sasl: ZkServerSasl | None = None,
    ) -> None:
        if size < 1:
            raise ValueError("an ensemble needs at least one node")
        self.base_dir = Path(base_dir).absolute()
        self.size = size
        self.tick_time = tick_time
        self.tls = tls
        self.sasl = sasl
        if tls is None:
            secure_client_ports = []
        wanted = sum(p is None for p in (client_ports, quorum_ports, election_ports,
                                         secure_client_ports))
        spare = iter(free_ports(wanted * size)) if wanted else iter(())
        self.client_ports = list(client_ports or [next(spare) for _ in range(size)])
        self.quorum_ports = list(quorum_ports or [next(spare) for _ in range(size)])
        self.election_ports = list(election_ports or [next(spare) for _ in range(size)])
        self.secure_client_ports = (list(secure_client_ports) if secure_client_ports is not None
                                    else [next(spare) for _ in range(size)])
        for name, ports in (("client", self.client_ports), ("quorum", self.quorum_ports),
                            ("election", self.election_ports)):
            if len(ports) != size:
                raise ValueError(f"{len(ports)} {name} ports for {size} nodes")
        # Tests: nodes get SIGKILL when the process that started them dies, so a test run
        # that is killed (or exits without teardown) leaves no JVMs behind. The dev cluster
        # leaves it off: its nodes must outlive `moldau dev-cluster up`.
        self.die_with_parent = die_with_parent
        self._procs: dict[int, subprocess.Popen[bytes]] = {}

    # -- layout --------------------------------------------------------------------------------

    @property
    def node_dirs(self) -> list[Path]:
        return [self.base_dir / f"node{i}" for i in range(self.size)]

    @property
    def connect_string(self) -> str:
        return ",".join(f"127.0.0.1:{p}" for p in self.client_ports)

    @property
    def secure_connect_string(self) -> str:
        """The secure client ports (TLS); empty without `tls`."""
        return ",".join(f"127.0.0.1:{p}" for p in self.secure_client_ports)

    def _state(self) -> dict[str, object]:
        state: dict[str, object] = {
            "size": self.size, "tick_time": self.tick_time, "client_ports": self.client_ports,
            "quorum_ports": self.quorum_ports, "election_ports": self.election_ports}
        if self.tls is not None:
            state |= {"tls": asdict(self.tls), "secure_client_ports": self.secure_client_ports}
        if self.sasl is not None:
            state |= {"sasl": self.sasl.state()}
        return state

    @classmethod
    def load(cls, base_dir: str | os.PathLike[str]) -> ZooKeeperEnsemble:
        """The ensemble described by base_dir/ensemble.json (written by start())."""
        path = Path(base_dir) / STATE_FILE
        try:
            state = json.loads(path.read_text())
        except FileNotFoundError:
            raise ZooKeeperEnsembleError(f"no ZooKeeper ensemble in {base_dir} ({path} is"
                                         " missing)") from None
        tls, sasl = state.get("tls"), state.get("sasl")
        return cls(base_dir, size=state["size"], client_ports=state["client_ports"],
                   tick_time=state["tick_time"], quorum_ports=state["quorum_ports"],
                   election_ports=state["election_ports"],
                   tls=ZkServerTls(**tls) if tls else None,
                   secure_client_ports=state.get("secure_client_ports"),
                   sasl=ZkServerSasl.from_state(sasl) if sasl else None)

    def write_configs(self) -> None:
        """Write ensemble.json and every node's zoo.cfg, myid and log4j.properties (data
        directories are kept, so a restarted node resyncs from the leader)."""
        self.base_dir.mkdir(parents=True, exist_ok=True)
        # It may hold the SASL users' passwords: readable by the owner only.
        _write_private(self.base_dir / STATE_FILE, json.dumps(self._state(), indent=2) + "\n")
        servers = []
        if self.size > 1:  # no server.N lines: standalone mode
            servers = [f"server.{i + 1}=127.0.0.1:{self.quorum_ports[i]}:{self.election_ports[i]}"
                       for i in range(self.size)]
        for i, node_dir in enumerate(self.node_dirs):
            (node_dir / "data").mkdir(parents=True, exist_ok=True)
            (node_dir / "log").mkdir(exist_ok=True)
            (node_dir / "data" / "myid").write_text(f"{i + 1}\n")
            (node_dir / "log4j.properties").write_text(LOG4J_PROPERTIES)
            lines = [
                f"tickTime={self.tick_time}",
                "initLimit=10",
                "syncLimit=5",
                f"dataDir={node_dir / 'data'}",
                f"clientPort={self.client_ports[i]}",
                "clientPortAddress=127.0.0.1",
                "maxClientCnxns=200",
                "4lw.commands.whitelist=*",
                # The AdminServer (Jetty) costs a port and ~10 MiB per node; 4lw does the job.
                "admin.enableServer=false",
                "autopurge.snapRetainCount=3",
                "autopurge.purgeInterval=1",
                *servers,
            ]
            if self.tls is not None:
                lines += [f"secureClientPort={self.secure_client_ports[i]}",
                          "secureClientPortAddress=127.0.0.1", *self.tls.zoo_cfg_lines()]
            if self.sasl is not None:
                lines += self.sasl.zoo_cfg_lines()
                _write_private(node_dir / SERVER_JAAS_FILE, self.sasl.jaas_text())
            (node_dir / "zoo.cfg").write_text("\n".join(lines) + "\n")

    # -- processes -----------------------------------------------------------------------------

    def pid(self, i: int) -> int | None:
        """The pid of node i when it is running (from this object or its pid file)."""
        proc = self._procs.get(i)
        if proc is not None:
            return proc.pid if proc.poll() is None else None
        try:
            pid = int((self.node_dirs[i] / PID_FILE).read_text().strip())
        except (FileNotFoundError, ValueError):
            return None
        # Guard against a recycled pid: it must be this node's ZooKeeper.
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            return None
        if stat.rsplit(")", 1)[-1].split()[0] == "Z":  # a zombie (exited, not reaped)
            return None
        cfg = str(self.node_dirs[i] / "zoo.cfg").encode()
        return pid if MAIN_CLASS.encode() in cmdline and cfg in cmdline else None

    def running(self, i: int) -> bool:
        return self.pid(i) is not None

    def start_node(self, i: int) -> None:
        """Start node i (no-op when it runs already); does not wait for it to serve."""
        if self.running(i):
            return
        node_dir = self.node_dirs[i]
        if not (node_dir / "zoo.cfg").exists():
            self.write_configs()
        cmd = [
            find_java(), *JVM_OPTS,
            f"-Dzookeeper.log.dir={node_dir / 'log'}",
            f"-Dlog4j.configuration=file:{node_dir / 'log4j.properties'}",
            "-Dzookeeper.jmx.log4j.disable=true",
            *self._sasl_jvm_flags(node_dir),
            "-cp", classpath(node_dir, self.tls is not None), MAIN_CLASS,
            str(node_dir / "zoo.cfg"),
        ]
        setpriv = shutil.which("setpriv")  # util-linux: sets PR_SET_PDEATHSIG, then execs
        # The kernel signals on the death of the *thread* that forked: only the main thread's
        # lifetime matches the process's.
        if (self.die_with_parent and setpriv
                and threading.current_thread() is threading.main_thread()):
            cmd = [setpriv, "--pdeathsig", "KILL", "--", *cmd]
        with open(node_dir / "log" / "stdout.log", "ab") as out:
            proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=out,
                                    stderr=subprocess.STDOUT, cwd=node_dir,
                                    start_new_session=True)
        self._procs[i] = proc
        (node_dir / PID_FILE).write_text(f"{proc.pid}\n")

    def _sasl_jvm_flags(self, node_dir: Path) -> list[str]:
        """The server JAAS file, as zkServer.sh passes it in SERVER_JVMFLAGS."""
        if self.sasl is None:
            return []
        return self.sasl.jvm_flags(node_dir / SERVER_JAAS_FILE)

    def _signal_and_wait(self, i: int, sig: int, timeout: float) -> bool:
        pid = self.pid(i)
        if pid is None:
            return True
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            proc = self._procs.get(i)
            if proc is not None:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(timeout=0.05)
            else:
                time.sleep(0.05)
            if self.pid(i) is None:
                return True
        return False

    def _forget(self, i: int) -> None:
        proc = self._procs.pop(i, None)
        if proc is not None:
            proc.wait()
        with contextlib.suppress(FileNotFoundError):
            (self.node_dirs[i] / PID_FILE).unlink()

    def stop_node(self, i: int, timeout: float = 10.0) -> None:
        """SIGTERM, then SIGKILL if node i is still alive after `timeout` seconds."""
        if not self._signal_and_wait(i, signal.SIGTERM, timeout):
            self._signal_and_wait(i, signal.SIGKILL, 5.0)
        self._forget(i)

    def kill_node(self, i: int) -> None:
        """SIGKILL node i (a crash)."""
        self._signal_and_wait(i, signal.SIGKILL, 5.0)
        self._forget(i)

    def stop(self) -> None:
        for i in range(self.size):
            self.stop_node(i)

    # -- status --------------------------------------------------------------------------------

    def mode(self, i: int) -> str | None:
        """"leader", "follower" or "standalone" from `srvr`; None when node i does not serve
        (down, starting, or without quorum)."""
        answer = four_letter_word(self.client_ports[i], "srvr", timeout=1.0)
        if not answer:
            return None
        for line in answer.splitlines():
            if line.startswith("Mode:"):
                mode = line.split(":", 1)[1].strip()
                return mode if mode in SERVING_MODES else None
        return None

    def _check_alive(self, i: int) -> None:
        proc = self._procs.get(i)
        if proc is not None and proc.poll() is not None:
            log_file = self.node_dirs[i] / "log" / "stdout.log"
            tail = ""
            with contextlib.suppress(OSError):
                tail = "\n".join(log_file.read_text(errors="replace").splitlines()[-15:])
            self._forget(i)
            raise ZooKeeperEnsembleError(
                f"ZooKeeper node {i} exited with code {proc.returncode}; {log_file}:\n{tail}")

    def wait_node(self, i: int, timeout: float = 30.0) -> str:
        """Wait until node i serves; returns its mode."""
        deadline = time.monotonic() + timeout
        while True:
            self._check_alive(i)
            mode = self.mode(i)
            if mode is not None:
                return mode
            if time.monotonic() > deadline:
                raise ZooKeeperEnsembleError(
                    f"ZooKeeper node {i} (127.0.0.1:{self.client_ports[i]}) does not serve"
                    f" after {timeout:.0f} s; see {self.node_dirs[i] / 'log' / 'zookeeper.log'}")
            time.sleep(0.1)

    def wait_quorum(self, timeout: float = 30.0) -> None:
        """Wait until every running node serves (so a quorum is formed)."""
        deadline = time.monotonic() + timeout
        running = [i for i in range(self.size) if self.running(i)]
        if len(running) <= self.size // 2:
            raise ZooKeeperEnsembleError(
                f"only {len(running)} of {self.size} ZooKeeper nodes run: no quorum possible")
        for i in running:
            self.wait_node(i, max(deadline - time.monotonic(), 0.1))

    def start(self, timeout: float = 30.0) -> ZooKeeperEnsemble:
        """Write the configs, start every node that is not running, wait for the quorum."""
        find_java()
        classpath(self.base_dir, self.tls is not None)
        state_file = self.base_dir / STATE_FILE
        if (state_file.exists() and json.loads(state_file.read_text()) != self._state()
                and any(self.running(i) for i in range(self.size))):
            raise ZooKeeperEnsembleError(
                f"{self.base_dir} holds running ZooKeeper nodes with other settings: use"
                " ZooKeeperEnsemble.load() to attach to them, or stop them first")
        self.write_configs()
        try:
            for i in range(self.size):
                self.start_node(i)
            self.wait_quorum(timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def __enter__(self) -> ZooKeeperEnsemble:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
