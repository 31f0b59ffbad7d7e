"""Broker processes on 127.0.0.1 for the development cluster and the test suites.

Each broker gets a directory with its server.properties, its log dirs (`data/`), its
Kafka log files (`logs/`, LOG_DIR) and a pid file. Healthy means: the process runs and a
Metadata request on its listener lists this broker, i.e. it registered in ZooKeeper and
its metadata cache knows itself.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import resource
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from moldau import properties as java_properties
from moldau.client.blocking import BlockingConnection
from moldau.protocol.generated.api import ApiKey
from moldau.protocol.generated.metadata_request import MetadataRequest

from .private_files import write_private_file

PR_SET_PDEATHSIG = 1  # prctl(2)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class BrokerProcess:
    directory: str
    broker_id: int
    zookeeper_connect: str  # with the chroot, as in server.properties
    port: int = 0  # 0: choose a free port at start
    properties: Mapping[str, str] = field(default_factory=dict)
    process: subprocess.Popen[bytes] | None = None
    # the open files limit (soft and hard RLIMIT_NOFILE) of the broker process; None keeps
    # ours (tests of running out of file descriptors set a low one)
    rlimit_nofile: int | None = None
    # Tests: the broker gets SIGKILL when the process that started it dies, so a killed
    # test run leaves no brokers behind. The dev cluster turns it off: its brokers must
    # outlive `moldau dev-cluster up`.
    die_with_parent: bool = True
    env: Mapping[str, str] = field(default_factory=dict)  # extra environment variables

    @property
    def data_dir(self) -> str:
        return os.path.join(self.directory, "data")

    @property
    def log_dir(self) -> str:
        return os.path.join(self.directory, "logs")

    @property
    def config_path(self) -> str:
        return os.path.join(self.directory, "server.properties")

    @property
    def pid_path(self) -> str:
        return os.path.join(self.directory, "broker.pid")

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def write_config(self) -> None:
        os.makedirs(self.directory, exist_ok=True)
        if self.port == 0:
            self.port = free_port()
        props = {
            "broker.id": str(self.broker_id),
            "listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "log.dirs": self.data_dir,
            "zookeeper.connect": self.zookeeper_connect,
            "offsets.topic.replication.factor": "1",
            "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1",
            "group.initial.rebalance.delay.ms": "0",
        }
        props.update(self.properties)
        text = java_properties.dumps(props, comments="written by moldau dev-cluster")
        # mode 0600: it may hold passwords (JAAS lines with users, key store passwords)
        write_private_file(Path(self.config_path), text.encode("latin-1"))

    def start(self, wait: float | None = 30.0) -> None:
        if not os.path.exists(self.config_path):
            self.write_config()
        os.makedirs(self.log_dir, exist_ok=True)
        env = dict(os.environ, LOG_DIR=self.log_dir, **self.env)
        out = open(os.path.join(self.log_dir, "stdout.log"), "ab")  # noqa: SIM115
        self.process = subprocess.Popen(
            [sys.executable, "-m", "moldau.server.main", self.config_path],
            stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
            start_new_session=True, preexec_fn=self._preexec(),
        )
        out.close()
        with open(self.pid_path, "w") as fh:
            fh.write(str(self.process.pid))
        if wait:
            self.wait_healthy(wait)

    def _preexec(self) -> Callable[[], None] | None:
        limit = self.rlimit_nofile
        die = self.die_with_parent
        if limit is None and not die:
            return None

        def apply() -> None:  # runs in the child between fork and exec
            if limit is not None:
                resource.setrlimit(resource.RLIMIT_NOFILE, (limit, limit))
            if die:
                ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)

        return apply

    def pid(self) -> int | None:
        if self.process is not None:
            return self.process.pid if self.process.poll() is None else None
        try:
            with open(self.pid_path) as fh:
                pid = int(fh.read().strip())
        except (OSError, ValueError):
            return None
        try:
            with open(f"/proc/{pid}/stat") as fh:
                state = fh.read().rsplit(")", 1)[1].split()[0]
        except OSError:
            return None
        return None if state == "Z" else pid  # a zombie waits for its reaper: it is gone

    def running(self) -> bool:
        return self.pid() is not None

    def healthy(self) -> bool:
        try:
            with BlockingConnection("127.0.0.1", self.port, timeout=2) as conn:
                response = conn.request(ApiKey.METADATA, 1, MetadataRequest(topics=[]))
        except (OSError, ConnectionError):
            return False
        return any(b.node_id == self.broker_id for b in response.brokers)

    def wait_healthy(self, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process is not None and self.process.poll() is not None:
                raise RuntimeError(f"broker {self.broker_id} exited with code "
                                   f"{self.process.returncode}; see {self.log_dir}\n"
                                   + self.tail())
            if self.healthy():
                return
            time.sleep(0.1)
        raise TimeoutError(f"broker {self.broker_id} not healthy after {timeout}s; see "
                           f"{self.log_dir}\n" + self.tail())

    def tail(self, lines: int = 30) -> str:
        path = os.path.join(self.log_dir, "stdout.log")
        try:
            with open(path, errors="replace") as fh:
                return "".join(fh.readlines()[-lines:])
        except OSError:
            return ""

    def stop(self, timeout: float = 30.0) -> int | None:
        """SIGTERM (clean shutdown), SIGKILL after the timeout; returns the exit code."""
        return self._signal(signal.SIGTERM, timeout)

    def kill(self) -> int | None:
        return self._signal(signal.SIGKILL, 10.0)

    def _signal(self, sig: int, timeout: float) -> int | None:
        pid = self.pid()
        if pid is None:
            return self.process.returncode if self.process is not None else None
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)
        if self.process is not None:
            try:
                return self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                return self.process.wait()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and self.pid() is not None:
            time.sleep(0.05)
        if self.pid() is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        return None
