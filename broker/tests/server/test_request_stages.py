"""The stages every request passes in the dispatcher (server/requests.py), with a real
socket server on 127.0.0.1 where the connection's behaviour is the point: the
authentication gate, the quota stage's inputs, and KIP-219 throttling (the answer at
once with its throttle time, then the connection muted for that long)."""

from __future__ import annotations

import asyncio
import struct
import time
from dataclasses import dataclass
from typing import Any

import pytest

from moldau.protocol._runtime import Message
from moldau.protocol.errors import ProtocolError
from moldau.protocol.generated.api import ApiKey
from moldau.protocol.generated.api_versions_request import ApiVersionsRequest
from moldau.protocol.generated.api_versions_response import ApiVersionsResponse
from moldau.protocol.generated.metadata_request import MetadataRequest
from moldau.protocol.generated.metadata_response import MetadataResponse
from moldau.protocol.generated.request_header import RequestHeader
from moldau.protocol.headers import decode_response, encode_request
from moldau.server.network import Listener, Session, SocketServer
from moldau.server.quotas import NoQuotas, Quota
from moldau.server.requests import RequestContext, RequestDispatcher

THROTTLE_MS = 300


@dataclass
class Recorded:
    api_key: int
    quota: Quota
    handler_ns: int


class FixedThrottle(NoQuotas):
    """A quota recorder that throttles every NORMAL request by a fixed time."""

    def __init__(self, ms: int) -> None:
        self.ms = ms
        self.recorded: list[Recorded] = []

    def record(self, ctx: RequestContext, quota: Quota, request: Message,
               response: Message | None, handler_ns: int) -> int:
        self.recorded.append(Recorded(ctx.header.request_api_key, quota, handler_ns))
        return self.ms if quota is Quota.NORMAL else 0


def metadata(ctx: RequestContext, request: MetadataRequest) -> MetadataResponse:
    return MetadataResponse(brokers=[], topics=[])


def api_versions(ctx: RequestContext, request: ApiVersionsRequest) -> ApiVersionsResponse:
    return ApiVersionsResponse(error_code=0)


def dispatcher_with(quotas: Any = None) -> RequestDispatcher:
    dispatcher = RequestDispatcher(quotas=quotas)
    dispatcher.register(ApiKey.METADATA, metadata, 0, 12)
    dispatcher.register(ApiKey.API_VERSIONS, api_versions, 0, 3,
                        before_authentication=True)
    dispatcher.register(ApiKey.LEADER_AND_ISR, metadata, 0, 7, Quota.EXEMPT)
    return dispatcher


def request_bytes(key: int, version: int, body: Message, correlation_id: int) -> bytes:
    header = RequestHeader(request_api_key=key, request_api_version=version,
                           correlation_id=correlation_id, client_id="stages")
    return encode_request(header, body)


class FakeConnection:
    """What the dispatcher reads of a connection when no socket is involved."""

    def __init__(self, authenticated: bool = True) -> None:
        self.session = Session(authenticated=authenticated)
        self.listener = Listener("PLAINTEXT", "127.0.0.1", 9092, "PLAINTEXT")
        self.id = "test"
        self.response_meta = None
        self.authenticating = None  # not a SASL connection mid-authentication
        self.throttled: list[int] = []

    def throttle(self, ms: int) -> None:
        self.throttled.append(ms)


def test_before_authentication_only_the_allowed_apis_are_served() -> None:
    dispatcher = dispatcher_with()
    conn = FakeConnection(authenticated=False)
    versions = request_bytes(ApiKey.API_VERSIONS, 3, ApiVersionsRequest(
        client_software_name="t", client_software_version="1"), 1)
    parts = dispatcher(conn, bytearray(versions[4:]))  # type: ignore[arg-type]
    assert parts, "ApiVersions is answered before authentication"
    meta = request_bytes(ApiKey.METADATA, 9, MetadataRequest(topics=None), 2)
    with pytest.raises(ProtocolError, match="Metadata before the connection authenticated"):
        dispatcher(conn, bytearray(meta[4:]))  # type: ignore[arg-type]
    conn.session.authenticated = True  # what a completed SASL exchange sets
    assert dispatcher(conn, bytearray(meta[4:]))  # type: ignore[arg-type]


def test_the_quota_stage_sees_each_request_with_its_quota_class() -> None:
    quotas = FixedThrottle(THROTTLE_MS)
    dispatcher = dispatcher_with(quotas)
    conn = FakeConnection()
    meta = request_bytes(ApiKey.METADATA, 9, MetadataRequest(topics=None), 1)
    parts = dispatcher(conn, bytearray(meta[4:]))  # type: ignore[arg-type]
    inter_broker = request_bytes(ApiKey.LEADER_AND_ISR, 7, _leader_and_isr(), 2)
    dispatcher(conn, bytearray(inter_broker[4:]))  # type: ignore[arg-type]
    assert [(r.api_key, r.quota) for r in quotas.recorded] == [
        (ApiKey.METADATA, Quota.NORMAL), (ApiKey.LEADER_AND_ISR, Quota.EXEMPT)]
    assert all(r.handler_ns > 0 for r in quotas.recorded)
    assert conn.throttled == [THROTTLE_MS]  # the exempt request throttled nobody
    data = b"".join(bytes(p) for p in parts)  # type: ignore[union-attr]
    _, response = decode_response(data[4:], ApiKey.METADATA, 9)
    assert response.throttle_time_ms == THROTTLE_MS


def test_the_fast_produce_path_stays_on_with_a_quota_recorder() -> None:
    """It records the client quotas itself (handlers/produce_fast.py)."""
    assert dispatcher_with().plain_responses()
    assert dispatcher_with(FixedThrottle(0)).plain_responses()


def _leader_and_isr() -> Message:
    from moldau.protocol.generated.leader_and_isr_request import LeaderAndIsrRequest
    return LeaderAndIsrRequest(controller_id=1, controller_epoch=1, broker_epoch=1,
                               topic_states=[], live_leaders=[])


async def _read_response(reader: asyncio.StreamReader) -> tuple[float, bytes]:
    size = struct.unpack(">i", await reader.readexactly(4))[0]
    return time.monotonic(), await reader.readexactly(size)


def test_a_throttled_client_gets_its_answer_at_once_then_waits() -> None:
    """KIP-219 over a real socket: two pipelined requests; the first answer carries the
    throttle time and leaves at once, the second request is not read before it passed."""

    async def run() -> tuple[float, float, int]:
        server = SocketServer(dispatcher_with(FixedThrottle(THROTTLE_MS)))
        listener = Listener("PLAINTEXT", "127.0.0.1", 0, "PLAINTEXT")
        await server.start([listener])
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", listener.bound_port)
            writer.write(request_bytes(ApiKey.METADATA, 9, MetadataRequest(topics=None), 1)
                         + request_bytes(ApiKey.METADATA, 9, MetadataRequest(topics=None), 2))
            await writer.drain()
            first_at, first = await _read_response(reader)
            second_at, _ = await _read_response(reader)
            writer.close()
            _, response = decode_response(first, ApiKey.METADATA, 9)
            return first_at, second_at, response.throttle_time_ms
        finally:
            await server.stop()

    first_at, second_at, throttle_ms = asyncio.run(run())
    assert throttle_ms == THROTTLE_MS
    # lower bounds only: the mute must hold the second request back for the throttle time
    assert second_at - first_at >= THROTTLE_MS / 1000 * 0.9
