"""The tools' admin client: Kafka requests over `moldau.client.blocking`, one connection
per broker, routed the way Kafka's AdminClient routes them (topic changes to the
controller, group requests to the group's coordinator)."""

from __future__ import annotations

import base64
import ssl
import time
from collections.abc import Callable
from typing import Any
from uuid import UUID

from moldau.client.blocking import BlockingConnection, SslHandshakeFailed
from moldau.client.sasl_authenticate import SaslAuthenticationFailed
from moldau.client.security import ClientConfigError, ClientSecurity, client_security
from moldau.errors import NotControllerError
from moldau.protocol._runtime import Message, Struct
from moldau.protocol.errors import ProtocolError
from moldau.protocol.generated.api import APIS
from moldau.protocol.generated.metadata_request import MetadataRequest
from moldau.protocol.generated.metadata_response import MetadataResponse
from moldau.tools.kafka_errors import KafkaToolError, check
from moldau.tools.options import ToolError
from moldau.tools.reconnect import Reconnects, setting_ms

_SPECS = {spec.name: spec for spec in APIS.values()}
NOT_CONTROLLER = NotControllerError.code
RETRIABLE = {5, 6, 7, 14, 15, 16, 41}  # leader/coordinator moving: ask again


def topic_id_text(value: UUID) -> str:
    """Kafka's Uuid.toString: URL-safe base64 of the 16 bytes, without padding."""
    return base64.urlsafe_b64encode(value.bytes).rstrip(b"=").decode("ascii")


def parse_servers(text: str) -> list[tuple[str, int]]:
    servers = []
    for item in filter(None, (s.strip() for s in text.split(","))):
        host, sep, port = item.rpartition(":")
        if not sep or not port.isdigit():
            raise ToolError(f"Invalid url in bootstrap.servers: {item}")
        servers.append((host.strip("[]"), int(port)))
    if not servers:
        raise ToolError("No resolvable bootstrap urls given in bootstrap.servers")
    return servers


def _security(config: dict[str, str]) -> ClientSecurity:
    """The TLS and SASL settings of a --command-config (moldau.client.security)."""
    try:
        return client_security(config)
    except ClientConfigError as exc:
        raise ToolError(str(exc)) from None


class SslAuthenticationError(KafkaToolError):
    """Kafka's SslAuthenticationException, which has no error code of its own."""

    def __init__(self, message: str) -> None:
        ToolError.__init__(self, message)
        self.code, self.name = -1, "SSL_AUTHENTICATION"
        self.exception_class = "org.apache.kafka.common.errors.SslAuthenticationException"


class NodeUnreachable(ToolError):
    """No connection to a broker could be opened (nothing was sent to it): Kafka's
    clients keep such a node's requests waiting rather than counting a retry; retriable
    is False for a refused TLS handshake, which they give up on at once."""

    def __init__(self, message: str, retriable: bool = True) -> None:
        super().__init__(message)
        self.retriable = retriable


def _retriable(exc: OSError) -> bool:
    """A failed connection worth another attempt; a TLS handshake the broker refused
    (its certificate not trusted, a protocol mismatch) is not, as in Kafka, where it is
    an SslAuthenticationException."""
    return not isinstance(exc, ssl.SSLError) or isinstance(
        exc, ssl.SSLEOFError | ssl.SSLZeroReturnError | ssl.SSLSyscallError)


def _reason(exc: OSError) -> str:
    return str(exc.strerror or exc) if not isinstance(exc, ssl.SSLError) else str(exc)


class Admin:
    """Blocking admin requests against a cluster reached through bootstrap servers.

    connect_wait_ms: how long opening a connection to a node may keep trying (after
    reconnect backoffs, each attempt within the connection setup timeout); by default
    default.api.timeout.ms, as Kafka's AdminClient waits for a node that long; 0 makes
    one attempt, for callers that keep their own deadline (the producer's
    delivery.timeout.ms)."""

    def __init__(self, bootstrap: str, config: dict[str, str] | None = None,
                 connect_wait_ms: int | None = None) -> None:
        self.config = dict(config or {})
        self.servers = parse_servers(bootstrap)
        self.timeout = int(self.config.get("request.timeout.ms", "30000")) / 1000
        self.client_id = self.config.get("client.id", "moldau-tools")
        self.security = _security(self.config)
        self.reconnects = Reconnects(self.config)
        self.connect_wait = (setting_ms(self.config, "default.api.timeout.ms", 60000)
                             if connect_wait_ms is None else connect_wait_ms) / 1000
        self._conns: dict[int, BlockingConnection] = {}
        self._bootstrap_conn: BlockingConnection | None = None
        self._nodes: dict[int, tuple[str, int]] = {}
        self._versions: dict[int, tuple[int, int]] | None = None

    def close(self) -> None:
        for conn in [*self._conns.values(), self._bootstrap_conn]:
            if conn is not None:
                conn.close()
        self._conns.clear()
        self._bootstrap_conn = None

    def __enter__(self) -> Admin:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    # connections ---------------------------------------------------------------------

    def _open(self, host: str, port: int) -> BlockingConnection:
        """One attempt at a connection, authenticated when the config asks for SASL,
        within the address's connection setup timeout; a refused authentication ends
        the tool with the broker's message (Kafka's clients neither retry it nor try
        another broker with credentials one has refused)."""
        address = (host, port)
        try:
            conn = BlockingConnection(host, port, timeout=self.timeout,
                                      client_id=self.client_id,
                                      ssl_context=self.security.ssl_context,
                                      sasl=self.security.sasl,
                                      setup_timeout=self.reconnects.setup_timeout(address))
        except SaslAuthenticationFailed as exc:
            raise KafkaToolError(exc.error_code, exc.message) from None
        except SslHandshakeFailed as exc:  # during SASL over TLS
            raise SslAuthenticationError(str(exc)) from None
        except OSError:
            self.reconnects.failed(address)
            raise
        self.reconnects.connected(address)
        return conn

    def _deadline(self) -> float:
        return time.monotonic() + self.connect_wait

    def bootstrap(self) -> BlockingConnection:
        """A connection to the first bootstrap server that answers, trying them in turn
        (each after its reconnect backoff) until connect_wait has passed."""
        if self._bootstrap_conn is not None:
            return self._bootstrap_conn
        deadline = self._deadline()
        failures: dict[tuple[str, int], str] = {}
        while True:
            soonest = min(self.reconnects.retry_at(s) for s in self.servers)
            if failures and soonest >= deadline:
                raise self._no_bootstrap(failures)
            time.sleep(max(soonest - time.monotonic(), 0))
            for host, port in self.servers:
                if self.reconnects.retry_at((host, port)) > time.monotonic():
                    continue
                try:
                    self._bootstrap_conn = self._open(host, port)
                    return self._bootstrap_conn
                except OSError as exc:
                    failures[(host, port)] = _reason(exc)
                    if not _retriable(exc):
                        raise self._no_bootstrap(failures, retriable=False) from None
            if time.monotonic() >= deadline:
                raise self._no_bootstrap(failures)

    def _no_bootstrap(self, failures: dict[tuple[str, int], str],
                      retriable: bool = True) -> NodeUnreachable:
        return NodeUnreachable("Could not connect to any bootstrap server: " + ", ".join(
            f"{host}:{port} ({reason})" for (host, port), reason in failures.items()),
            retriable)

    def node(self, node_id: int | None) -> BlockingConnection:
        """A connection to a broker by id (None: the bootstrap connection), tried again
        after each reconnect backoff until connect_wait has passed."""
        if node_id is None or node_id < 0:
            return self.bootstrap()
        if node_id not in self._conns:
            if node_id not in self._nodes:
                self.metadata([])
            if node_id not in self._nodes:
                raise ToolError(f"Broker {node_id} is not in the cluster metadata")
            host, port = self._nodes[node_id]
            address = (host, port)
            deadline = self._deadline()
            time.sleep(max(self.reconnects.retry_at(address) - time.monotonic(), 0))
            while True:
                try:
                    self._conns[node_id] = self._open(host, port)
                    break
                except OSError as exc:
                    if (not _retriable(exc) or time.monotonic() >= deadline
                            or not self.reconnects.wait_for(address, deadline)):
                        raise NodeUnreachable(
                            f"Could not connect to broker {node_id} at {host}:{port} "
                            f"({_reason(exc)})", _retriable(exc)) from None
        return self._conns[node_id]

    def node_address(self, node_id: int) -> tuple[str, int]:
        if node_id not in self._nodes:
            self.metadata([])
        return self._nodes[node_id]

    def call(self, name: str, version: int, node_id: int | None = None,
             **fields: Any) -> Any:  # Any: the named request's fields, its response's class
        """One request to a broker; the response body."""
        spec = _SPECS[name]
        conn = self.node(node_id)
        try:
            return conn.request(spec.key, version, spec.request(**fields))
        except SaslAuthenticationFailed as exc:  # re-authenticating before the request
            self._drop(node_id)
            raise KafkaToolError(exc.error_code, exc.message) from None
        except SslHandshakeFailed as exc:  # a refused client certificate, as Kafka words it
            self._drop(node_id)
            raise SslAuthenticationError(str(exc)) from None
        except (OSError, ConnectionError, ProtocolError) as exc:
            self._drop(node_id)
            raise ToolError(f"{name} request failed: {exc}") from None

    def drop(self, node_id: int | None) -> None:
        """Forget a broken connection; the next request opens a new one."""
        self._drop(node_id)

    def _drop(self, node_id: int | None) -> None:
        if node_id is None or node_id < 0:
            if self._bootstrap_conn is not None:
                self._bootstrap_conn.close()
            self._bootstrap_conn = None
        elif node_id in self._conns:
            self._conns.pop(node_id).close()

    def api_versions(self) -> dict[int, tuple[int, int]]:
        if self._versions is None:
            answer = self.call("ApiVersions", 3, client_software_name="moldau-tools",
                               client_software_version="0.1.0")
            check(answer.error_code)
            self._versions = {k.api_key: (k.min_version, k.max_version)
                              for k in answer.api_keys}
        return self._versions

    def supports(self, name: str, version: int = 0) -> bool:
        low, high = self.api_versions().get(_SPECS[name].key, (0, -1))
        return low <= version <= high

    # cluster metadata --------------------------------------------------------------

    def metadata(self, topics: list[str] | None = None,
                 auto_create: bool = False) -> MetadataResponse:
        """Metadata v12 (topic ids); None asks for every topic."""
        wanted = None if topics is None else [
            MetadataRequest.MetadataRequestTopic(name=t) for t in topics]
        answer = self.call("Metadata", 12, topics=wanted, allow_auto_topic_creation=auto_create)
        self._nodes = {b.node_id: (b.host, b.port) for b in answer.brokers}
        return answer

    def controller_id(self) -> int:
        return self.metadata([]).controller_id

    def to_controller(self, name: str, version: int,
                      **fields: Any) -> Any:  # Any: as call()
        """A request for the controller, retried while the controller moves."""
        deadline = time.monotonic() + self.timeout
        while True:
            answer = self.call(name, version, self.controller_id(), **fields)
            codes = {getattr(r, "error_code", 0) for r in _results(answer)}
            if NOT_CONTROLLER not in codes or time.monotonic() > deadline:
                return answer
            time.sleep(0.2)

    def wait_for(self, condition: Callable[[], object], what: str,
                 timeout: float | None = None) -> None:
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        while not condition():
            if time.monotonic() > deadline:
                raise ToolError(f"Timed out waiting for {what}")
            time.sleep(0.1)

    def find_coordinator(self, group: str) -> int:
        deadline = time.monotonic() + self.timeout
        while True:
            answer = self.call("FindCoordinator", 4, key_type=0, coordinator_keys=[group])
            found = answer.coordinators[0]
            if found.error_code not in RETRIABLE or time.monotonic() > deadline:
                check(found.error_code, found.error_message)
                self._nodes[found.node_id] = (found.host, found.port)
                return found.node_id
            time.sleep(0.2)


def _results(answer: Message) -> list[Struct]:
    """The per-resource results of a response, whichever field holds them."""
    for name in ("topics", "results", "responses"):
        value = getattr(answer, name, None)
        if isinstance(value, list):
            return value
    return []


def partition_leaders(admin: Admin, topics: list[str]) -> dict[tuple[str, int], int]:
    """{(topic, partition): leader id} for the topics that exist (-1: no leader)."""
    answer = admin.metadata(sorted(set(topics)))
    return {(t.name, p.partition_index): p.leader_id
            for t in answer.topics if t.error_code == 0 for p in t.partitions}


def list_offsets(admin: Admin, partitions: list[tuple[str, int]], timestamp: int,
                 isolation_level: int = 0) -> dict[tuple[str, int], int]:
    """ListOffsets from each partition's leader: {(topic, partition): offset}; -1 where the
    timestamp finds nothing (Kafka's "no offset for this time")."""
    from moldau.protocol.generated.list_offsets_request import ListOffsetsRequest

    leaders = partition_leaders(admin, [t for t, _ in partitions])
    by_leader: dict[int, dict[str, list[int]]] = {}
    for tp in partitions:
        if tp not in leaders:
            raise KafkaToolError(3, f"Topic partition {tp[0]}-{tp[1]} does not exist.")
        by_leader.setdefault(leaders[tp], {}).setdefault(tp[0], []).append(tp[1])
    result: dict[tuple[str, int], int] = {}
    for leader, topics in by_leader.items():
        if leader < 0:
            raise KafkaToolError(5)
        answer = admin.call("ListOffsets", 7, leader, replica_id=-1,
                            isolation_level=isolation_level, topics=[
            ListOffsetsRequest.ListOffsetsTopic(name=t, partitions=[
                ListOffsetsRequest.ListOffsetsPartition(
                    partition_index=p, current_leader_epoch=-1, timestamp=timestamp)
                for p in ps]) for t, ps in topics.items()])
        for t in answer.topics:
            for p in t.partitions:
                check(p.error_code)
                result[(t.name, p.partition_index)] = p.offset
    return result
