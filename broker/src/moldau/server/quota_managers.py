"""Which client quota applies to a request and the bucket it fills (Kafka's
ClientQuotaManager, ClientRequestQuotaManager and ControllerMutationQuotaManager).

A quota is looked up for the request's user (the principal's name: ANONYMOUS on
PLAINTEXT, the DN on mTLS) and client id in Kafka's order, first match wins:
  1 /users/<u>/clients/<c>        2 /users/<u>/clients/<default>     3 /users/<u>
  4 /users/<default>/clients/<c>  5 /users/<default>/clients/<default>
  6 /users/<default>              7 /clients/<c>                     8 /clients/<default>
The level found decides the bucket (the sensor's tags, as in Kafka): a user-level quota
(3, 6) is one bucket per user whatever its client ids; a client-level one (7, 8) one per
client id whatever the user; the others one per (user, client id). A `<default>` quota
thus limits each user or client id on its own, never as a pool. No level: unlimited,
measured (for the metrics) in a bucket per client id, or per user (or user and client
id) when only user (or user and client id) entities have that quota, as Kafka tags it.
The lookup is cached per (user, client id) until the quota configs change.

Each sensor measures with rate_sensors.Rate and expires after an hour without a record,
as Kafka's per-client sensors do.
"""

from __future__ import annotations

import heapq
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from moldau.cluster.zk_paths import sanitize
from moldau.errors import ThrottlingQuotaExceededError

from .client_quota_configs import DEFAULT, ClientQuotaConfigs, QuotaEntity
from .rate_sensors import (
    Avg,
    Rate,
    TokenBucket,
    WindowConfig,
    throttle_time_ms,
    token_throttle_time_ms,
)

SERVER = "kafka.server"
INACTIVE_SENSOR_EXPIRY_MS = 3600 * 1000.0
_PURGE_EVERY_MS = 30_000.0  # Kafka's metrics reaper runs every 30 s

# (user part, client part) of each level, in order; U/C: the request's own name
_U, _C = object(), object()
_LEVELS: tuple[tuple[object, object], ...] = (
    (_U, _C), (_U, DEFAULT), (_U, None), (DEFAULT, _C), (DEFAULT, DEFAULT), (DEFAULT, None),
    (None, _C), (None, DEFAULT))


@dataclass(frozen=True, slots=True)
class Resolution:
    """A quota found for a (user, client id): its bucket's tags ("" for a part the
    bucket does not have) and the bound, None when no level has one."""

    user_tag: str
    client_tag: str
    bound: float | None


def principal_name(principal: str) -> str:
    """KafkaPrincipal's name: `User:alice` -> `alice`."""
    kind, colon, name = principal.partition(":")
    return name if colon else kind


def resolve(configs: ClientQuotaConfigs, user: str, client_id: str, key: str) -> Resolution:
    """The quota of `key` for a user and client id, by the precedence of the module doc."""
    sanitized = sanitize(user)
    quotas = configs.client_quotas()
    for user_part, client_part in _LEVELS:
        entity = QuotaEntity(user if user_part is _U else user_part,  # type: ignore[arg-type]
                             client_id if client_part is _C else client_part)  # type: ignore[arg-type]
        bound = quotas.get(entity, {}).get(key)
        if bound is None:
            continue
        if entity.client_id is None:  # levels 3 and 6: the user's bucket
            return Resolution(sanitized, "", bound)
        if entity.user is None:  # levels 7 and 8: the client id's bucket
            return Resolution("", client_id, bound)
        return Resolution(sanitized, client_id, bound)
    # no quota: the bucket Kafka's tags give when only one kind of entity has quotas of
    # this key (users, or users' client ids), else one per client id
    kinds = {(e.user is not None, e.client_id is not None)
             for e, values in quotas.items() if key in values}
    if kinds == {(True, False)}:
        return Resolution(sanitized, "", None)
    if kinds == {(True, True)}:
        return Resolution(sanitized, client_id, None)
    return Resolution("", client_id, None)


_JMX_PLAIN = re.compile(r"[\w\-%. \t]*")


def jmx_value(value: str) -> str:
    """A tag value as Kafka's JmxReporter writes it (Sanitizer.jmxSanitize): quoted when
    it has a character an ObjectName value may not hold unquoted."""
    if _JMX_PLAIN.fullmatch(value):
        return value
    escaped = (value.replace("\\", "\\\\").replace('"', '\\"').replace("*", "\\*")
               .replace("?", "\\?").replace("\n", "\\n"))
    return f'"{escaped}"'


def client_bean(type_: str, user_tag: str, client_tag: str) -> str:
    """`kafka.server:type=Produce,user=...,client-id=...`, an empty tag left out (as
    JmxReporter leaves it out)."""
    name = f"{SERVER}:type={type_}"
    if user_tag:
        name += f",user={jmx_value(user_tag)}"
    if client_tag:
        name += f",client-id={jmx_value(client_tag)}"
    return name


class _Sensors:
    """One bucket's measurements: the quota's rate and the throttle times given."""

    __slots__ = ("last_ms", "rate", "throttle")

    def __init__(self, window: WindowConfig, now_ms: float) -> None:
        self.rate = Rate(window)
        self.throttle = Avg(window)
        self.last_ms = now_ms


class _ThrottleQueue:
    """How many connections this quota holds muted now (Kafka's `queue-size`)."""

    __slots__ = ("_ends",)

    def __init__(self) -> None:
        self._ends: list[float] = []

    def add(self, end_ms: float) -> None:
        heapq.heappush(self._ends, end_ms)

    def size(self, now_ms: float) -> int:
        ends = self._ends
        while ends and ends[0] <= now_ms:
            heapq.heappop(ends)
        return len(ends)


class _QuotaLookup:
    """Which quota of `key` applies to a (user, client id), cached until the configs
    change; `enabled` while some entity has that quota (Kafka's quotasEnabled)."""

    key: str

    def __init__(self, configs: ClientQuotaConfigs) -> None:
        self.configs = configs
        self.enabled = False
        self._resolved: dict[tuple[str, str], Resolution] = {}
        self.changed()

    def changed(self) -> None:
        """The quota configs changed: look quotas up afresh (the buckets keep their data,
        as Kafka's sensors do when their quota is updated)."""
        self._resolved.clear()
        self.enabled = any(self.key in values
                           for values in self.configs.client_quotas().values())

    def resolution(self, user: str, client_id: str) -> Resolution:
        found = self._resolved.get((user, client_id))
        if found is None:
            found = self._resolved[(user, client_id)] = resolve(self.configs, user,
                                                                client_id, self.key)
        return found


class ClientQuotaManager(_QuotaLookup):
    """The buckets of one quota type: Produce (`producer_byte_rate`, bytes), Fetch
    (`consumer_byte_rate`, bytes) or Request (`request_percentage`, percent of the
    loop's time: see ClientQuotas)."""

    def __init__(self, type_: str, key: str, rate_metric: str, configs: ClientQuotaConfigs,
                 window: WindowConfig, clock_ms: Callable[[], float],
                 max_throttle_ms: float | None = None) -> None:
        self.type = type_
        self.key = key
        self.rate_metric = rate_metric
        self.window = window
        self.clock_ms = clock_ms
        self.max_throttle_ms = max_throttle_ms
        self._sensors: dict[tuple[str, str], _Sensors] = {}
        self._queue = _ThrottleQueue()
        self._next_purge_ms = 0.0
        super().__init__(configs)

    def _sensors_of(self, res: Resolution, now_ms: float) -> _Sensors:
        tags = (res.user_tag, res.client_tag)
        sensors = self._sensors.get(tags)
        if sensors is None:
            if now_ms >= self._next_purge_ms:
                self.expire(now_ms)
            sensors = self._sensors[tags] = _Sensors(self.window, now_ms)
        sensors.last_ms = now_ms
        return sensors

    def record(self, user: str, client_id: str, value: float, now_ms: float) -> int:
        """Record value in the client's bucket; the throttle time in ms when the bucket's
        rate is now over its quota (Kafka's recordAndGetThrottleTimeMs), else 0."""
        res = self.resolution(user, client_id)
        sensors = self._sensors_of(res, now_ms)
        rate = sensors.rate
        rate.record(value, now_ms)
        bound = res.bound
        if bound is None:
            return 0
        observed = rate.measure(now_ms)
        if observed <= bound:
            return 0
        ms = throttle_time_ms(observed, bound, rate.window_ms(now_ms))
        if self.max_throttle_ms is not None:
            ms = min(ms, int(self.max_throttle_ms))
        return max(ms, 0)

    def record_no_throttle(self, user: str, client_id: str, value: float,
                           now_ms: float) -> None:
        """Count value without a decision (un-recording a throttled fetch's bytes with a
        negative one; the encoding time of a response)."""
        res = self.resolution(user, client_id)
        self._sensors_of(res, now_ms).rate.record(value, now_ms)

    def throttled(self, user: str, client_id: str, ms: int, now_ms: float) -> None:
        """This quota's throttle time was the one applied (Kafka's throttle())."""
        res = self.resolution(user, client_id)
        self._sensors_of(res, now_ms).throttle.record(ms, now_ms)
        self._queue.add(now_ms + ms)

    def max_value_in_window(self, user: str, client_id: str) -> float:
        """What the quota allows over the measured span (getMaxValueInQuotaWindow): caps a
        consumer's fetch size."""
        bound = self.resolution(user, client_id).bound
        if bound is None:
            return float("inf")
        return bound * (self.window.samples - 1) * self.window.window_ms / 1000.0

    def expire(self, now_ms: float) -> None:
        """Drop the buckets idle for an hour."""
        self._next_purge_ms = now_ms + _PURGE_EVERY_MS
        idle = [tags for tags, s in self._sensors.items()
                if now_ms - s.last_ms >= INACTIVE_SENSOR_EXPIRY_MS]
        for tags in idle:
            del self._sensors[tags]

    def beans(self, now_ms: float) -> dict[str, dict[str, object]]:
        self.expire(now_ms)
        out: dict[str, dict[str, object]] = {
            f"{SERVER}:type={self.type}": {"queue-size": self._queue.size(now_ms)}}
        for (user_tag, client_tag), s in self._sensors.items():
            out[client_bean(self.type, user_tag, client_tag)] = {
                self.rate_metric: s.rate.measure(now_ms),
                "throttle-time": s.throttle.measure(now_ms)}
        return out


class MutationQuota:
    """A request's view of the controller mutation quota (Kafka's
    ControllerMutationQuota): `record` takes the partitions a topic creates or deletes,
    and `throttle_time_ms` is what the response carries."""

    def record(self, permits: float) -> None:
        """Strict: raise THROTTLING_QUOTA_EXCEEDED when the bucket is already empty."""

    def throttle_time_ms(self) -> int:
        return 0


UNBOUNDED_MUTATION_QUOTA = MutationQuota()


class _BoundedMutationQuota(MutationQuota):
    def __init__(self, manager: ControllerMutationQuotaManager, res: Resolution,
                 strict: bool) -> None:
        self.manager = manager
        self.res = res
        self.strict = strict
        self._throttle_ms = 0
        self._at_ms = 0.0

    def record(self, permits: float) -> None:
        manager = self.manager
        now = manager.clock_ms()
        sensors = manager.sensors_of(self.res, now)
        bound = self.res.bound
        assert bound is not None
        if self.strict:
            tokens = sensors.bucket.measure(bound, now)
            if tokens < 0:
                self._throttled(token_throttle_time_ms(tokens, bound), now)
                raise ThrottlingQuotaExceededError(
                    "The throttling quota has been exceeded.")
        sensors.rate.record(permits, now)
        sensors.bucket.record(permits, bound, now)
        if not self.strict:
            tokens = sensors.bucket.measure(bound, now)
            if tokens < 0:
                self._throttled(token_throttle_time_ms(tokens, bound), now)

    def _throttled(self, ms: int, now_ms: float) -> None:
        self._throttle_ms = ms
        self._at_ms = now_ms

    def throttle_time_ms(self) -> int:
        """What is left of the last throttle time at the response (Kafka's throttleTime)."""
        left = self._throttle_ms - (self.manager.clock_ms() - self._at_ms)
        return max(0, int(left))


class _MutationSensors:
    __slots__ = ("bucket", "last_ms", "rate", "throttle")

    def __init__(self, window: WindowConfig, now_ms: float) -> None:
        self.rate = Rate(window)
        self.bucket = TokenBucket(window)
        self.throttle = Avg(window)
        self.last_ms = now_ms


class ControllerMutationQuotaManager(_QuotaLookup):
    """`controller_mutation_rate`: partitions created, added or deleted per second, a
    token bucket per client bucket (burst: the quota times the windows' span)."""

    type = "ControllerMutation"
    key = "controller_mutation_rate"

    def __init__(self, configs: ClientQuotaConfigs, window: WindowConfig,
                 clock_ms: Callable[[], float]) -> None:
        self.window = window
        self.clock_ms = clock_ms
        self._sensors: dict[tuple[str, str], _MutationSensors] = {}
        self._queue = _ThrottleQueue()
        super().__init__(configs)

    def sensors_of(self, res: Resolution, now_ms: float) -> _MutationSensors:
        tags = (res.user_tag, res.client_tag)
        sensors = self._sensors.get(tags)
        if sensors is None:
            sensors = self._sensors[tags] = _MutationSensors(self.window, now_ms)
        sensors.last_ms = now_ms
        return sensors

    def quota_for(self, user: str, client_id: str, strict: bool) -> MutationQuota:
        """The quota of one request: strict (refuses with 89 once the bucket is empty) or
        permissive (accepts, then throttles)."""
        if not self.enabled:
            return UNBOUNDED_MUTATION_QUOTA
        res = self.resolution(user, client_id)
        if res.bound is None:
            return UNBOUNDED_MUTATION_QUOTA
        return _BoundedMutationQuota(self, res, strict)

    def throttled(self, user: str, client_id: str, ms: int, now_ms: float) -> None:
        res = self.resolution(user, client_id)
        self.sensors_of(res, now_ms).throttle.record(ms, now_ms)
        self._queue.add(now_ms + ms)

    def beans(self, now_ms: float) -> dict[str, dict[str, object]]:
        idle = [tags for tags, s in self._sensors.items()
                if now_ms - s.last_ms >= INACTIVE_SENSOR_EXPIRY_MS]
        for tags in idle:
            del self._sensors[tags]
        out: dict[str, dict[str, object]] = {
            f"{SERVER}:type={self.type}": {"queue-size": self._queue.size(now_ms)}}
        for (user_tag, client_tag), s in self._sensors.items():
            res_bound = self._bound_of(user_tag, client_tag)
            tokens = (s.bucket.measure(res_bound, now_ms) if res_bound is not None
                      else float(2**63 - 1))
            out[client_bean(self.type, user_tag, client_tag)] = {
                "mutation-rate": s.rate.measure(now_ms), "tokens": tokens,
                "throttle-time": s.throttle.measure(now_ms)}
        return out

    def _bound_of(self, user_tag: str, client_tag: str) -> float | None:
        for (_user, _client), res in self._resolved.items():
            if (res.user_tag, res.client_tag) == (user_tag, client_tag):
                return res.bound
        return None


def merge_beans(*parts: Mapping[str, Mapping[str, object]]) -> dict[str, dict[str, object]]:
    out: dict[str, dict[str, object]] = {}
    for part in parts:
        for name, attributes in part.items():
            out.setdefault(name, {}).update(attributes)
    return out
