"""Kafka's socket server settings on a real broker: the listen backlog and socket buffer
sizes the kernel reports (`ss`), the per-address connection quotas
(`max.connections.per.ip` and its overrides; `max.connections` and the creation rates
are in test_connection_limits.py), and idle connections closed after
`connections.max.idle.ms`. Clients come from distinct loopback
addresses (127.0.0.x), so each quota is hit on its own."""

from __future__ import annotations

import contextlib
import re
import socket
import subprocess
import time
import uuid
from collections.abc import Iterator

import pytest

from moldau.devcluster.brokers import BrokerProcess, free_port
from moldau.protocol.generated.api_versions_request import ApiVersionsRequest
from moldau.protocol.generated.request_header import RequestHeader
from moldau.protocol.headers import encode_request

from .raw import server_log, wait_until

SEND_BUFFER, RECEIVE_BUFFER, BACKLOG = 65536, 131072, 77
PER_IP, IDLE_MS = 3, 1500


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory, zk_ensemble) -> Iterator[BrokerProcess]:
    inter_broker, client = free_port(), free_port()
    process = BrokerProcess(
        str(tmp_path_factory.mktemp("broker")), 1,
        f"{zk_ensemble.connect_string}/moldau-{uuid.uuid4().hex[:12]}", port=inter_broker,
        properties={
            "listeners": f"PLAINTEXT://127.0.0.1:{inter_broker},CLIENT://127.0.0.1:{client}",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CLIENT:PLAINTEXT",
            "inter.broker.listener.name": "PLAINTEXT",
            "socket.send.buffer.bytes": str(SEND_BUFFER),
            "socket.receive.buffer.bytes": str(RECEIVE_BUFFER),
            "socket.listen.backlog.size": str(BACKLOG),
            "connections.max.idle.ms": str(IDLE_MS),
            "max.connections.per.ip": str(PER_IP),
            "max.connections.per.ip.overrides": "127.0.0.3:1",
        })
    process.start()
    process.client_port = client  # type: ignore[attr-defined]
    yield process
    assert "Traceback" not in server_log(process)
    assert process.stop() == 0, process.tail()


def open_from(source: str, port: int) -> socket.socket:
    return socket.create_connection(("127.0.0.1", port), timeout=5, source_address=(source, 0))


def answers(sock: socket.socket) -> bool:
    """Whether the broker answers an ApiVersions request on sock."""
    header = RequestHeader(request_api_key=18, request_api_version=3, correlation_id=7,
                           client_id="socket-settings")
    try:
        sock.sendall(encode_request(header, ApiVersionsRequest(
            client_software_name="t", client_software_version="1")))
        size = sock.recv(4)
        if len(size) < 4:
            return False
        want, got = int.from_bytes(size, "big"), 0
        while got < want:
            chunk = sock.recv(want - got)
            if not chunk:
                return False
            got += len(chunk)
        return True
    except OSError:  # reset by the broker
        return False


@contextlib.contextmanager
def connections(source: str, port: int, count: int) -> Iterator[list[socket.socket]]:
    socks = [open_from(source, port) for _ in range(count)]
    try:
        yield socks
    finally:
        for sock in socks:
            sock.close()
        time.sleep(0.3)  # the broker notices the closes before the next test counts


def ss(*args: str) -> str:
    return subprocess.run(["ss", "-H", *args], capture_output=True, text=True,
                          check=True).stdout


def test_listen_backlog_and_buffer_sizes(broker: BrokerProcess) -> None:
    port = broker.client_port  # type: ignore[attr-defined]
    listening = ss("-ltn", f"sport = :{port}").split()
    assert int(listening[2]) == BACKLOG  # Send-Q of a listening socket: its backlog
    with connections("127.0.0.2", port, 1) as (sock,):
        assert answers(sock)
        local = sock.getsockname()[1]
        line = ss("-tmn", "state", "established", f"( sport = :{port} and dport = :{local} )")
        memory = dict(re.findall(r"\b(rb|tb)(\d+)", line))
        # the kernel doubles what SO_RCVBUF/SO_SNDBUF ask for (bookkeeping overhead)
        assert int(memory["rb"]) == 2 * RECEIVE_BUFFER, line
        assert int(memory["tb"]) == 2 * SEND_BUFFER, line


def test_max_connections_per_ip(broker: BrokerProcess) -> None:
    port = broker.client_port  # type: ignore[attr-defined]
    with connections("127.0.0.5", port, PER_IP + 1) as socks:
        assert [answers(s) for s in socks] == [True] * PER_IP + [False]
        assert wait_until(lambda: "Rejected connection from /127.0.0.5, address already has "
                          f"the configured maximum of {PER_IP} connections."
                          in server_log(broker))
        socks[0].close()
        time.sleep(0.3)
        with connections("127.0.0.5", port, 1) as (again,):
            assert answers(again)  # a slot freed by a close is taken again
    # an override names its own limit
    with connections("127.0.0.3", port, 2) as socks:
        assert [answers(s) for s in socks] == [True, False]


def test_idle_connections_are_closed(broker: BrokerProcess) -> None:
    port = broker.client_port  # type: ignore[attr-defined]
    with connections("127.0.0.9", port, 2) as (idle, busy):
        assert answers(idle) and answers(busy)
        deadline = time.monotonic() + IDLE_MS / 1000 * 2.5
        while time.monotonic() < deadline:
            assert answers(busy)  # traffic keeps a connection open
            time.sleep(0.3)
        idle.settimeout(5)
        with contextlib.suppress(ConnectionResetError):
            assert idle.recv(1) == b""  # closed by the broker
        assert answers(busy)


def test_a_dynamic_override_applies_without_a_restart(broker: BrokerProcess) -> None:
    from confluent_kafka.admin import (
        AdminClient,
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
        ResourceType,
    )

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    resource = ConfigResource(ResourceType.BROKER, "1", incremental_configs=[ConfigEntry(
        "max.connections.per.ip.overrides", "127.0.0.4:2",
        incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([resource])[resource].result(30)
    port = broker.client_port  # type: ignore[attr-defined]

    def refused_third() -> bool:
        with connections("127.0.0.4", port, 3) as socks:
            return [answers(s) for s in socks] == [True, True, False]

    assert wait_until(refused_third, 10)  # /config/changes reaches the broker
