"""The quota stage of the request path: what a request counts against, and the recorder
the dispatcher asks after each handler for the throttle time (Kafka's ClientQuotaManager
family and KIP-219).

Kafka answers a client over its quota at once, with the throttle time in the response,
and then mutes the connection for that long: the client backs off and the broker spends
nothing on it meanwhile. The dispatcher does both (server/requests.py); the recorder only
measures and decides.

`NoQuotas` is the recorder while no client quota is configured anywhere: the dispatcher
tests `type(self.quotas) is NoQuotas` to skip the stage, and the fast Produce path runs.
`ClientQuotas` measures once some quota exists; `install_client_quotas` swaps the two as
the quota configs change, so a broker without quotas pays nothing for them.

What a request counts, as Kafka counts it:
- Produce: the request's bytes against `producer_byte_rate`; its loop time against
  `request_percentage`, except with acks=0.
- Fetch from a consumer: the response's bytes against `consumer_byte_rate` (a throttled
  fetch answers with no records and its bytes are taken back out); its loop time. A
  follower's fetch is exempt.
- CreateTopics, CreatePartitions, DeleteTopics: partitions against
  `controller_mutation_rate` (handlers/topics.py asks `mutation_quota`); loop time.
- Inter-broker APIs: loop time in `exempt-request-time` only, never throttled.
- Every other API: its loop time.

`request_percentage` on a single-event-loop broker: the loop time a connection's requests
take (decoding, the handler's own work, encoding the response; not the time a request
waits in purgatory, which costs the loop nothing), as a percentage of one second per
second, so 100 is the whole loop. Kafka measures request handler and network thread time
the same way, 100 being one thread.
"""

from __future__ import annotations

import enum
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from moldau.protocol.generated.api import ApiKey

from .client_quota_configs import (
    CONSUMER_BYTE_RATE,
    PRODUCER_BYTE_RATE,
    REQUEST_PERCENTAGE,
    ClientQuotaConfigs,
)
from .quota_managers import (
    SERVER,
    UNBOUNDED_MUTATION_QUOTA,
    ClientQuotaManager,
    ControllerMutationQuotaManager,
    MutationQuota,
    merge_beans,
    principal_name,
)
from .rate_sensors import Rate, WindowConfig

if TYPE_CHECKING:
    from moldau.protocol._runtime import Message
    from moldau.protocol.generated.fetch_request import FetchRequest
    from moldau.protocol.generated.fetch_response import FetchResponse
    from moldau.protocol.generated.request_header import RequestHeader

    from .session import Session

# loop nanoseconds as percent-seconds: a rate of them per second is a percentage
NS_TO_PERCENT = 100.0 / 1e9
PRODUCE = ApiKey.PRODUCE.value
FETCH = ApiKey.FETCH.value
# what a fetch response costs besides its records, for its byte count (an estimate:
# the response is sized before it is encoded, as Kafka sizes it)
_FETCH_RESPONSE_BYTES = 20
_FETCH_TOPIC_BYTES = 30
_FETCH_PARTITION_BYTES = 50


class RequestContext(Protocol):
    """What the quota stage reads of a request's context (request_context.RequestContext,
    which holds the recorder: a Protocol, so that this module does not import it back)."""

    header: RequestHeader
    api_version: int
    request_size: int
    mutation_quota: MutationQuota | None

    @property
    def session(self) -> Session: ...

    @property
    def client_id(self) -> str: ...


class Quota(enum.Enum):
    """Which quota a request counts against."""

    NORMAL = "normal"  # request time (and produce/fetch bytes) of the client
    EXEMPT = "exempt"  # inter-broker: recorded as exempt-request-time, never throttled
    CONTROLLER_MUTATION = "controller mutation"  # partitions created or deleted


class QuotaRecorder(Protocol):
    def record(self, ctx: RequestContext, quota: Quota, request: Message,
               response: Message | None, handler_ns: int) -> int:
        """Record a request the handler has answered (its loop time so far in ns: decoding
        and the handler's own work; the bytes are in the request and response) and
        return the throttle time in ms, 0 when the client is within its quotas."""
        ...

    def record_encoding(self, ctx: RequestContext, quota: Quota, request: Message,
                        ns: int) -> None:
        """The loop time the response's encoding took (Kafka records the network thread's
        time after the response, without a throttle decision)."""
        ...

    def fetch_max_bytes(self, ctx: RequestContext) -> float:
        """What a consumer's fetch may return at most: its quota times the measured span
        (infinite without a quota)."""
        ...

    def mutation_quota(self, ctx: RequestContext, strict: bool) -> MutationQuota:
        """The controller mutation quota of a CreateTopics, CreatePartitions or
        DeleteTopics request (strict: refuses with 89) or of an auto-creation."""
        ...


class NoQuotas:
    """No quota configured anywhere: nothing to record, nobody throttled."""

    def record(self, ctx: RequestContext, quota: Quota, request: Message,
               response: Message | None, handler_ns: int) -> int:
        return 0

    def record_encoding(self, ctx: RequestContext, quota: Quota, request: Message,
                        ns: int) -> None:
        return None

    def fetch_max_bytes(self, ctx: RequestContext) -> float:
        return float("inf")

    def mutation_quota(self, ctx: RequestContext, strict: bool) -> MutationQuota:
        return UNBOUNDED_MUTATION_QUOTA


NO_QUOTAS = NoQuotas()


def follower_fetch(request: FetchRequest, version: int) -> bool:
    replica_id = request.replica_id if version <= 14 else request.replica_state.replica_id
    return replica_id >= 0


def fetch_response_bytes(response: FetchResponse) -> int:
    """A fetch response's size: its records exactly, the rest estimated."""
    size = _FETCH_RESPONSE_BYTES
    for topic in response.responses:
        size += _FETCH_TOPIC_BYTES + len(topic.topic or "")
        for partition in topic.partitions:
            records = partition.records
            size += _FETCH_PARTITION_BYTES + (len(records) if records is not None else 0)
    return size


def _monotonic_ms() -> float:
    return time.monotonic() * 1000.0


class ClientQuotas:
    """The recorder once some client quota exists (see the module doc)."""

    def __init__(self, configs: ClientQuotaConfigs, window: WindowConfig,
                 controller_window: WindowConfig,
                 clock_ms: Callable[[], float] = _monotonic_ms) -> None:
        self.configs = configs
        self.clock_ms = clock_ms
        self.produce = ClientQuotaManager("Produce", PRODUCER_BYTE_RATE, "byte-rate",
                                          configs, window, clock_ms)
        self.fetch = ClientQuotaManager("Fetch", CONSUMER_BYTE_RATE, "byte-rate",
                                        configs, window, clock_ms)
        # a request quota's throttle is at most one window (ClientRequestQuotaManager)
        self.request = ClientQuotaManager("Request", REQUEST_PERCENTAGE, "request-time",
                                          configs, window, clock_ms,
                                          max_throttle_ms=window.window_ms)
        self.mutation = ControllerMutationQuotaManager(configs, controller_window, clock_ms)
        self.exempt = Rate(window)  # exempt-request-time
        self.active = False
        self.changed()

    def changed(self) -> None:
        """The quota configs changed: lookups start afresh."""
        for manager in (self.produce, self.fetch, self.request, self.mutation):
            manager.changed()
        self.active = bool(self.configs.client_quotas())

    def record(self, ctx: RequestContext, quota: Quota, request: Message,
               response: Message | None, handler_ns: int) -> int:
        now = self.clock_ms()
        percent = handler_ns * NS_TO_PERCENT
        api_key = ctx.header.request_api_key
        if quota is Quota.EXEMPT or (api_key == FETCH and follower_fetch(
                request, ctx.api_version)):  # type: ignore[arg-type]
            self.exempt.record(percent, now)
            return 0
        user = principal_name(ctx.session.principal)
        client_id = ctx.client_id
        by_request = 0
        if self.request.enabled and not (api_key == PRODUCE
                                         and getattr(request, "acks", -1) == 0):
            by_request = self.request.record(user, client_id, percent, now)
        other: ClientQuotaManager | ControllerMutationQuotaManager | None = None
        by_other = 0
        if api_key == PRODUCE:
            if self.produce.enabled:
                other = self.produce
                by_other = other.record(user, client_id, ctx.request_size, now)
        elif api_key == FETCH:
            if self.fetch.enabled and response is not None:
                other = self.fetch
                size = fetch_response_bytes(response)  # type: ignore[arg-type]
                by_other = other.record(user, client_id, size, now)
                if by_other or by_request:
                    # a throttled fetch answers with no records: its bytes never left
                    other.record_no_throttle(user, client_id, -size, now)
                    response.responses = []  # type: ignore[attr-defined]
        elif quota is Quota.CONTROLLER_MUTATION and ctx.mutation_quota is not None:
            other = self.mutation
            by_other = ctx.mutation_quota.throttle_time_ms()
        throttle_ms = max(by_request, by_other)
        if throttle_ms > 0:
            if other is not None and by_other > by_request:
                other.throttled(user, client_id, by_other, now)
            else:
                self.request.throttled(user, client_id, by_request, now)
        return throttle_ms

    def record_encoding(self, ctx: RequestContext, quota: Quota, request: Message,
                        ns: int) -> None:
        now = self.clock_ms()
        percent = ns * NS_TO_PERCENT
        if quota is Quota.EXEMPT or (ctx.header.request_api_key == FETCH and follower_fetch(
                request, ctx.api_version)):  # type: ignore[arg-type]
            self.exempt.record(percent, now)
        elif self.request.enabled:
            self.request.record_no_throttle(principal_name(ctx.session.principal),
                                            ctx.client_id, percent, now)

    def record_produce(self, principal: str, client_id: str, size: int, loop_ns: int) -> int:
        """The fast Produce path's request (acks 1 or all): its bytes and loop time; the
        throttle time."""
        now = self.clock_ms()
        user = principal_name(principal)
        by_request = (self.request.record(user, client_id, loop_ns * NS_TO_PERCENT, now)
                      if self.request.enabled else 0)
        by_bytes = (self.produce.record(user, client_id, size, now)
                    if self.produce.enabled else 0)
        if by_bytes > by_request:
            self.produce.throttled(user, client_id, by_bytes, now)
        elif by_request > 0:
            self.request.throttled(user, client_id, by_request, now)
        return max(by_bytes, by_request)

    def fetch_max_bytes(self, ctx: RequestContext) -> float:
        if not self.fetch.enabled:
            return float("inf")
        return self.fetch.max_value_in_window(principal_name(ctx.session.principal),
                                              ctx.client_id)

    def mutation_quota(self, ctx: RequestContext, strict: bool) -> MutationQuota:
        quota = self.mutation.quota_for(principal_name(ctx.session.principal),
                                        ctx.client_id, strict)
        ctx.mutation_quota = quota
        return quota

    def beans(self) -> dict[str, dict[str, object]]:
        """The quota MBeans (a metrics registry provider)."""
        now = self.clock_ms()
        return merge_beans(
            self.produce.beans(now), self.fetch.beans(now), self.request.beans(now),
            self.mutation.beans(now),
            {f"{SERVER}:type=Request": {"exempt-request-time": self.exempt.measure(now)}})


class QuotaSwitch(Protocol):
    quotas: QuotaRecorder


class QuotaSettings(Protocol):
    def __getitem__(self, key: str) -> Any: ...


def install_client_quotas(dispatcher: QuotaSwitch, configs: ClientQuotaConfigs,
                          settings: QuotaSettings) -> ClientQuotas:
    """The dispatcher's recorder follows the quota configs: ClientQuotas while some
    client quota exists, NoQuotas (the stage skipped) while none does. settings: the
    broker config (its quota window keys)."""
    quotas = ClientQuotas(
        configs, WindowConfig.of(settings["quota.window.num"],
                                 settings["quota.window.size.seconds"]),
        WindowConfig.of(settings["controller.quota.window.num"],
                        settings["controller.quota.window.size.seconds"]))

    def switch(_changed: object = None) -> None:
        quotas.changed()
        dispatcher.quotas = quotas if quotas.active else NO_QUOTAS

    configs.on_change(switch)
    switch()
    return quotas
