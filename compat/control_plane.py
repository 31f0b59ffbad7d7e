"""Two brokers of one kind in a chroot of their own, with three listeners each: CLIENT (the
scenario's clients), INTERNAL (`inter.broker.listener.name`) and CONTROL
(`control.plane.listener.name`), all PLAINTEXT on their own ports. With the request
logger at DEBUG (set at run time, IncrementalAlterConfigs on the broker-loggers resource)
the transcript says on which listener each request kind arrived: the controller's
LeaderAndIsr, UpdateMetadata and StopReplica (a topic created and deleted), the
followers' Fetch, and the controlled shutdown's request to the controller; and what a
Metadata request answers on each listener. Kafka's controller talks to its own broker
over the network too, Moldau's tells it in place: the transcript reads the second
broker, the one that is not the controller, for the controller's requests.
"""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from confluent_kafka.admin import AdminClient, NewTopic

from compat.lab import SHARED_PROPERTIES, KafkaBroker
from compat.transcript import Transcript
from moldau.client.blocking import BlockingConnection
from moldau.devcluster.brokers import BrokerProcess, free_port
from moldau.protocol.generated.api import ApiKey
from moldau.protocol.generated.incremental_alter_configs_request import (
    IncrementalAlterConfigsRequest,
)
from moldau.protocol.generated.metadata_request import MetadataRequest

TOPIC = "control-plane"
LISTENERS = ("CLIENT", "INTERNAL", "CONTROL")
READY_TIMEOUT = 90.0  # a Kafka JVM's start on a busy 2-core machine
PROPERTIES = {
    **{k: v for k, v in SHARED_PROPERTIES.items()
       if k not in ("authorizer.class.name", "super.users")},
    "auto.create.topics.enable": "false",
    "listener.security.protocol.map": ",".join(f"{name}:PLAINTEXT" for name in LISTENERS),
    "inter.broker.listener.name": "INTERNAL",
    "control.plane.listener.name": "CONTROL",
}
APIS: dict[int, str] = {ApiKey.FETCH: "Fetch", ApiKey.LEADER_AND_ISR: "LeaderAndIsr",
        ApiKey.STOP_REPLICA: "StopReplica", ApiKey.UPDATE_METADATA: "UpdateMetadata",
        ApiKey.CONTROLLED_SHUTDOWN: "ControlledShutdown"}
BROKER_LOGGER = 8  # IncrementalAlterConfigs' resource type of a broker's loggers
# Moldau's request log line ends "...;totalTime:...,listener:NAME,clientInformation:..."
_MOLDAU_LINE = re.compile(r"request_api_key=(\d+),.*,listener:(\w+),clientInformation")
_KAFKA_KEY = re.compile(r'"requestApiKey":(\d+)')
_KAFKA_LISTENER = re.compile(r'"listener":"(\w+)"')


@dataclass
class Member:
    role: str  # "first" (started first: the controller) or "second"
    broker: KafkaBroker | BrokerProcess
    ports: dict[str, int]  # listener -> port

    def start(self) -> None:
        if isinstance(self.broker, KafkaBroker):
            self.broker.start()
            self.broker.wait_ready(READY_TIMEOUT)
        else:
            self.broker.start(wait=READY_TIMEOUT)

    def stop(self) -> bool:
        """Stopped cleanly: exit code 0 (Moldau) or 143 (a JVM ending on SIGTERM)."""
        return self.broker.stop(60.0) in (0, 143, None)

    def requests(self) -> list[tuple[str, str]]:
        """(API name, listener) of each logged request of the kinds in APIS."""
        if isinstance(self.broker, KafkaBroker):  # JSON, in server.log (root appender)
            path, found = self.broker.log_dir / "server.log", []
            for line in _read(path):
                key = _KAFKA_KEY.search(line)
                if "Completed request:" not in line or key is None:
                    continue
                # the request's own fields may name listeners (UpdateMetadata's endpoints):
                # the connection's is the last "listener" of the line
                listeners = _KAFKA_LISTENER.findall(line)
                if listeners:
                    found.append((int(key[1]), listeners[-1]))
        else:
            path = Path(self.broker.log_dir) / "kafka-request.log"
            found = [(int(m[1]), m[2]) for m in map(_MOLDAU_LINE.search, _read(path))
                     if m is not None]
        return [(APIS[key], listener) for key, listener in found if key in APIS]


def _read(path: Path) -> list[str]:
    try:
        return path.read_text(errors="replace").splitlines()
    except FileNotFoundError:
        return []


def member(role: str, kind: str, broker_id: int, base: Path, zookeeper: str) -> Member:
    ports = {name: free_port() for name in LISTENERS}
    properties = {**PROPERTIES, "listeners": ",".join(
        f"{name}://127.0.0.1:{port}" for name, port in ports.items())}
    directory = base / f"{role}-{kind}"
    broker: KafkaBroker | BrokerProcess
    if kind == "kafka":
        broker = KafkaBroker(directory, zookeeper, broker_id, properties, port=ports["CLIENT"])
    else:
        broker = BrokerProcess(str(directory), broker_id, zookeeper, port=ports["CLIENT"],
                               properties=properties)
    return Member(role, broker, ports)


@contextmanager
def cluster(base: Path, zookeeper_root: str, kind: str) -> Iterator[tuple[Member, Member]]:
    chroot = f"{zookeeper_root}/control-plane-{kind}-{uuid.uuid4().hex[:8]}"
    members = (member("first", kind, 1, base, chroot), member("second", kind, 2, base, chroot))
    try:
        yield members
    finally:
        for m in members:
            m.stop()


def _wait(what: str, condition: Callable[[], bool], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(f"not within {timeout:.0f} s: {what}")
        time.sleep(0.25)


def request_logger_debug(m: Member) -> int:
    """kafka.request.logger at DEBUG on the broker; the answer's error code."""
    R = IncrementalAlterConfigsRequest
    request = R(validate_only=False, resources=[R.AlterConfigsResource(
        resource_type=BROKER_LOGGER, resource_name=str(m.broker.broker_id),
        configs=[R.AlterableConfig(name="kafka.request.logger", config_operation=0,
                                   value="DEBUG")])])
    with BlockingConnection("127.0.0.1", m.ports["CLIENT"], timeout=15) as conn:
        answer = conn.request(ApiKey.INCREMENTAL_ALTER_CONFIGS, 0, request)
    return int(answer.responses[0].error_code)


def metadata_line(via: Member, listener: str, members: tuple[Member, Member]) -> str:
    """What a Metadata request on one listener answers, brokers named by role and
    listener (the ports differ between runs)."""
    names = {("127.0.0.1", port): f"{m.role} {name}" for m in members
             for name, port in m.ports.items()}
    roles = {m.broker.broker_id: m.role for m in members}
    with BlockingConnection("127.0.0.1", via.ports[listener], timeout=15) as conn:
        answer = conn.request(ApiKey.METADATA, 1, MetadataRequest(topics=[]))
    brokers = sorted(names.get((b.host, b.port), f"{b.host}:{b.port}") for b in answer.brokers)
    return (f"Metadata on the {via.role} broker's {listener} listener: brokers "
            f"{', '.join(brokers)}; controller {roles.get(answer.controller_id, 'none')}")


def _isr_sizes(admin: AdminClient) -> list[int]:
    topic = admin.list_topics(TOPIC, timeout=5).topics.get(TOPIC)
    if topic is None or topic.error is not None:
        return []
    return [len(p.isrs) for p in topic.partitions.values()]


def run(transcript: Transcript, base: Path, zookeeper_root: str, kind: str) -> None:
    with cluster(base, zookeeper_root, kind) as (first, second):
        first.start()
        second.start()
        members = (first, second)
        for m in members:
            transcript.add(f"{m.role}: request logger DEBUG, error {request_logger_debug(m)}")
        admin = AdminClient({"bootstrap.servers": first.broker.bootstrap})
        new = NewTopic(TOPIC, 2, replica_assignment=[[1, 2], [2, 1]])
        admin.create_topics([new])[TOPIC].result(30)
        _wait("both partitions with both brokers in the ISR",
              lambda: _isr_sizes(admin) == [2, 2])
        transcript.add(f"{TOPIC} created: both partitions with both brokers in the ISR")
        for listener in LISTENERS:
            transcript.add(metadata_line(second, listener, members))
        admin.delete_topics([TOPIC])[TOPIC].result(30)
        second_admin = AdminClient({"bootstrap.servers": second.broker.bootstrap})
        _wait("the topic gone from the second broker's metadata",
              lambda: TOPIC not in second_admin.list_topics(timeout=5).topics)
        transcript.add(f"{TOPIC} deleted")
        time.sleep(1)  # the StopReplica answers logged
        arrived = sorted(set(second.requests()))
        for api in ("LeaderAndIsr", "UpdateMetadata", "StopReplica", "Fetch"):
            on = sorted(listener for name, listener in arrived if name == api)
            transcript.add(f"second broker: {api} arrived on {', '.join(on) or 'no listener'}")
        clean = second.stop()
        transcript.add(f"second stopped: {'cleanly' if clean else 'NOT cleanly'}")
        asked = sorted({listener for name, listener in first.requests()
                        if name == "ControlledShutdown"})
        transcript.add("first broker (the controller): ControlledShutdown arrived on "
                       f"{', '.join(asked) or 'no listener'}")
