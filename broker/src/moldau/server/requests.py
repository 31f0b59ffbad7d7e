"""Request dispatch: from a frame to a handler and back to response parts (Kafka's
KafkaApis entry point).

Handlers are registered per API key with the version range Moldau serves, the quota the
API counts against and whether it may come before authentication (server/routes.py
reads both from the API table). A handler takes (RequestContext, request body) and
returns the response body, None when no response is due (Produce with acks=0), or an
awaitable of either when it has to wait.

Every request passes the same stages, in Kafka's order (docs/architecture.md):
1. header: decode it, check the version (ApiVersions answers an unknown one, KIP-511);
2. authentication: the frames of a SASL connection that has not authenticated go to its
   authenticator (sasl_authenticator.py) instead, which serves ApiVersions and the SASL
   exchange; any other request closes the connection;
3. handler: it authorizes each resource it names through the request context
   (`ctx.authorize`) and answers the denied ones with Kafka's errors;
4. quota: the recorder sees the request, the response and the request's loop time
   (decoding and handler; the encoding's is added after it) and decides the throttle
   time (server/quotas.py); while no client quota exists, the stage is skipped;
5. response: sent at once with `throttle_time_ms`, then the connection is muted for
   that long (KIP-219); the request log and the request metrics record it.
A handler's failure answers its request (error_responses.py): one bad request does not
cost the client its connection.
"""

from __future__ import annotations

import inspect
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from moldau.errors import KafkaError
from moldau.protocol._runtime import Message
from moldau.protocol.errors import ProtocolError, UnsupportedVersionError
from moldau.protocol.generated.api import APIS, ApiKey
from moldau.protocol.generated.request_header import RequestHeader
from moldau.protocol.headers import (
    decode_request,
    unsupported_api_versions_response,
)

from .authorization import AllowAll, Authorizer
from .error_responses import error_response
from .network import Connection
from .quotas import NoQuotas, Quota, QuotaRecorder
from .request_context import RequestContext
from .request_metrics import RequestMetrics
from .responses import Parts, encode_response_parts

request_log = logging.getLogger("kafka.request.logger")
log = logging.getLogger("kafka.server.KafkaApis")

# Any: each handler takes its own generated request class, and answers with a response, None
# or an awaitable of either
Handler = Callable[["RequestContext", Any], Any]
# the fast Produce path: (connection, frame, arrival ns) to parts, an awaitable of them, or None
FastPath = Callable[[Connection, bytearray, int], Parts | Awaitable[Parts] | None]


@dataclass(slots=True, frozen=True)
class Route:
    """Where a request of one API key goes, and what its stages need to know."""

    handler: Handler
    min_version: int
    max_version: int
    quota: Quota = Quota.NORMAL
    before_authentication: bool = False


class RequestDispatcher:
    """Routes requests to handlers through the stages of the module doc; callable as the
    SocketServer's request handler."""

    def __init__(self, authorizer: Authorizer | None = None,
                 quotas: QuotaRecorder | None = None) -> None:
        self.routes: dict[int, Route] = {}
        self.authorizer: Authorizer = authorizer or AllowAll()
        self.quotas: QuotaRecorder = quotas or NoQuotas()
        self._advertised: dict[int, tuple[int, int]] = {}
        self.metrics: RequestMetrics | None = None  # set by the broker
        # tried first for API key 0 (handlers/produce_fast.py): the parts, or an awaitable
        # of them (acks=all), when it answered the request; None: the general path does
        self.fast_produce: FastPath | None = None

    def register(self, api_key: int, handler: Handler, min_version: int, max_version: int,
                 quota: Quota = Quota.NORMAL, before_authentication: bool = False) -> None:
        spec = APIS[api_key]
        if not spec.min_version <= min_version <= max_version <= spec.max_version:
            raise ValueError(f"{spec.name} v{min_version}-{max_version} is outside the "
                             f"protocol's range v{spec.min_version}-{spec.max_version}")
        self.routes[api_key] = Route(handler, min_version, max_version, quota,
                                     before_authentication)
        self._advertised[api_key] = (min_version, max_version)

    def advertised_versions(self) -> dict[int, tuple[int, int]]:
        """What ApiVersions announces: exactly the registered handlers and ranges."""
        return dict(self._advertised)

    def plain_responses(self) -> bool:
        """Whether the fast Produce path may answer: no request details are due in
        kafka-request.log (it records the quotas itself, handlers/produce_fast.py)."""
        return not request_log.isEnabledFor(logging.DEBUG)

    def __call__(self, conn: Connection,
                 frame: bytearray) -> Parts | Awaitable[Parts | None] | None:
        received = time.monotonic_ns()
        authenticator = conn.authenticating
        if authenticator is not None:  # a SASL connection before (re)authentication
            return authenticator.receive(conn, frame, received)
        fast = self.fast_produce
        # API key 0, Produce (a frame too short for a key is the decoder's to refuse)
        if fast is not None and len(frame) > 1 and frame[0] == 0 and frame[1] == 0:
            parts = fast(conn, frame, received)
            if parts is not None:
                return parts
        try:
            header, body = decode_request(frame)
        except UnsupportedVersionError as exc:
            probe = getattr(exc, "header", None)
            if probe is not None and probe.request_api_key == ApiKey.API_VERSIONS:
                # a client newer than us probes with a higher version: answer v0 so it
                # can retry with one we know (KIP-511)
                return [unsupported_api_versions_response(probe.correlation_id,
                                                          self._advertised)]
            raise ProtocolError(str(exc)) from None
        return self.serve(conn, header, body, received, len(frame))

    def serve(self, conn: Connection, header: RequestHeader, body: Message,
              received: int, size: int = 0) -> Parts | Awaitable[Parts | None] | None:
        """The stages after the header's decoding (the SASL authenticator hands its
        ApiVersions request here); size: the request's bytes."""
        api_key = header.request_api_key
        version = header.request_api_version
        route = self.routes.get(api_key)
        if route is None or not route.min_version <= version <= route.max_version:
            if api_key == ApiKey.API_VERSIONS:
                return [unsupported_api_versions_response(header.correlation_id,
                                                          self._advertised)]
            name = APIS[api_key].name
            raise ProtocolError(f"{name} v{version} is not supported by this broker"
                                + ("" if route is None else
                                   f" (v{route.min_version}-{route.max_version})"))
        session = conn.session
        if not (session.authenticated or route.before_authentication):
            # Kafka's authenticator: before authentication only ApiVersions and the SASL
            # handshake; anything else is a client that skipped it, and loses the connection
            raise ProtocolError(f"{APIS[api_key].name} before the connection authenticated")
        if header.client_id and not session.client_id:
            session.client_id = header.client_id
        ctx = RequestContext(conn, header, version, received, self.authorizer, self.quotas,
                             size)
        started = time.monotonic_ns()
        try:
            result = route.handler(ctx, body)
        except ProtocolError:
            raise  # a request found malformed late: the connection goes, as for any other
        except Exception as exc:
            result = self._failed(ctx, body, exc)
        done = time.monotonic_ns()
        # a handler answers with a generated response (or None), or an awaitable of one
        if result is not None and not isinstance(result, Message) and inspect.isawaitable(result):
            return self._complete(ctx, route, body, result, started, done - started, done,
                                  started - received)
        # the request's loop time: its decoding (from `received`) and the handler's
        parts = self._respond(ctx, route, body, result, done - received)
        if self.metrics is not None:
            self._measure(ctx, body, started, done - started, 0, result, done)
        return parts

    async def _complete(self, ctx: RequestContext, route: Route, request: Message,
                        pending: Awaitable[Message | None], started: int, local: int,
                        waited: int, decoding: int) -> Parts | None:
        try:
            response = await pending
        except ProtocolError:
            raise
        except Exception as exc:
            response = self._failed(ctx, request, exc)
        done = time.monotonic_ns()
        # the loop time: decoding and the handler's part before it waited (the wait, in
        # purgatory, costs the loop nothing)
        parts = self._respond(ctx, route, request, response, decoding + local)
        if self.metrics is not None:
            self._measure(ctx, request, started, local, done - waited, response, done)
        return parts

    def _measure(self, ctx: RequestContext, request: Message, started: int, local: int,
                 remote: int, response: Message | None, done: int) -> None:
        """RequestMetrics; the times of sending finish when the socket server reports
        the response sent (Connection.response_meta)."""
        metrics = self.metrics
        assert metrics is not None
        meta = metrics.record(ctx.header.request_api_key, ctx.api_version, request,
                              ctx.received_ns, started, local, remote, response, done,
                              throttle_ms=ctx.throttle_ms)
        if response is None:
            metrics.unanswered(meta)
        else:
            ctx.conn.response_meta = meta

    def _failed(self, ctx: RequestContext, request: Message, exc: Exception) -> Message:
        """Kafka's handleError: a handler's failure answers its request (each part of it
        with the error, UNKNOWN_SERVER_ERROR unless it is a KafkaError) and the
        connection serves on. An acks=0 producer reads no answer: its connection closes,
        as Kafka closes it, so the client learns of the failure."""
        header = ctx.header
        if isinstance(exc, KafkaError):
            log.info("Error when handling request: clientId=%s, correlationId=%d, api=%s, "
                     "version=%d: %s", header.client_id, header.correlation_id,
                     APIS[header.request_api_key].name, ctx.api_version, exc)
        else:
            log.error("Error when handling request: clientId=%s, correlationId=%d, api=%s, "
                      "version=%d, body=%s", header.client_id, header.correlation_id,
                      APIS[header.request_api_key].name, ctx.api_version, _short(request),
                      exc_info=exc)
        if header.request_api_key == ApiKey.PRODUCE and getattr(request, "acks", -1) == 0:
            raise exc
        code = exc.code if isinstance(exc, KafkaError) else KafkaError.code
        return error_response(header.request_api_key, ctx.api_version, request, code)

    def _respond(self, ctx: RequestContext, route: Route, request: Message,
                 response: Message | None, loop_ns: int) -> Parts | None:
        """The quota and response stages: the throttle time goes into the response,
        which leaves at once, and the connection is muted for it (KIP-219); loop_ns:
        the request's loop time so far."""
        quotas = self.quotas
        recording = type(quotas) is not NoQuotas  # as cheap as it was without quotas
        if recording:
            throttle_ms = quotas.record(ctx, route.quota, request, response, loop_ns)
            if throttle_ms > 0:
                ctx.throttle_ms = throttle_ms
                if response is not None and hasattr(response, "throttle_time_ms"):
                    response.throttle_time_ms = throttle_ms
                ctx.conn.throttle(throttle_ms)
        after = ctx.after_quota
        if after is not None:
            after()
        if response is None:
            self._log(ctx, request, None)
            return None
        header = ctx.header
        encoding = time.monotonic_ns() if recording else 0
        parts = encode_response_parts(header.correlation_id, header.request_api_key,
                                      ctx.api_version, response)
        if recording:
            quotas.record_encoding(ctx, route.quota, request, time.monotonic_ns() - encoding)
        if request_log.isEnabledFor(logging.DEBUG):
            self._log(ctx, request, response)
        return parts

    def _log(self, ctx: RequestContext, request: Message, response: Message | None) -> None:
        if not request_log.isEnabledFor(logging.DEBUG):
            return
        header = ctx.header
        took_ms = (time.monotonic_ns() - ctx.received_ns) / 1e6
        request_log.debug(
            "Completed request:{requestHeader=%s, request=%s} response:%s from connection "
            "%s;totalTime:%.3f,securityProtocol:%s,principal:%s,listener:%s,clientInformation:"
            "ClientInformation(softwareName=%s, softwareVersion=%s)",
            header, _short(request), _short(response), ctx.conn.id, took_ms,
            ctx.session.security_protocol, ctx.session.principal, ctx.listener,
            ctx.session.software_name or "unknown", ctx.session.software_version or "unknown")


def _short(message: object, limit: int = 2000) -> str:
    text = repr(message)
    return text if len(text) <= limit else text[:limit] + "..."
