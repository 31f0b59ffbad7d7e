"""`control.plane.listener.name`: three brokers with a CLIENT listener (the tests'
clients), an INTERNAL one (inter-broker: replication, controlled shutdown) and a CONTROL
one (SSL, client certificates required) named by control.plane.listener.name. Every
broker logs each request it completes (kafka.request.logger at DEBUG) with the listener it
came in on, so the tests see where the controller's requests arrive."""

from __future__ import annotations

import re
import ssl
import uuid
from collections.abc import Iterator
from configparser import ConfigParser
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import pytest
from tls_material import TlsMaterial, make_tls_material

from moldau.client.blocking import BlockingConnection
from moldau.devcluster.brokers import BrokerProcess, free_port
from moldau.protocol.generated.api import ApiKey
from moldau.protocol.generated.metadata_request import MetadataRequest

from .conftest import CLUSTER_PROPERTIES, Cluster, running

LEADER_AND_ISR, STOP_REPLICA, UPDATE_METADATA, CONTROLLED_SHUTDOWN = 4, 5, 6, 7
CONTROLLER_APIS = {LEADER_AND_ISR, STOP_REPLICA, UPDATE_METADATA}
# the end of Kafka's request log line, as Moldau writes it (server/requests.py)
_LINE = re.compile(r"request_api_key=(\d+), request_api_version=\d+, correlation_id=\d+, "
                   r"client_id='([^']*)'.*;totalTime:[\d.]+,securityProtocol:(\w+),"
                   r"principal:.*?,listener:(\w+),clientInformation")


@dataclass(frozen=True)
class Logged:
    api_key: int
    client_id: str
    protocol: str
    listener: str


@dataclass
class Ports:
    internal: dict[int, int]
    control: dict[int, int]


def debug_request_log_config(directory: Path) -> str:
    """The bundled logging configuration with kafka.request.logger at DEBUG."""
    parser = ConfigParser(interpolation=None)
    parser.read_string(resources.files("moldau.server.logconf").joinpath(
        "logging.ini").read_text())
    parser["logger_request"]["level"] = "DEBUG"
    path = directory / "logging.ini"
    with open(path, "w") as fh:
        parser.write(fh)
    return str(path)


def requests_logged(broker: BrokerProcess) -> list[Logged]:
    try:
        text = (Path(broker.log_dir) / "kafka-request.log").read_text(errors="replace")
    except FileNotFoundError:
        return []
    return [Logged(int(m[1]), m[2], m[3], m[4]) for m in map(_LINE.search, text.splitlines())
            if m is not None]


def controller_requests(broker: BrokerProcess) -> list[Logged]:
    return [r for r in requests_logged(broker)
            if r.api_key in CONTROLLER_APIS and r.client_id.startswith("controller-")]


def controller_id(cluster: Cluster) -> int:
    with cluster.zookeeper() as zk:
        found = zk.get_controller_id()
    assert found is not None
    return int(found)


def metadata_brokers(port: int, context: ssl.SSLContext | None = None
                     ) -> tuple[dict[int, tuple[str, int]], int]:
    """Metadata v1 on one listener: {broker id: (host, port)} and the controller id."""
    with BlockingConnection("127.0.0.1", port, ssl_context=context) as conn:
        answer = conn.request(ApiKey.METADATA, 1, MetadataRequest(topics=[]))
    return {b.node_id: (b.host, b.port) for b in answer.brokers}, answer.controller_id


def client_context(tls: TlsMaterial) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=str(tls.ca_cert))
    context.load_cert_chain(str(tls.client_cert), str(tls.client_key))
    return context


def listener_properties(client: int, internal: int, control: int, tls: TlsMaterial
                        ) -> dict[str, str]:
    return {
        "listeners": f"CLIENT://127.0.0.1:{client},INTERNAL://127.0.0.1:{internal},"
                     f"CONTROL://127.0.0.1:{control}",
        "listener.security.protocol.map": "CLIENT:PLAINTEXT,INTERNAL:PLAINTEXT,CONTROL:SSL",
        "inter.broker.listener.name": "INTERNAL",
        "control.plane.listener.name": "CONTROL",
        **{f"listener.name.control.{key}": value
           for key, value in tls.server_settings("PEM", "required").items()},
    }


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> TlsMaterial:
    return make_tls_material(tmp_path_factory.mktemp("tls"))


@pytest.fixture(scope="module")
def control_cluster(tmp_path_factory: pytest.TempPathFactory, zk_ensemble: Any,
                    tls: TlsMaterial) -> Iterator[tuple[Cluster, Ports]]:
    connect = zk_ensemble.connect_string + f"/moldau-cp-{uuid.uuid4().hex[:12]}"
    log_config = debug_request_log_config(tmp_path_factory.mktemp("logconf"))
    brokers, ports = {}, Ports({}, {})
    for i in (1, 2, 3):
        client = free_port()
        ports.internal[i], ports.control[i] = free_port(), free_port()
        brokers[i] = BrokerProcess(
            str(tmp_path_factory.mktemp(f"cpbroker{i}")), i, connect, port=client,
            properties={**CLUSTER_PROPERTIES, **listener_properties(
                client, ports.internal[i], ports.control[i], tls)},
            env={"MOLDAU_LOG_CONFIG": log_config})
    with running(Cluster(brokers, connect)) as cluster:
        yield cluster, ports


def test_the_controller_talks_to_the_brokers_on_the_control_plane_listener(
        control_cluster: tuple[Cluster, Ports]) -> None:
    cluster, _ports = control_cluster
    cluster.create_topic("control-plane", partitions=3)  # leaders and full ISRs
    controller = controller_id(cluster)
    for broker_id, broker in cluster.brokers.items():
        seen = controller_requests(broker)
        if broker_id == controller:
            assert seen == []  # the controller's own broker is told in place
            continue
        apis = {r.api_key for r in seen}
        assert {LEADER_AND_ISR, UPDATE_METADATA} <= apis, (broker_id, seen)
        assert {(r.listener, r.protocol) for r in seen} == {("CONTROL", "SSL")}, seen
        # replication stays on the inter-broker listener
        fetches = {r.listener for r in requests_logged(broker) if r.api_key == 1
                   and r.client_id.startswith("broker-")}
        assert fetches <= {"INTERNAL"}, fetches


def test_clients_see_the_endpoints_of_the_listener_they_use(
        control_cluster: tuple[Cluster, Ports], tls: TlsMaterial) -> None:
    """As in Kafka: a Metadata answer names each broker's endpoint on the listener it
    came in on, CONTROL included (it serves every API, as a Kafka control plane does)."""
    cluster, ports = control_cluster
    controller = controller_id(cluster)
    for broker in cluster.brokers.values():
        assert metadata_brokers(broker.port) == (
            {i: ("127.0.0.1", b.port) for i, b in cluster.brokers.items()}, controller)
    assert metadata_brokers(ports.internal[1]) == (
        {i: ("127.0.0.1", p) for i, p in ports.internal.items()}, controller)
    assert metadata_brokers(ports.control[2], client_context(tls)) == (
        {i: ("127.0.0.1", p) for i, p in ports.control.items()}, controller)


def test_leadership_moves_with_controlled_shutdown_and_restart(
        control_cluster: tuple[Cluster, Ports]) -> None:
    """A broker's controlled shutdown asks the controller over the inter-broker
    listener (Kafka's KafkaServer.controlledShutdown); the leaders move off it, and when
    it returns the controller's requests reach it on CONTROL again."""
    cluster, _ports = control_cluster
    topic = cluster.create_topic("control-moves", partitions=3)
    controller = controller_id(cluster)
    leaders = {i: p.leader for i, p in cluster.partitions(topic).items()}
    mover = next(b for b in sorted(set(leaders.values())) if b != controller)
    broker = cluster.brokers[mover]
    assert broker.stop() == 0
    cluster.wait_for(lambda: all(p.leader != mover
                                 for p in cluster.partitions(topic, via=controller).values()),
                     30, f"the leaders moved off broker {mover}")
    asked = [r for r in requests_logged(cluster.brokers[controller])
             if r.api_key == CONTROLLED_SHUTDOWN]
    assert asked and {r.listener for r in asked} == {"INTERNAL"}, asked
    before = len(controller_requests(broker))
    cluster.start(mover)
    cluster.wait_for(lambda: all(len(p.isrs) == 3 for p in cluster.partitions(topic).values()),
                     30, f"broker {mover} back in every ISR")
    after = controller_requests(broker)[before:]
    assert {LEADER_AND_ISR, UPDATE_METADATA} <= {r.api_key for r in after}, after
    assert {r.listener for r in after} == {"CONTROL"}


def test_a_broker_registered_without_the_control_listener_is_not_live(
        control_cluster: tuple[Cluster, Ports], tmp_path_factory: pytest.TempPathFactory
        ) -> None:
    """A mixed roll gone wrong: broker 4 registers without a CONTROL endpoint. The
    controller cannot reach it; as in Kafka it is left out of the live brokers (an error
    in controller.log names the missing listener) and gets no controller requests."""
    cluster, _ports = control_cluster
    client, internal = free_port(), free_port()
    stray = BrokerProcess(
        str(tmp_path_factory.mktemp("cpbroker4")), 4, cluster.zk_connect, port=client,
        properties={**CLUSTER_PROPERTIES,
                    "listeners": f"CLIENT://127.0.0.1:{client},INTERNAL://127.0.0.1:{internal}",
                    "listener.security.protocol.map": "CLIENT:PLAINTEXT,INTERNAL:PLAINTEXT",
                    "inter.broker.listener.name": "INTERNAL"})
    stray.start(wait=None)
    try:
        controller = cluster.brokers[controller_id(cluster)]
        expected = ("End point with listener name CONTROL not found for broker 4 "
                    "(it registered CLIENT,INTERNAL)")

        def logged() -> bool:
            path = Path(controller.log_dir) / "controller.log"
            return expected in path.read_text(errors="replace")

        cluster.wait_for(logged, 30, "the controller's error about broker 4")
        with cluster.zookeeper() as zk:
            assert zk.exists("/brokers/ids/4")  # registered: a live ZooKeeper session
        for broker in cluster.brokers.values():
            assert 4 not in metadata_brokers(broker.port)[0]
        assert controller_requests(stray) == []
    finally:
        assert stray.stop() == 0
