"""How long a follower's fetch may wait at the leader: it is dropped when partitions
joined the fetcher after it was sent (ReplicaFetcher.restart_long_poll), and it waits no
longer than until a partition backing off may fetch again (ReplicaFetcher._max_wait_ms)."""

from __future__ import annotations

import asyncio
import time
from types import SimpleNamespace
from typing import Any

from moldau.replication.replica_fetcher import FetcherConfig, FetchState, ReplicaFetcher


def _fetcher(states: list[FetchState], in_flight: list[FetchState] | None) -> Any:
    fake: Any = SimpleNamespace(
        states={s.tp: s for s in states},
        _in_flight=in_flight,
        connection=object(), _restarting=False, disconnects=0)

    def disconnect() -> None:
        fake.disconnects += 1
        fake.connection = None

    fake._disconnect = disconnect
    return fake


def _restart(fetcher: Any) -> None:
    async def inside_a_loop() -> None:  # the fetcher reads the loop's clock
        ReplicaFetcher.restart_long_poll(fetcher)

    asyncio.run(inside_a_loop())


def _state(index: int, **kwargs: Any) -> FetchState:
    return FetchState(SimpleNamespace(topic="t", index=index), truncating=False, **kwargs)


def test_a_partition_readded_during_a_long_poll_restarts_the_fetch() -> None:
    old, other = _state(0), _state(1)
    fetcher = _fetcher([old, other], [old, other])
    fetcher.states[old.tp] = _state(0)  # a LeaderAndIsr at a new leader epoch re-added it
    _restart(fetcher)
    assert fetcher.disconnects == 1 and fetcher._restarting


def test_a_new_partition_restarts_the_fetch_too() -> None:
    first = _state(0)
    fetcher = _fetcher([first, _state(1)], [first])
    _restart(fetcher)
    assert fetcher.disconnects == 1


def test_a_fetch_that_asks_for_everything_is_left_alone() -> None:
    states = [_state(0), _state(1)]
    fetcher = _fetcher(states, states)
    _restart(fetcher)
    assert fetcher.disconnects == 0 and not fetcher._restarting


def test_a_partition_backing_off_does_not_restart_the_fetch() -> None:
    asked = _state(0)
    waiting = _state(1, delayed_until=time.monotonic() + 60)
    fetcher = _fetcher([asked, waiting], [asked])
    _restart(fetcher)
    assert fetcher.disconnects == 0


def test_nothing_happens_without_a_fetch_in_flight() -> None:
    fetcher = _fetcher([_state(0)], None)
    _restart(fetcher)
    assert fetcher.disconnects == 0


def test_the_long_poll_ends_when_a_partition_left_out_may_fetch_again() -> None:
    async def waits(states: list[FetchState]) -> int:
        fake: Any = SimpleNamespace(states={s.tp: s for s in states},
                                    config=FetcherConfig(broker_id=1, max_wait_ms=500))
        return ReplicaFetcher._max_wait_ms(fake)

    async def scenario() -> tuple[int, int]:
        soon = asyncio.get_running_loop().time() + 0.05  # UNKNOWN_LEADER_EPOCH's retry
        return (await waits([_state(0), _state(1)]),
                await waits([_state(0), _state(1, delayed_until=soon)]))

    everyone_in, one_backing_off = asyncio.run(scenario())
    assert everyone_in == 500
    assert 0 <= one_backing_off <= 50
