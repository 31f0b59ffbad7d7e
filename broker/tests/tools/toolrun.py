"""Running the tools as an operator does (their console scripts, as subprocesses) and
comparing their output with the committed Kafka 3.9 golden files."""

from __future__ import annotations

import ctypes
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from moldau.devcluster.brokers import BrokerProcess

BIN = Path(sys.executable).parent
GOLDEN = Path(__file__).parent / "golden"
TOPIC_ID = re.compile(r"(?<=TopicId: )[A-Za-z0-9_-]{22}")
ISR = re.compile(r"(?<=\tIsr: )([0-9]+(?:,[0-9]+)*)")


def die_with_parent() -> None:
    """preexec_fn: the child gets SIGKILL when the test process dies (PR_SET_PDEATHSIG)."""
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)


@dataclass
class Result:
    code: int
    out: str
    err: str


def run(script: str, *args: str, stdin: str | None = None, timeout: float = 120) -> Result:
    """One tool run through its installed console script (e.g. kafka-topics.sh)."""
    done = subprocess.run([str(BIN / script), *args], input=stdin, capture_output=True,
                          text=True, timeout=timeout, preexec_fn=die_with_parent)
    return Result(done.returncode, done.stdout, done.stderr)


def short_wait_config() -> str:
    """A client properties file that gives up on unreachable brokers after half a second
    (default.api.timeout.ms; Kafka's 60 s otherwise), for the tests of that failure."""
    path = Path(tempfile.gettempdir()) / f"moldau-short-wait-{os.getpid()}.properties"
    if not path.exists():
        path.write_text("default.api.timeout.ms=500\n", encoding="utf-8")
    return str(path)


def normalise(text: str, cluster: ToolCluster | None = None, sort_isr: bool = False) -> str:
    """The variable parts replaced: topic ids, broker addresses; sort_isr orders the ISR
    ids (their order depends on the history of shrinks and expansions, in Kafka too)."""
    text = TOPIC_ID.sub("<TOPIC_ID>", text)
    if sort_isr:
        text = ISR.sub(lambda m: ",".join(sorted(m.group(1).split(","), key=int)), text)
    if cluster is not None:
        for broker_id, broker in cluster.brokers.items():
            text = text.replace(broker.bootstrap, f"<BROKER{broker_id}>")
    return text


def golden(name: str) -> str:
    return (GOLDEN / name).read_text(encoding="utf-8")


def assert_golden(name: str, actual: str, cluster: ToolCluster | None = None,
                  sort_isr: bool = False) -> None:
    """MOLDAU_UPDATE_GOLDEN=1 rewrites the file (review the diff against Kafka's format)."""
    text = normalise(actual, cluster, sort_isr)
    if os.environ.get("MOLDAU_UPDATE_GOLDEN") == "1":
        (GOLDEN / name).write_text(text, encoding="utf-8")
    assert text == golden(name), f"output differs from golden/{name}:\n{text}"


def wait_for(check: Callable[[], Any], timeout: float = 60, what: str = "a condition") -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.25)


@dataclass
class ToolCluster:
    brokers: dict[int, BrokerProcess]
    zk_connect: str  # with the chroot

    @property
    def bootstrap(self) -> str:
        return ",".join(b.bootstrap for b in self.brokers.values() if b.pid() is not None)

    def tool(self, script: str, *args: str, **kwargs: Any) -> Result:
        """A tool run with --bootstrap-server pointing at the running brokers."""
        return run(script, "--bootstrap-server", self.bootstrap, *args, **kwargs)

    def ok(self, script: str, *args: str, **kwargs: Any) -> str:
        result = self.tool(script, *args, **kwargs)
        assert result.code == 0, (result.code, result.out, result.err)
        return result.out

    def topics(self) -> list[str]:
        return self.ok("kafka-topics.sh", "--list").split()

    def describe(self, topic: str) -> str:
        return self.ok("kafka-topics.sh", "--describe", "--topic", topic)

    def wait_full_isr(self, topic: str, replicas: int = 3) -> str:
        """The describe output once every partition has its full ISR."""
        def full() -> str | None:
            text = self.describe(topic)
            isrs = re.findall(r"\tIsr: ([0-9,]*)", text)
            return text if isrs and all(len(i.split(",")) == replicas for i in isrs) else None
        return wait_for(full, 60, f"{topic}: a full ISR on every partition")
