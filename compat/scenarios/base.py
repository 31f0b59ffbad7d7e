"""What a scenario is: a name, how each of its two columns runs, and its own rules.

The `kafka` column is the reference (Kafka's client or tool against Apache Kafka); the
`moldau` column is the same thing against Moldau (or Moldau's own tool against Moldau).
A `Side` with the same `key` in two scenarios is the same run, done once and reused
(the reference column of "Kafka's tool" and "Moldau's tool" scenarios, say).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from compat import batch, launcher
from compat.lab import SHARED_PAIR, KafkaBroker, Lab
from compat.normalise import Normaliser
from compat.transcript import Transcript
from moldau.devcluster.brokers import BrokerProcess

KAFKA = "kafka"
MOLDAU = "moldau"
BROKERS = (KAFKA, MOLDAU)


def lab_broker(lab: Lab, pair: str, broker: str) -> KafkaBroker | BrokerProcess:
    """One broker of the lab: KAFKA or MOLDAU of the SHARED_PAIR or the ACL_PAIR."""
    brokers = lab.pair(pair)
    return brokers.kafka if broker == KAFKA else brokers.moldau


@dataclass(frozen=True)
class Context:
    """What one column run gets: the lab, the broker it talks to (of which pair), a token
    unique to this run (for names that must not collide; normalised to <run>) and a
    scratch directory."""

    lab: Lab
    broker: str
    token: str
    scratch: Path
    pair: str = SHARED_PAIR

    @property
    def bootstrap(self) -> str:
        return lab_broker(self.lab, self.pair, self.broker).bootstrap

    @property
    def data_dir(self) -> Path:
        return Path(lab_broker(self.lab, self.pair, self.broker).data_dir)

    @property
    def zookeeper_connect(self) -> str:
        """The broker's ZooKeeper, with its chroot (`host:port/chroot`)."""
        return lab_broker(self.lab, self.pair, self.broker).zookeeper_connect


@dataclass(frozen=True)
class Side:
    key: str
    broker: str  # the lab broker this column talks to
    run: Callable[[Context], Transcript]
    pair: str = SHARED_PAIR  # of which pair (compat.lab.ACL_PAIR: the ACL scenarios' own)


@dataclass(frozen=True)
class Scenario:
    name: str
    summary: str
    kafka: Side
    moldau: Side
    rules: Sequence[Normaliser] = ()
    requires: Sequence[str] = ()  # scenarios whose data this one reads, run first
    fast: bool = True  # in the subset `make test` may run

    @property
    def pairs(self) -> set[str]:
        """The lab's broker pairs the scenario's columns talk to."""
        return {self.kafka.pair, self.moldau.pair}


def kafka_tools(transcript: Transcript, main_class: str, label: str,
                commands: Sequence[Sequence[str]], timeout: float = 300.0) -> None:
    """Run one of Kafka's tools once per argument list, in order and in one JVM
    (compat/batch.py), and add each run to the transcript under `label`."""
    runs = batch.run_batch([(main_class, args) for args in commands], timeout=timeout)
    for args, run in zip(commands, runs, strict=True):
        transcript.command(label, args, run)


def moldau_tool(transcript: Transcript, script: str, label: str, args: Sequence[str],
                timeout: float = 120.0) -> None:
    """Run one of Moldau's kafka-*.sh scripts (from this Python's environment)."""
    path = Path(sys.executable).parent / script
    transcript.command(label, args, launcher.run_command([str(path), *args], timeout=timeout))
