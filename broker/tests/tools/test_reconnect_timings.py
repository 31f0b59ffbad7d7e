"""The connection timings of the tools' client, as Kafka's ClusterConnectionStates grows
them: the setup timeout and the reconnect backoff double per failed attempt at an
address, within 20 % jitter, up to their maximums, and reset after a success."""

from __future__ import annotations

import pytest

from moldau.tools.options import ToolError
from moldau.tools.reconnect import ExponentialBackoff, Reconnects

ADDRESS = ("127.0.0.1", 9092)


def test_the_defaults_grow_from_10_to_30_s_and_50_ms_to_1_s() -> None:
    reconnects = Reconnects({})
    timeouts = []
    for _ in range(8):
        timeouts.append(reconnects.setup_timeout(ADDRESS))
        reconnects.failed(ADDRESS)
    pauses = [reconnects.backoff.ms(attempts) for attempts in range(8)]
    assert 8.0 <= timeouts[0] <= 12.0 and 16.0 <= timeouts[1] <= 24.0
    # at the top the jitter still applies below the maximum, as Kafka's does
    assert all(t <= 30.0 for t in timeouts) and 24.0 <= timeouts[-1] <= 30.0
    assert 40 <= pauses[0] <= 60 and 80 <= pauses[1] <= 120
    assert all(p <= 1000 for p in pauses) and 800 <= pauses[-1] <= 1000
    reconnects.connected(ADDRESS)
    assert 8.0 <= reconnects.setup_timeout(ADDRESS) <= 12.0
    assert reconnects.retry_at(ADDRESS) == 0.0


def test_client_properties_set_the_timings() -> None:
    reconnects = Reconnects({"socket.connection.setup.timeout.ms": "200",
                             "socket.connection.setup.timeout.max.ms": "300",
                             "reconnect.backoff.ms": "0"})
    assert 0.16 <= reconnects.setup_timeout(ADDRESS) <= 0.24
    for _ in range(4):
        reconnects.failed(ADDRESS)
    assert 0.24 <= reconnects.setup_timeout(ADDRESS) <= 0.3
    assert ExponentialBackoff(0, 1000).ms(5) == 0  # no backoff at all, as Kafka
    assert ExponentialBackoff(500, 100).ms(3) == 500  # a max below the base: the base


def test_a_value_that_is_no_number_is_kafkas_config_exception() -> None:
    with pytest.raises(ToolError, match=r"Invalid value soon for configuration "
                                        r"reconnect\.backoff\.ms: Not a number of type LONG"):
        Reconnects({"reconnect.backoff.ms": "soon"})
