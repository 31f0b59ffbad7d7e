"""Kafka's connection limits on a real broker process (issue 37): a flood from one
address over `max.connections.per.ip` is refused while another client's every request
succeeds; `listener.name.<l>.max.connections` and `max.connections` hold new connections
in the backlog (the inter-broker listener still serves, and the least recently used
connection of the others is closed when a lowered limit is exceeded); a creation rate
delays accepts without losing any; an address over its `connection_creation_rate` (set
Kafka's way in `/config/ips/<ip>`) has the excess connection closed; bad values are
refused with Kafka's messages, at startup and as dynamic updates, and nothing is
written. Clients come from distinct loopback addresses (127.0.0.x)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from metrics.jmx import broker_beans

from moldau.cluster.zk_client import KafkaZkClient
from moldau.devcluster.brokers import BrokerProcess, free_port

from .raw import server_log, wait_until
from .test_admin_configs import BROKER, DELETE, INVALID_REQUEST, SET, alter, describe
from .test_socket_settings import answers, open_from

PER_IP = 4
QUIET_S = 0.5  # how long a held-back connection is watched for an answer it must not get


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory, zk_ensemble) -> Iterator[BrokerProcess]:
    inter_broker, client, other, metrics = free_port(), free_port(), free_port(), free_port()
    process = BrokerProcess(
        str(tmp_path_factory.mktemp("broker")), 1,
        f"{zk_ensemble.connect_string}/moldau-{uuid.uuid4().hex[:12]}", port=inter_broker,
        properties={
            "listeners": f"PLAINTEXT://127.0.0.1:{inter_broker},CLIENT://127.0.0.1:{client},"
                         f"OTHER://127.0.0.1:{other}",
            "listener.security.protocol.map":
                "PLAINTEXT:PLAINTEXT,CLIENT:PLAINTEXT,OTHER:PLAINTEXT",
            "inter.broker.listener.name": "PLAINTEXT",
            "max.connections.per.ip": str(PER_IP),
            "listener.name.other.max.connections": "1",
            # a listener's own limit defaults to max.connections (as Kafka's prefix
            # fallback gives it): the inter-broker listener gets room of its own
            "listener.name.plaintext.max.connections": "100",
            "quota.window.num": "2",
            "quota.window.size.seconds": "1",
            "num.partitions": "1",
        }, env={"MOLDAU_METRICS_PORT": str(metrics)})
    process.start()
    process.client_port, process.other_port = client, other  # type: ignore[attr-defined]
    yield process
    assert "Traceback" not in server_log(process)
    assert process.stop() == 0, process.tail()


def client_port(broker: BrokerProcess) -> int:
    return broker.client_port  # type: ignore[attr-defined,no-any-return]


def send_request(sock: socket.socket) -> None:
    from moldau.protocol.generated.api_versions_request import ApiVersionsRequest
    from moldau.protocol.generated.request_header import RequestHeader
    from moldau.protocol.headers import encode_request

    header = RequestHeader(request_api_key=18, request_api_version=3, correlation_id=1,
                           client_id="connection-limits")
    sock.sendall(encode_request(header, ApiVersionsRequest(
        client_software_name="t", client_software_version="1")))


def silent(sock: socket.socket, seconds: float = QUIET_S) -> bool:
    """No answer and no close within `seconds` (the connection waits in the backlog)."""
    sock.settimeout(seconds)
    try:
        sock.recv(1)
    except TimeoutError:
        return True
    except OSError:
        return False
    finally:
        sock.settimeout(5)
    return False


def answered(sock: socket.socket) -> bool:
    """The answer to the request already sent arrives (False: the broker closed it)."""
    try:
        size = sock.recv(4)
        want, got = int.from_bytes(size, "big"), 0
        while len(size) == 4 and got < want:
            chunk = sock.recv(want - got)
            if not chunk:
                return False
            got += len(chunk)
        return len(size) == 4
    except OSError:
        return False


def beans(broker: BrokerProcess, query: str) -> list[dict[str, Any]]:
    return list(broker_beans(broker, query).values())


def connection_count(broker: BrokerProcess, listener: str) -> int:
    (bean,) = beans(broker, "kafka.server:type=socket-server-metrics,"
                            f"listener={listener},networkProcessor=0")
    return int(bean["connection-count"])


def blocked_count(broker: BrokerProcess, listener: str) -> float:
    (bean,) = beans(broker, "kafka.network:type=Acceptor,name=AcceptorBlockedPercent,"
                            f"listener={listener}")
    return float(bean["Count"])


def test_a_flood_from_one_address_is_refused_while_other_clients_are_served(
        broker: BrokerProcess) -> None:
    from confluent_kafka import Producer

    bootstrap = f"127.0.0.1:{client_port(broker)}"
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all",
                         "message.timeout.ms": 20000, "linger.ms": 0})
    errors: list[Any] = []
    flood = []
    try:
        for i in range(60):
            flood.append(open_from("127.0.0.2", client_port(broker)))
            producer.produce("flooded", b"record %d" % i,
                             on_delivery=lambda err, _msg: errors.append(err))
            producer.poll(0)
        assert producer.flush(30) == 0
        assert errors == [None] * 60  # every request of the other client succeeded
        assert sum(answers(s) for s in flood) == PER_IP
    finally:
        for sock in flood:
            sock.close()
    assert wait_until(lambda: "Rejected connection from /127.0.0.2, address already has the "
                      f"configured maximum of {PER_IP} connections." in server_log(broker))


def test_a_listener_limit_holds_new_connections_in_the_backlog(broker: BrokerProcess) -> None:
    port = broker.other_port  # type: ignore[attr-defined]
    with open_from("127.0.0.3", port) as first:
        assert answers(first)
        blocked_before = blocked_count(broker, "OTHER")
        waiting = open_from("127.0.0.3", port)  # the kernel accepts it into the backlog
        send_request(waiting)
        assert silent(waiting)
        with open_from("127.0.0.3", client_port(broker)) as elsewhere:
            assert answers(elsewhere)  # the other listeners are not held
    with waiting:
        assert answered(waiting)  # served once the first closed
    assert wait_until(lambda: blocked_count(broker, "OTHER") > blocked_before)


def test_max_connections_changed_dynamically_holds_and_closes(broker: BrokerProcess) -> None:
    port = client_port(broker)
    with open_from("127.0.0.4", broker.port) as replica, \
            open_from("127.0.0.4", port) as first, open_from("127.0.0.4", port) as second:
        assert answers(replica) and answers(first) and answers(second)
        assert alter(broker, BROKER, "", [("max.connections", SET, "1")]) == (0, None)
        # the inter-broker connection fills the limit alone: the other listeners'
        # connections are closed (least recently used first), it is never
        assert wait_until(lambda: connection_count(broker, "CLIENT") == 0)
        assert not answers(first) and not answers(second)
        assert answers(replica)
        waiting = open_from("127.0.0.4", port)
        send_request(waiting)
        assert silent(waiting)  # held in the backlog
        # the inter-broker listener still takes new connections
        assert describe(broker, BROKER, "", ["max.connections"])["max.connections"].value == "1"
        assert alter(broker, BROKER, "", [("max.connections", DELETE, None)]) == (0, None)
        with waiting:
            assert answered(waiting)  # the raised limit lets it in


def test_a_creation_rate_delays_accepts_and_loses_none(broker: BrokerProcess) -> None:
    key = "listener.name.client.max.connection.creation.rate"
    start = len(server_log(broker))
    assert alter(broker, BROKER, "", [(key, SET, "2")]) == (0, None)
    port = client_port(broker)
    try:
        assert wait_until(lambda: f"{key}=2" in server_log(broker)[start:])
        blocked_before = blocked_count(broker, "CLIENT")
        socks = [open_from("127.0.0.6", port) for _ in range(4)]
        for sock in socks:
            send_request(sock)
        assert all(answered(s) for s in socks)  # delayed, not refused
        for sock in socks:
            sock.close()
        assert wait_until(lambda: blocked_count(broker, "CLIENT") > blocked_before)
        (bean,) = beans(broker, "kafka.server:type=socket-server-metrics,listener=CLIENT")
        assert float(bean["connection-accept-throttle-time"]) > 0
    finally:
        assert alter(broker, BROKER, "", [(key, DELETE, None)]) == (0, None)


def test_an_address_over_its_connection_creation_rate_is_closed(
        broker: BrokerProcess) -> None:
    zk = KafkaZkClient(broker.zookeeper_connect.split("/", 1)[0],
                       "/" + broker.zookeeper_connect.split("/", 1)[1])
    zk.start()
    start = len(server_log(broker))
    try:
        zk.set_entity_config("ips", "127.0.0.7", {"connection_creation_rate": "1"})
        assert wait_until(lambda: "Connection creation rate of ip 127.0.0.7"
                          in server_log(broker)[start:])
        port = client_port(broker)
        with open_from("127.0.0.7", port) as first, open_from("127.0.0.7", port) as over, \
                open_from("127.0.0.8", port) as other:
            assert answers(first) and answers(other)
            send_request(over)
            assert not answered(over)  # held for the throttle time, then closed
            assert answers(first)
        (bean,) = beans(broker, "kafka.server:type=socket-server-metrics,ip=127.0.0.7")
        assert "connection-accept-rate" in bean
    finally:
        zk.set_entity_config("ips", "127.0.0.7", {})
        zk.close()


@pytest.mark.parametrize(("name", "value", "message"), [
    ("max.connections", "-1",
     "Invalid value -1 for configuration max.connections: Value must be at least 0"),
    ("max.connection.creation.rate", "ten",
     "Invalid value ten for configuration max.connection.creation.rate: Not a number of "
     "type INT"),
    ("listener.name.client.max.connections", "1.5",
     "Invalid value 1.5 for configuration max.connections: Not a number of type INT"),
    # zero passes the key's own check but not the listeners' (ListenerConnectionQuota)
    ("listener.name.client.max.connections", "0", "Invalid dynamic configuration"),
    ("max.connection.creation.rate", "0", "Invalid dynamic configuration"),
])
def test_bad_dynamic_values_are_refused_and_nothing_is_written(
        broker: BrokerProcess, name: str, value: str, message: str) -> None:
    for entity in ("", "1"):
        assert alter(broker, BROKER, entity, [(name, SET, value)]) == (INVALID_REQUEST,
                                                                        message)
    entries = describe(broker, BROKER, "1", [name])
    assert name not in entries or entries[name].config_source not in (2, 3)


def test_a_bad_value_stops_startup(tmp_path: Path) -> None:
    config = tmp_path / "server.properties"
    config.write_text("zookeeper.connect=127.0.0.1:1\n"
                      f"log.dirs={tmp_path / 'data'}\n"
                      "listener.name.plaintext.max.connection.creation.rate=-5\n")
    done = subprocess.run([sys.executable, "-m", "moldau.server.main", str(config)],
                          capture_output=True, text=True, timeout=60, cwd=tmp_path,
                          env={**os.environ, "LOG_DIR": str(tmp_path / "logs")})
    assert done.returncode == 1
    assert ("Invalid value -5 for configuration "
            "listener.name.plaintext.max.connection.creation.rate: Value must be at least 0"
            ) in done.stderr
