"""kcat's balanced consumer (`kcat -G`, librdkafka 2.0.2 from Debian) against the group
coordinator: two kcat processes share a topic's partitions, each partition's records are
consumed once, and kcat's commits (on close) are where a restarted kcat resumes.

In -G mode, `-o <offset>` overrides the committed offsets at every assignment, so these
tests never pass it: they set auto.offset.reset=earliest for a group without commits.
"""

from __future__ import annotations

import re
import shutil
import signal
import subprocess
import threading
import uuid
from typing import Any

import pytest

from moldau.devcluster.brokers import BrokerProcess

from .clients import (
    TP,
    committed_offsets,
    end_offsets,
    log_tail,
    new_topic,
    wait_for,
    wait_owned_once,
)

FORMAT = "%t %p %o %k %s\\n"  # kcat expands the escape itself
KCAT_CONSUMER_CONFIG = [
    "-X", "auto.offset.reset=earliest", "-X", "session.timeout.ms=6000",
    "-X", "heartbeat.interval.ms=500", "-X", "fetch.wait.max.ms=100",
]
# kcat -G writes one stderr line per rebalance:
#   % Group <g> rebalanced (memberid <id>): assigned: <topic> [0], <topic> [2]
REBALANCE = re.compile(r"rebalanced \(memberid [^)]*\): (assigned|revoked): ?(.*)$")


@pytest.fixture(scope="module")
def kcat() -> str:
    path = shutil.which("kcat")
    assert path, "kcat is installed by make test (scripts/debian-packages.txt)"
    return path


def kcat_produce(kcat: str, broker: BrokerProcess, topic: str, partition: int,
                 lines: list[str]) -> None:
    """kcat -P to one partition, key:value lines."""
    subprocess.run([kcat, "-b", broker.bootstrap, "-P", "-t", topic, "-p", str(partition),
                    "-K:"], input="".join(f"{line}\n" for line in lines).encode(),
                   check=True, timeout=60)


def parse(line: str) -> tuple[int, int, str, str]:
    """(partition, offset, key, value) of one FORMAT line (the topic is checked)."""
    _topic, partition, offset, key, value = line.split(" ", 4)
    return int(partition), int(offset), key, value


class KcatMember:
    """A `kcat -G` process: the records it printed, and its assignment as its rebalance
    lines on stderr tell it."""

    def __init__(self, kcat: str, name: str, broker: BrokerProcess, group: str,
                 topic: str) -> None:
        self.name, self.topic = name, topic
        self.process = subprocess.Popen(
            [kcat, "-b", broker.bootstrap, "-G", group, "-u", "-f", FORMAT,
             "-X", f"client.id={name}", *KCAT_CONSUMER_CONFIG, topic],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True)
        self._lock = threading.Lock()
        self._lines: list[str] = []
        self._stderr: list[str] = []
        self._assignment: frozenset[TP] = frozenset()
        for target in (self._read_stdout, self._read_stderr):
            threading.Thread(target=target, daemon=True).start()

    def _read_stdout(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            with self._lock:
                self._lines.append(line.rstrip("\n"))

    def _read_stderr(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            match = REBALANCE.search(line)
            with self._lock:
                self._stderr.append(line.rstrip("\n"))
                if match:  # eager (range): each assignment replaces the last
                    kind, listed = match.groups()
                    self._assignment = frozenset(
                        (self.topic, int(p)) for p in re.findall(r"\[(\d+)\]", listed)
                    ) if kind == "assigned" else frozenset()

    def assignment(self) -> frozenset[TP]:
        with self._lock:
            return self._assignment

    def records(self) -> list[tuple[int, int, str, str]]:
        with self._lock:
            return [parse(line) for line in self._lines]

    def stderr(self) -> str:
        with self._lock:
            return "\n".join(self._stderr[-20:])

    def problem(self) -> str | None:
        code = self.process.poll()
        return None if code is None else f"{self.name} exited with {code}:\n{self.stderr()}"

    def terminate(self, timeout: float = 30) -> int:
        """SIGTERM: kcat closes its consumer (commit, LeaveGroup) and exits."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            raise AssertionError(f"{self.name} did not exit {timeout}s after SIGTERM:\n"
                                 f"{self.stderr()}") from None


def test_kcat_members_share_partitions_and_commit(broker: BrokerProcess, kcat: str) -> None:
    topic = new_topic(broker.bootstrap, "kcat-share", 4)
    group = f"kcat-share-{uuid.uuid4().hex[:8]}"
    everything = {(topic, p) for p in range(4)}
    context = lambda: log_tail(broker)  # noqa: E731
    members = [KcatMember(kcat, name, broker, group, topic) for name in ("kcat-a", "kcat-b")]
    try:
        owned = wait_owned_once(members, everything, size=2, context=context)
        expected = {(p, i, f"k{p}-{i}", f"v{p}-{i}") for p in range(4) for i in range(10)}
        for p in range(4):
            kcat_produce(kcat, broker, topic, p, [f"k{p}-{i}:v{p}-{i}" for i in range(10)])

        def consumed() -> list[tuple[int, int, str, str]]:
            return [r for m in members for r in m.records()]

        wait_for(lambda: len(consumed()) >= len(expected), 30,
                 lambda: f"kcat printed {len(consumed())} of {len(expected)} records\n"
                 + "\n".join(m.stderr() for m in members) + f"\n{context()}")
        got = consumed()
        assert sorted(got) == sorted(expected), "each record once, none missing"
        for m in members:  # each printed exactly its own partitions' records
            assert {p for p, *_ in m.records()} == {p for _, p in owned[m.name]}, (
                m.name, owned)
    finally:
        codes = [m.terminate() for m in members]
    assert codes == [0, 0], "\n".join(m.stderr() for m in members)
    # kcat auto-commits what it printed; closing commits the rest
    assert committed_offsets(broker.bootstrap, group, topic, range(4)) == {
        p: 10 for p in range(4)}


def run_kcat_to_end(kcat: str, broker: BrokerProcess, group: str, topic: str) -> list[Any]:
    """kcat -G ... -e: consume the group's partitions to their ends, commit, exit."""
    done = subprocess.run(
        [kcat, "-b", broker.bootstrap, "-G", group, "-e", "-f", FORMAT,
         *KCAT_CONSUMER_CONFIG, topic], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return sorted(parse(line) for line in done.stdout.splitlines())


def test_restarted_kcat_resumes_after_committed_offsets(broker: BrokerProcess,
                                                        kcat: str) -> None:
    topic = new_topic(broker.bootstrap, "kcat-resume", 3)
    group = f"kcat-resume-{uuid.uuid4().hex[:8]}"
    first = [(p, i, f"k{p}-{i}", f"a{i}") for p in range(3) for i in range(5)]
    for p in range(3):
        kcat_produce(kcat, broker, topic, p, [f"{k}:{v}" for q, _, k, v in first if q == p])
    assert run_kcat_to_end(kcat, broker, group, topic) == sorted(first)
    assert committed_offsets(broker.bootstrap, group, topic, range(3)) == {
        p: 5 for p in range(3)}

    second = [(p, 5 + i, f"k{p}-{5 + i}", f"b{i}") for p in range(3) for i in range(4)]
    for p in range(3):
        kcat_produce(kcat, broker, topic, p, [f"{k}:{v}" for q, _, k, v in second if q == p])
    # with auto.offset.reset=earliest, anything not resumed would be printed again
    assert run_kcat_to_end(kcat, broker, group, topic) == sorted(second)
    ends = end_offsets(broker.bootstrap, topic, range(3))
    assert committed_offsets(broker.bootstrap, group, topic, range(3)) == ends == {
        p: 9 for p in range(3)}
