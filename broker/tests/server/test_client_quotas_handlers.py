"""DescribeClientQuotas (48) and AlterClientQuotas (49) handlers (server/handlers/
client_quotas.py) with an in-memory ZooKeeper port: Kafka 3.9's filter semantics (match
types, strict), its errors for the whole request (42, 35) and per entry (42 with Kafka's
messages), validate_only, integral storage of LONG and INT keys, the KRaft refusal of zero
and negative values, and that nothing is written for a refused entry."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

from moldau.protocol.generated.alter_client_quotas_request import AlterClientQuotasRequest
from moldau.protocol.generated.describe_client_quotas_request import (
    DescribeClientQuotasRequest,
)
from moldau.server.handlers.client_quotas import (
    AlterClientQuotasHandler,
    DescribeClientQuotasHandler,
)

D, A = DescribeClientQuotasRequest, AlterClientQuotasRequest
DEFAULT = "<default>"
Change = Callable[[dict[str, str]], dict[str, str]]


class FakeZkClient:
    """The zk_quota_ops methods over dicts (desanitized names, `<default>` for defaults)."""

    def __init__(self) -> None:
        self.entities: dict[tuple[str | None, str | None], dict[str, str]] = {}
        self.ips: dict[str, dict[str, str]] = {}
        self.writes = 0

    def get_all_quota_entity_configs(self) -> dict[tuple[str | None, str | None],
                                                   dict[str, str]]:
        return {k: dict(v) for k, v in self.entities.items()}

    def get_all_ip_quota_configs(self) -> dict[str, dict[str, str]]:
        return {k: dict(v) for k, v in self.ips.items()}

    def update_quota_entity_config(self, user: str | None, client_id: str | None,
                                   change: Change) -> str:
        self.writes += 1
        self.entities[(user, client_id)] = change(dict(self.entities.get((user, client_id),
                                                                         {})))
        return "config_change_0000000001"

    def update_ip_quota_config(self, ip: str, change: Change) -> str:
        self.writes += 1
        self.ips[ip] = change(dict(self.ips.get(ip, {})))
        return "config_change_0000000001"


class FakeZk:
    def __init__(self) -> None:
        self.client = FakeZkClient()

    async def call(self, fn: Callable[..., Any], *args: Any) -> Any:
        return fn(*args)


class Ctx:
    def __init__(self, allowed: bool = True) -> None:
        self.allowed = allowed
        self.asked: list[tuple[Any, ...]] = []

    def authorize(self, *args: Any) -> bool:
        self.asked.append(args)
        return self.allowed


@pytest.fixture
def zk() -> FakeZk:
    zk = FakeZk()
    zk.client.entities = {
        ("alice", None): {"producer_byte_rate": "1024", "SCRAM-SHA-256": "secret"},
        ("alice", "app"): {"consumer_byte_rate": "2048"},
        ("alice", DEFAULT): {"request_percentage": "12.5"},
        (DEFAULT, None): {"producer_byte_rate": "10"},
        (None, "app"): {"controller_mutation_rate": "3.0"},
        (None, DEFAULT): {"producer_byte_rate": "1"},
        ("bob", None): {"SCRAM-SHA-512": "only a credential"},
    }
    zk.client.ips = {"10.0.0.1": {"connection_creation_rate": "5"}, DEFAULT: {}}
    return zk


def describe(zk: FakeZk, *components: tuple[str, int, str | None], strict: bool = False,
             ctx: Ctx | None = None) -> Any:
    request = D(components=[D.ComponentData(entity_type=t, match_type=m, match=n)
                            for t, m, n in components], strict=strict)
    return asyncio.run(DescribeClientQuotasHandler(zk)(ctx or Ctx(), request))  # type: ignore[arg-type]


def entities(answer: Any) -> dict[tuple[tuple[str, str | None], ...], dict[str, float]]:
    assert answer.error_code == 0, answer.error_message
    return {tuple((e.entity_type, e.entity_name) for e in entry.entity):
            {v.key: v.value for v in entry.values} for entry in answer.entries}


def test_describe_matches_as_kafka(zk: FakeZk) -> None:
    everything = entities(describe(zk))
    assert everything == {
        (("user", "alice"),): {"producer_byte_rate": 1024.0},
        (("user", "alice"), ("client-id", "app")): {"consumer_byte_rate": 2048.0},
        (("user", "alice"), ("client-id", None)): {"request_percentage": 12.5},
        (("user", None),): {"producer_byte_rate": 10.0},
        (("client-id", "app"),): {"controller_mutation_rate": 3.0},
        (("client-id", None),): {"producer_byte_rate": 1.0},
        (("ip", "10.0.0.1"),): {"connection_creation_rate": 5.0},
    }
    assert set(entities(describe(zk, ("user", 0, "alice")))) == {
        (("user", "alice"),), (("user", "alice"), ("client-id", "app")),
        (("user", "alice"), ("client-id", None))}
    assert set(entities(describe(zk, ("user", 0, "alice"), strict=True))) == {
        (("user", "alice"),)}
    assert set(entities(describe(zk, ("user", 2, None), strict=True))) == {
        (("user", "alice"),), (("user", None),)}
    assert set(entities(describe(zk, ("user", 1, None), ("client-id", 2, None),
                                 strict=True))) == set()
    assert set(entities(describe(zk, ("user", 0, "alice"), ("client-id", 1, None),
                                 strict=True))) == {(("user", "alice"), ("client-id", None))}
    assert set(entities(describe(zk, ("client-id", 0, "app"), strict=True))) == {
        (("client-id", "app"),)}
    assert set(entities(describe(zk, ("ip", 2, None)))) == {(("ip", "10.0.0.1"),)}
    assert entities(describe(zk, ("user", 2, None), strict=True)) == entities(
        describe(zk, ("user", 2, None), strict=True))  # deterministic
    assert entities(describe(zk, strict=True)) == {}


@pytest.mark.parametrize("components, code, message", [
    ([("user", 2, None), ("user", 0, "x")], 42, "Duplicate user filter component entity type"),
    ([("client-id", 2, None), ("client-id", 1, None)], 42,
     "Duplicate client filter component entity type"),
    ([("", 2, None)], 42, "Unexpected empty filter component entity type"),
    ([("group", 2, None)], 35, "Custom entity type 'group' not supported"),
    ([("ip", 2, None), ("user", 2, None)], 42,
     "Invalid entity filter component combination, IP filter component should not be used "
     "with user or clientId filter component."),
    ([("user", 7, None)], -1, None),
])
def test_describe_refuses_a_bad_filter(zk: FakeZk, components: list[Any], code: int,
                                       message: str | None) -> None:
    answer = describe(zk, *components)
    assert (answer.error_code, answer.error_message, answer.entries) == (code, message, None)


def test_describe_needs_describe_configs_on_the_cluster(zk: FakeZk) -> None:
    ctx = Ctx(allowed=False)
    answer = describe(zk, ctx=ctx)
    assert (answer.error_code, answer.error_message, answer.entries) == (31, None, None)
    assert [(op.name, kind.name) for op, kind, _ in ctx.asked] == [
        ("DESCRIBE_CONFIGS", "CLUSTER")]


def alter(zk: FakeZk, *entries: tuple[list[tuple[str, str | None]],
                                      list[tuple[str, float | None]]],
          validate_only: bool = False, ctx: Ctx | None = None) -> list[tuple[int, str | None]]:
    request = A(validate_only=validate_only, entries=[A.EntryData(
        entity=[A.EntityData(entity_type=t, entity_name=n) for t, n in entity],
        ops=[A.OpData(key=k, value=0.0 if v is None else v, remove=v is None)
             for k, v in ops]) for entity, ops in entries])
    answer = asyncio.run(AlterClientQuotasHandler(zk)(ctx or Ctx(), request))  # type: ignore[arg-type]
    return [(e.error_code, e.error_message) for e in answer.entries]


def test_alter_writes_kafkas_values_and_keeps_other_keys(zk: FakeZk) -> None:
    assert alter(zk, ([("user", "alice")], [("producer_byte_rate", 1048576.0000001),
                                            ("request_percentage", 50.0)]),
                 ([("client-id", None)], [("producer_byte_rate", None)]),
                 ([("ip", "10.0.0.2")], [("connection_creation_rate", 10.0)]),
                 ([("user", None), ("client-id", "c")], [("consumer_byte_rate", 1e7)])) == [
        (0, None)] * 4
    assert zk.client.entities[("alice", None)] == {
        "producer_byte_rate": "1048576", "request_percentage": "50.0",
        "SCRAM-SHA-256": "secret"}
    assert zk.client.entities[(None, DEFAULT)] == {}
    assert zk.client.entities[(DEFAULT, "c")] == {"consumer_byte_rate": "10000000"}
    assert zk.client.ips["10.0.0.2"] == {"connection_creation_rate": "10"}


def test_validate_only_writes_nothing(zk: FakeZk) -> None:
    assert alter(zk, ([("client-id", "x")], [("producer_byte_rate", 1.0)]),
                 validate_only=True) == [(0, None)]
    assert zk.client.writes == 0


@pytest.mark.parametrize("entity, ops, error", [
    ([("client-id", "c")], [("producer_byte_rate", 1.5)],
     (42, "Configuration producer_byte_rate must be a LONG value")),
    ([("ip", "10.0.0.3")], [("connection_creation_rate", 2.5)],
     (42, "Configuration connection_creation_rate must be a INT value")),
    ([("client-id", "c")], [("producer_byte_rate", 1e30)],
     (42, "Configuration producer_byte_rate must be a LONG value")),
    ([("client-id", "c")], [("producer_byte_rate", 0.0)],
     (42, "Quota producer_byte_rate must be greater than 0")),
    ([("user", "u")], [("request_percentage", -1.0)],
     (42, "Quota request_percentage must be greater than 0")),
    ([("client-id", "c")], [("quota.producer.default", 1.0)],
     (42, "Invalid configuration key quota.producer.default")),
    ([("ip", "10.0.0.3")], [("producer_byte_rate", 1.0)],
     (42, "Invalid configuration key producer_byte_rate")),
    ([("user", "u")], [("SCRAM-SHA-256", 1.0)], (-1, None)),
    ([("client-id", "c")], [("SCRAM-SHA-256", 1.0)],
     (42, "Invalid configuration key SCRAM-SHA-256")),
    ([("ip", "not a host!")], [("connection_creation_rate", 1.0)],
     (42, "not a host! is not a valid IP or resolvable host.")),
    ([("ip", "10.0.0.3"), ("user", "u")], [("connection_creation_rate", 1.0)],
     (42, "Invalid quota entity combination, IP entity should not be used with user/client "
          "ID entity.")),
    ([], [("producer_byte_rate", 1.0)], (42, "Invalid empty client quota entity")),
    ([("group", "g")], [("producer_byte_rate", 1.0)],
     (42, "Unhandled client quota entity type: group")),
    ([("user", "")], [("producer_byte_rate", 1.0)], (42, "Empty user not supported")),
    # one bad op refuses the entry's good ones too
    ([("client-id", "c")], [("consumer_byte_rate", 5.0), ("producer_byte_rate", -5.0)],
     (42, "Quota producer_byte_rate must be greater than 0")),
])
def test_alter_refuses_bad_input_and_writes_nothing(
        zk: FakeZk, entity: list[tuple[str, str | None]],
        ops: list[tuple[str, float | None]], error: tuple[int, str | None]) -> None:
    before = (zk.client.get_all_quota_entity_configs(), zk.client.get_all_ip_quota_configs())
    good: tuple[list[tuple[str, str | None]], list[tuple[str, float | None]]] = (
        [("client-id", "fine")], [("producer_byte_rate", 2.0)])
    assert alter(zk, (entity, ops), good) == [error, (0, None)]
    assert zk.client.writes == 1  # the good entry alone
    after = (zk.client.get_all_quota_entity_configs(), zk.client.get_all_ip_quota_configs())
    assert after[0].pop((None, "fine")) == {"producer_byte_rate": "2"}
    assert after == before


def test_alter_needs_alter_configs_on_the_cluster(zk: FakeZk) -> None:
    ctx = Ctx(allowed=False)
    assert alter(zk, ([("user", "u")], [("producer_byte_rate", 1.0)]),
                 ([("client-id", None)], [("producer_byte_rate", 1.0)]), ctx=ctx) == [
        (31, None), (31, None)]
    assert zk.client.writes == 0
    assert [(op.name, kind.name) for op, kind, _ in ctx.asked] == [("ALTER_CONFIGS", "CLUSTER")]
