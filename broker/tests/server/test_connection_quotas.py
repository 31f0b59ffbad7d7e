"""Kafka's ConnectionQuotas rules (server/connection_quotas.py) without I/O: the
broker-wide and per-listener counts, the protected inter-broker listener, the creation
rates' throttle times (KIP-612 arithmetic over quota.window.num x
quota.window.size.seconds, at most one window), and the per-address
`connection_creation_rate` read from ClientQuotaConfigs, including `<default>`."""

from __future__ import annotations

import pytest

from moldau.server.client_quota_configs import DEFAULT, ClientQuotaConfigs
from moldau.server.config import BrokerConfig, ConfigError
from moldau.server.connection_limit_configs import connection_limits
from moldau.server.connection_quotas import ConnectionQuotas
from moldau.server.limits import INT_MAX, ConnectionLimits

CLIENT, INTER, OTHER = "CLIENT", "REPLICATION", "OTHER"


def quotas(**limits: object) -> ConnectionQuotas:
    return ConnectionQuotas(ConnectionLimits(inter_broker_listener=INTER, **limits),  # type: ignore[arg-type]
                            [INTER, CLIENT, OTHER])


def test_the_broker_wide_limit_counts_every_listener_but_spares_the_inter_broker_one() -> None:
    q = quotas(max_connections=2)
    for address in ("10.0.0.1", "10.0.0.2"):
        assert q.slot_available(CLIENT)
        assert q.admit(CLIENT, address, 0).admitted
    assert not q.slot_available(CLIENT) and not q.slot_available(OTHER)
    assert q.slot_available(INTER)  # protected: may take the total over
    assert q.admit(INTER, "10.0.0.9", 0).admitted
    assert q.total == 3
    assert q.over_broker_limit(CLIENT) and not q.over_broker_limit(INTER)
    q.release(CLIENT, "10.0.0.1", 0)
    assert not q.over_broker_limit(CLIENT)
    assert not q.slot_available(CLIENT)  # 2 of 2, one of them inter-broker
    q.release(INTER, "10.0.0.9", 0)
    assert q.slot_available(CLIENT)


def test_a_single_listener_is_not_protected() -> None:
    q = ConnectionQuotas(ConnectionLimits(max_connections=1, inter_broker_listener=INTER),
                         [INTER])
    assert q.admit(INTER, "10.0.0.1", 0).admitted
    assert not q.slot_available(INTER)


def test_a_listener_limit_holds_its_listener_only() -> None:
    q = quotas(listener_max_connections={OTHER: 1, INTER: 1})
    assert q.admit(OTHER, "10.0.0.1", 0).admitted
    assert not q.slot_available(OTHER)
    assert q.slot_available(CLIENT)
    assert q.admit(INTER, "10.0.0.1", 0).admitted
    assert not q.slot_available(INTER)  # protection spares the broker-wide limit only


def test_per_ip_limits_and_overrides_refuse_at_once() -> None:
    q = quotas(per_ip=1, per_ip_overrides={"10.0.0.2": 2})
    assert q.admit(CLIENT, "10.0.0.1", 0).admitted
    assert q.admit(CLIENT, "10.0.0.1", 0).ip_limit == 1
    assert q.admit(CLIENT, "10.0.0.2", 0).admitted
    assert q.admit(OTHER, "10.0.0.2", 0).admitted
    assert q.admit(CLIENT, "10.0.0.2", 0).ip_limit == 2
    assert q.total == 3  # the refused ones are not counted


def test_the_creation_rate_throttle_is_kafkas_and_at_most_one_window() -> None:
    # 11 windows of 1 s: a fresh rate is measured over 10 s, so 50 connections pass at 5/s
    q = quotas(max_connection_rate=5)
    assert [q.record_accept(CLIENT, 0) for _ in range(50)] == [0] * 50
    # the 51st: 5.1/s over 10 s, (5.1 - 5) / 5 x 10 s = 200 ms
    assert q.record_accept(CLIENT, 0) == 200
    # further ones are capped at quota.window.size.seconds
    assert max(q.record_accept(CLIENT, 0) for _ in range(100)) == 1000


def test_the_inter_broker_listener_is_held_to_its_own_rate_only() -> None:
    q = quotas(max_connection_rate=2, quota_window_num=2,
               listener_connection_rates={INTER: 100})
    assert [q.record_accept(CLIENT, 0) for _ in range(3)] == [0, 0, 500]
    # the broker-wide rate is spent, the inter-broker listener still takes connections
    assert [q.record_accept(INTER, 0) for _ in range(5)] == [0] * 5
    # and its own rate defaults to the broker-wide value (Kafka's prefix fallback)
    q2 = quotas(max_connection_rate=2, quota_window_num=2)
    assert [q2.record_accept(INTER, 0) for _ in range(3)] == [0, 0, 500]


def test_a_listener_rate_throttles_its_listener() -> None:
    q = quotas(quota_window_num=2, listener_connection_rates={OTHER: 1})
    assert [q.record_accept(OTHER, 0) for _ in range(2)] == [0, 1000]
    assert q.record_accept(CLIENT, 0) == 0


def test_an_address_over_its_creation_rate_is_throttled_and_not_counted() -> None:
    configs = ClientQuotaConfigs()
    q = quotas(quota_window_num=2)
    q.ip_rates = configs.ip_connection_rates
    configs.set_ip("10.0.0.1", 1)
    assert q.admit(CLIENT, "10.0.0.1", 0).admitted
    refused = q.admit(CLIENT, "10.0.0.1", 0)
    assert refused.ip_throttle_ms == 1000 and q.total == 1
    # the throttled one was taken back from the address's rate: one more window later the
    # address is within its rate again
    assert q.admit(CLIENT, "10.0.0.1", 2000).admitted
    # an address without its own value takes <default>'s; without either, no limit
    assert all(q.admit(CLIENT, "10.0.0.2", 0).admitted for _ in range(5))
    configs.set_ip(DEFAULT, 1)
    assert q.admit(CLIENT, "10.0.0.3", 0).admitted
    assert q.admit(CLIENT, "10.0.0.3", 0).ip_throttle_ms == 1000
    configs.set_ip(DEFAULT, None)
    assert q.admit(CLIENT, "10.0.0.3", 0).admitted


def test_an_ip_throttle_takes_the_connection_back_from_the_listener_and_broker_rates() -> None:
    configs = ClientQuotaConfigs()
    configs.set_ip("10.0.0.1", 1)
    q = quotas(quota_window_num=2, max_connection_rate=2)
    q.ip_rates = configs.ip_connection_rates
    for _ in range(5):  # what the acceptor does for each: record, then the address check
        assert q.record_accept(CLIENT, 0) == 0
        q.admit(CLIENT, "10.0.0.1", 0)
    # one admitted, four throttled and taken back: the broker has counted one connection
    assert q.broker_rate.measure(0) == pytest.approx(1.0)
    assert q.listeners[CLIENT].ip_throttles.measure(0) == 1000


def test_limits_from_configs_fall_back_to_the_broker_wide_values() -> None:
    config = BrokerConfig.from_properties({
        "zookeeper.connect": "zk:2181", "log.dirs": "/tmp/x",
        "listeners": "PLAINTEXT://:9092,CLIENT://:9093",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CLIENT:PLAINTEXT",
        "max.connections": "10", "listener.name.client.max.connections": "3",
        "listener.name.plaintext.max.connection.creation.rate": "7",
        "quota.window.num": "3",
    })

    def lookup(name: str) -> object:
        value = config.get(name)
        return value if value is not None else config.listener_overrides.get(name)

    limits = connection_limits(lookup, ["PLAINTEXT", "CLIENT"], "PLAINTEXT")
    assert limits.listener_max_connections == {"PLAINTEXT": 10, "CLIENT": 3}
    assert limits.listener_connection_rates == {"PLAINTEXT": 7, "CLIENT": INT_MAX}
    assert (limits.max_connections, limits.quota_window_num) == (10, 3)


@pytest.mark.parametrize(("key", "value", "message"), [
    ("max.connection.creation.rate", "-1",
     "Invalid value -1 for configuration max.connection.creation.rate: Value must be at "
     "least 0"),
    ("max.connection.creation.rate", "1.5",
     "Invalid value 1.5 for configuration max.connection.creation.rate: Not a number of "
     "type INT"),
    ("max.connections", "-2",
     "Invalid value -2 for configuration max.connections: Value must be at least 0"),
    # a per-listener key's range is checked under its own name, which says which listener
    ("listener.name.plaintext.max.connections", "-1",
     "Invalid value -1 for configuration listener.name.plaintext.max.connections: Value "
     "must be at least 0"),
    ("listener.name.plaintext.max.connection.creation.rate", "many",
     "Invalid value many for configuration max.connection.creation.rate: Not a number of "
     "type INT"),
])
def test_bad_values_stop_startup_with_kafkas_messages(key: str, value: str,
                                                      message: str) -> None:
    with pytest.raises(ConfigError) as refused:
        BrokerConfig.from_properties({"zookeeper.connect": "zk:2181", "log.dirs": "/tmp/x",
                                      key: value})
    assert str(refused.value) == message


def test_the_creation_rate_no_longer_stops_startup() -> None:
    config = BrokerConfig.from_properties({"zookeeper.connect": "zk:2181",
                                           "log.dirs": "/tmp/x",
                                           "max.connection.creation.rate": "10"})
    assert config["max.connection.creation.rate"] == 10
