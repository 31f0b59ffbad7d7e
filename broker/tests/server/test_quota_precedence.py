"""Which client quota applies and which bucket it fills (server/quota_managers.py), and
what the recorder counts per API (server/quotas.py), on the real quota configs object
with a fake clock and request contexts."""

from __future__ import annotations

from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import pytest

from moldau.errors import ThrottlingQuotaExceededError
from moldau.protocol.generated.api import ApiKey
from moldau.protocol.generated.fetch_request import FetchRequest
from moldau.protocol.generated.fetch_response import FetchResponse
from moldau.protocol.generated.produce_request import ProduceRequest
from moldau.protocol.generated.produce_response import ProduceResponse
from moldau.server.client_quota_configs import (
    CONSUMER_BYTE_RATE,
    CONTROLLER_MUTATION_RATE,
    DEFAULT,
    PRODUCER_BYTE_RATE,
    REQUEST_PERCENTAGE,
    ClientQuotaConfigs,
    QuotaEntity,
)
from moldau.server.quota_managers import client_bean, jmx_value, principal_name, resolve
from moldau.server.quotas import (
    NO_QUOTAS,
    ClientQuotas,
    NoQuotas,
    Quota,
    QuotaRecorder,
    install_client_quotas,
)
from moldau.server.rate_sensors import WindowConfig

P = PRODUCER_BYTE_RATE


def _configs(entries: dict[QuotaEntity, dict[str, float]]) -> ClientQuotaConfigs:
    configs = ClientQuotaConfigs()
    for entity, values in entries.items():
        configs.set_client(entity, values)
    return configs


LEVELS = [  # (the entity, the bucket's tags for user alice and client app)
    (QuotaEntity("alice", "app"), ("alice", "app")),
    (QuotaEntity("alice", DEFAULT), ("alice", "app")),
    (QuotaEntity("alice", None), ("alice", "")),
    (QuotaEntity(DEFAULT, "app"), ("alice", "app")),
    (QuotaEntity(DEFAULT, DEFAULT), ("alice", "app")),
    (QuotaEntity(DEFAULT, None), ("alice", "")),
    (QuotaEntity(None, "app"), ("", "app")),
    (QuotaEntity(None, DEFAULT), ("", "app")),
]


@pytest.mark.parametrize("level", range(len(LEVELS)))
def test_the_first_level_that_has_the_quota_wins(level: int) -> None:
    """Every level below `level` is configured too; only the one at `level` and above
    matter, and the highest (first in Kafka's order) wins."""
    entries = {entity: {P: 1000.0 * (i + 1)} for i, (entity, _) in enumerate(LEVELS)
               if i >= level}
    res = resolve(_configs(entries), "alice", "app", P)
    assert res.bound == 1000.0 * (level + 1)
    assert (res.user_tag, res.client_tag) == LEVELS[level][1]


def test_precedence_is_per_quota_key() -> None:
    configs = _configs({QuotaEntity("alice", "app"): {CONSUMER_BYTE_RATE: 5.0},
                        QuotaEntity(None, "app"): {P: 7.0}})
    assert resolve(configs, "alice", "app", P).bound == 7.0
    assert resolve(configs, "alice", "app", CONSUMER_BYTE_RATE).bound == 5.0
    assert resolve(configs, "alice", "app", REQUEST_PERCENTAGE).bound is None


def test_a_user_quota_beats_a_client_id_quota() -> None:
    """The book's example: user 10 MB/s over client id 1 MB/s."""
    configs = _configs({QuotaEntity("alice", None): {P: 10e6},
                        QuotaEntity(None, "clueful"): {P: 1e6}})
    assert resolve(configs, "alice", "clueful", P).bound == 10e6
    assert resolve(configs, "bob", "clueful", P).bound == 1e6


def test_the_user_is_the_principals_name_and_the_tag_its_sanitized_form() -> None:
    assert principal_name("User:ANONYMOUS") == "ANONYMOUS"
    assert principal_name("User:CN=a b,O=x") == "CN=a b,O=x"
    configs = _configs({QuotaEntity("CN=a b,O=x", None): {P: 1.0}})
    res = resolve(configs, "CN=a b,O=x", "c", P)
    assert res.user_tag == "CN%3Da%20b%2CO%3Dx"
    assert (client_bean("Produce", res.user_tag, "")
            == "kafka.server:type=Produce,user=CN%3Da%20b%2CO%3Dx")


def test_bean_names_leave_empty_tags_out_and_quote_odd_values() -> None:
    assert client_bean("Fetch", "", "app") == "kafka.server:type=Fetch,client-id=app"
    assert client_bean("Request", "u", "c") == "kafka.server:type=Request,user=u,client-id=c"
    assert jmx_value("a:b") == '"a:b"'


# ------------------------------------------------------------------------- the recorder


class Clock:
    def __init__(self) -> None:
        self.ms = 1_000_000.0

    def __call__(self) -> float:
        return self.ms


@dataclass
class Ctx:
    """The request context fields the recorder reads."""

    api_key: int
    client_id: str = "app"
    principal: str = "User:alice"
    api_version: int = 9
    request_size: int = 0
    mutation_quota: Any = None
    header: Any = field(init=False)
    session: Any = field(init=False)

    def __post_init__(self) -> None:
        self.header = SimpleNamespace(request_api_key=self.api_key)
        self.session = SimpleNamespace(principal=self.principal)


def _recorder(entries: dict[QuotaEntity, dict[str, float]]) -> tuple[ClientQuotas, Clock]:
    clock = Clock()
    configs = _configs(entries)
    quotas = ClientQuotas(configs, WindowConfig.of(11, 1), WindowConfig.of(11, 1), clock)
    configs.on_change(lambda _e: quotas.changed())
    return quotas, clock


def _produce(quotas: QuotaRecorder, size: int, acks: int = 1, loop_ns: int = 0,
             **ctx: Any) -> int:
    return quotas.record(Ctx(ApiKey.PRODUCE, request_size=size, **ctx), Quota.NORMAL,  # type: ignore[arg-type]
                         ProduceRequest(acks=acks), ProduceResponse(), loop_ns)


def test_a_client_id_quota_is_one_bucket_per_client_id_across_users() -> None:
    quotas, _clock = _recorder({QuotaEntity(None, "app"): {P: 1000.0}})
    assert _produce(quotas, 6000, principal="User:alice") == 0  # 600 B/s over 10 s
    # bob's bytes fill the same bucket: 12 kB over 10 s is 1200 B/s, over 1000
    assert _produce(quotas, 6000, principal="User:bob") == 2000
    beans = quotas.beans()
    assert beans["kafka.server:type=Produce,client-id=app"]["byte-rate"] == 1200.0


def test_a_user_quota_is_one_bucket_per_user_across_client_ids() -> None:
    quotas, _clock = _recorder({QuotaEntity("alice", None): {P: 1000.0}})
    assert _produce(quotas, 6000, client_id="a") == 0
    assert _produce(quotas, 6000, client_id="b") == 2000
    assert _produce(quotas, 50_000, principal="User:bob") == 0  # no quota for bob


def test_a_default_quota_limits_each_entity_on_its_own() -> None:
    quotas, _clock = _recorder({QuotaEntity(None, DEFAULT): {P: 1000.0}})
    assert _produce(quotas, 9000, client_id="a") == 0
    assert _produce(quotas, 9000, client_id="b") == 0  # its own bucket, not a pool
    assert _produce(quotas, 2000, client_id="a") == 1000


def test_acks_0_skips_the_request_quota_but_not_the_byte_quota() -> None:
    quotas, _clock = _recorder({QuotaEntity(None, "app"): {REQUEST_PERCENTAGE: 1.0, P: 10.0}})
    # 1 s of loop time against 1 %: 100 % over 10 s... but acks=0
    assert _produce(quotas, 0, acks=0, loop_ns=10**9) == 0
    assert _produce(quotas, 1000, acks=0) > 0  # the bytes still count


def test_the_request_quota_is_capped_at_one_window() -> None:
    quotas, _clock = _recorder({QuotaEntity(None, "app"): {REQUEST_PERCENTAGE: 1.0}})
    assert _produce(quotas, 0, loop_ns=10**9) == 1000  # uncapped this would be 90 s


def test_the_cache_is_dropped_when_the_configs_change() -> None:
    quotas, _clock = _recorder({QuotaEntity(None, "app"): {P: 1000.0}})
    assert _produce(quotas, 20_000) > 0
    quotas.configs.set_client(QuotaEntity(None, "app"), {})  # removed
    assert not quotas.produce.enabled
    quotas.configs.set_client(QuotaEntity(None, "app"), {P: 1e9})
    assert _produce(quotas, 20_000) == 0


def _fetch(quotas: ClientQuotas, records: bytes, replica_id: int = -1) -> tuple[int, FetchResponse]:
    response = FetchResponse(responses=[FetchResponse.FetchableTopicResponse(
        topic="t", partitions=[FetchResponse.PartitionData(partition_index=0,
                                                           records=records)])])
    ms = quotas.record(Ctx(ApiKey.FETCH, api_version=12), Quota.NORMAL,  # type: ignore[arg-type]
                       FetchRequest(replica_id=replica_id), response, 1000)
    return ms, response


def test_a_throttled_fetch_has_no_records_and_its_bytes_are_taken_back() -> None:
    quotas, _clock = _recorder({QuotaEntity(None, "app"): {CONSUMER_BYTE_RATE: 1000.0}})
    ms, response = _fetch(quotas, b"x" * 5000)
    assert ms == 0 and response.responses
    ms, response = _fetch(quotas, b"x" * 10_000)
    assert ms > 0
    assert response.responses == []
    rate = quotas.beans()["kafka.server:type=Fetch,client-id=app"]
    # only the first fetch's bytes count
    assert rate["byte-rate"] == pytest.approx((5000 + 101) / 10.0)  # records and the estimate
    assert rate["throttle-time"] == ms


def test_a_follower_fetch_is_exempt() -> None:
    quotas, _clock = _recorder({QuotaEntity(None, DEFAULT): {CONSUMER_BYTE_RATE: 1.0,
                                                            REQUEST_PERCENTAGE: 1.0}})
    ms, response = _fetch(quotas, b"x" * 100_000, replica_id=2)
    assert ms == 0 and response.responses
    assert quotas.beans()["kafka.server:type=Request"]["exempt-request-time"] > 0


def test_the_fetch_size_is_capped_at_the_quota_over_the_span() -> None:
    quotas, _clock = _recorder({QuotaEntity(None, "app"): {CONSUMER_BYTE_RATE: 1000.0}})
    assert quotas.fetch_max_bytes(Ctx(ApiKey.FETCH)) == 10_000  # type: ignore[arg-type]
    assert quotas.fetch_max_bytes(Ctx(ApiKey.FETCH, client_id="x")) == float("inf")  # type: ignore[arg-type]


def test_controller_mutations_strict_and_permissive() -> None:
    quotas, clock = _recorder({QuotaEntity(None, "app"): {CONTROLLER_MUTATION_RATE: 1.0}})
    ctx = Ctx(ApiKey.CREATE_TOPICS, api_version=6)
    strict = quotas.mutation_quota(ctx, strict=True)  # type: ignore[arg-type]
    strict.record(30)  # burst 11: accepted whole, overdrawn to -19
    assert strict.throttle_time_ms() == 0
    with pytest.raises(ThrottlingQuotaExceededError):
        quotas.mutation_quota(ctx, strict=True).record(1)  # type: ignore[arg-type]
    refused = ctx.mutation_quota
    assert refused.throttle_time_ms() == 19_000
    clock.ms += 1000
    assert refused.throttle_time_ms() == 18_000
    # the recorder puts it into the response
    assert quotas.record(ctx, Quota.CONTROLLER_MUTATION, None, None, 0) == 18_000  # type: ignore[arg-type]
    permissive = quotas.mutation_quota(ctx, strict=False)  # type: ignore[arg-type]
    permissive.record(2)
    assert permissive.throttle_time_ms() == 20_000
    beans = quotas.beans()["kafka.server:type=ControllerMutation,client-id=app"]
    assert beans["tokens"] == pytest.approx(-20.0)


def test_no_quota_anywhere_keeps_the_dispatcher_on_noquotas() -> None:
    configs = ClientQuotaConfigs()
    dispatcher = SimpleNamespace(quotas=NO_QUOTAS)
    settings = {"quota.window.num": 11, "quota.window.size.seconds": 1,
                "controller.quota.window.num": 11, "controller.quota.window.size.seconds": 1}
    installed = install_client_quotas(dispatcher, configs, settings)
    assert type(dispatcher.quotas) is NoQuotas
    configs.set_ip("1.2.3.4", 5.0)  # an ip quota is not a client quota
    assert type(dispatcher.quotas) is NoQuotas
    configs.set_client(QuotaEntity(None, "app"), {P: 1.0})
    assert dispatcher.quotas is installed
    configs.set_client(QuotaEntity(None, "app"), {})
    assert type(dispatcher.quotas) is NoQuotas
