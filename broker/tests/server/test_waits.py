"""The waits of the request path without asyncio.wait_for: a long poll's watch registered
before its task starts (no lost wake-up), wait_for_change's timeout, and the one timer
a BrokerConnection keeps for the timeouts of all its requests."""

from __future__ import annotations

import asyncio
import time
from types import SimpleNamespace
from typing import Any

import pytest

from moldau.client.broker_connection import BrokerConnection
from moldau.protocol.generated.api_versions_request import ApiVersionsRequest
from moldau.protocol.generated.api_versions_response import ApiVersionsResponse
from moldau.protocol.headers import encode_response
from moldau.replication.replica_manager import LeaderAndIsr, Partition, ReplicaManager

API_VERSIONS = 18


def _manager() -> ReplicaManager:
    return ReplicaManager(1, None)  # type: ignore[arg-type]  # waits need no logs


def _partition() -> Partition:
    """A partition whose log is only the offsets its waits look at."""
    log: Any = SimpleNamespace(high_watermark=0, last_stable_offset=0, log_end_offset=0)
    return Partition("t", 0, None, log, 1, LeaderAndIsr(1, 0, [1], [1]))


def test_a_change_between_watch_and_wait_is_not_missed() -> None:
    async def scenario() -> float:
        partition, manager = _partition(), _manager()
        watched = manager.watch([partition])
        partition.wake()  # an append before the long poll's task runs
        started = time.monotonic()
        await manager.wait_for_change([partition], 5.0, watched)
        assert partition.waiters == []
        return time.monotonic() - started

    assert asyncio.run(scenario()) < 1.0


def test_wait_for_change_times_out_and_unregisters() -> None:
    async def scenario() -> None:
        partitions = [_partition(), _partition()]
        started = time.monotonic()
        await _manager().wait_for_change(partitions, 0.05)
        assert 0.04 < time.monotonic() - started < 2.0
        assert all(p.waiters == [] for p in partitions)

    asyncio.run(scenario())


def test_a_wake_ends_the_wait_and_leaves_no_waiter_behind() -> None:
    async def scenario() -> None:
        woken, quiet = _partition(), _partition()
        asyncio.get_running_loop().call_later(0.01, woken.wake)
        await _manager().wait_for_change([woken, quiet], 5.0)
        assert woken.waiters == [] and quiet.waiters == []

    asyncio.run(scenario())


def test_a_follower_fetch_waits_through_high_watermark_moves() -> None:
    """A follower reads to the log end: a high watermark move alone (another follower
    caught up) leaves its fetch parked, while acks=all produces and consumers wake; an
    append or a change of state wakes it."""
    async def scenario() -> None:
        partition, manager = _partition(), _manager()
        follower = manager.watch([partition], isolation=None)
        produce = manager.watch([partition])
        partition.log.high_watermark = 1
        partition.wake_for_high_watermark()
        assert produce.done() and not follower.done()
        loop = asyncio.get_running_loop()
        loop.call_later(0.01, partition.appended)
        started = time.monotonic()
        await manager.wait_for_change([partition], 5.0, follower, isolation=None)
        assert time.monotonic() - started < 2.0
        assert partition.waiters == [] and partition.follower_waiters == []

    asyncio.run(scenario())


def test_a_manager_remembers_the_running_loop_only_while_it_runs() -> None:
    """watch() keeps the running loop (asking asyncio costs a system call per wait), but
    a manager that outlives its loop (one test's loop, then the next's) waits on the
    loop running now."""
    manager = _manager()

    async def wait_once() -> asyncio.AbstractEventLoop:
        partition = _partition()
        watched = manager.watch([partition])
        assert watched.get_loop() is asyncio.get_running_loop()
        asyncio.get_running_loop().call_later(0.01, partition.wake)
        await manager.wait_for_change([partition], 5.0, watched)
        return asyncio.get_running_loop()

    first, second = asyncio.run(wait_once()), asyncio.run(wait_once())
    assert first is not second


class _Transport:
    def __init__(self) -> None:
        self.written: list[bytes] = []
        self.closed = False

    def write(self, data: bytes) -> None:
        self.written.append(data)

    def close(self) -> None:
        self.closed = True


def _answer(connection: BrokerConnection, correlation: int) -> None:
    frame = encode_response(correlation, API_VERSIONS, 3, ApiVersionsResponse(error_code=0))
    connection.on_frame(bytearray(frame[4:]))


def _request(connection: BrokerConnection, timeout_s: float) -> Any:
    return connection.request(API_VERSIONS, 3, ApiVersionsRequest(
        client_software_name="t", client_software_version="1"), timeout_s)


def test_requests_answered_in_time_leave_the_connection_open() -> None:
    async def scenario() -> None:
        transport = _Transport()
        connection = BrokerConnection(transport, "t")
        loop = asyncio.get_running_loop()
        for correlation in (1, 2, 3):
            loop.call_soon(_answer, connection, correlation)
            answer = await _request(connection, 0.05)
            assert answer.error_code == 0
        await asyncio.sleep(0.1)  # the timer fires with nothing pending: nothing happens
        assert not connection.closed and not transport.closed

    asyncio.run(scenario())


def test_a_request_past_its_timeout_fails_and_closes_the_connection() -> None:
    async def scenario() -> None:
        transport = _Transport()
        connection = BrokerConnection(transport, "t")
        slow = asyncio.ensure_future(_request(connection, 10.0))
        await asyncio.sleep(0)
        started = time.monotonic()
        with pytest.raises(TimeoutError):
            await _request(connection, 0.05)  # a shorter deadline re-arms the timer
        assert time.monotonic() - started < 2.0
        assert connection.closed and transport.closed
        with pytest.raises(ConnectionError):  # the others fail with the connection
            await slow

    asyncio.run(scenario())


def test_the_timer_follows_the_earliest_pending_deadline() -> None:
    async def scenario() -> None:
        connection = BrokerConnection(_Transport(), "t")
        loop = asyncio.get_running_loop()
        loop.call_later(0.02, _answer, connection, 1)
        assert (await _request(connection, 0.04)).error_code == 0
        # the timer armed for the first request fires while the second is pending: it
        # must re-arm for the second's deadline, not fail it early
        second = asyncio.ensure_future(_request(connection, 0.3))
        await asyncio.sleep(0.1)
        assert not second.done() and not connection.closed
        _answer(connection, 2)
        assert (await second).error_code == 0

    asyncio.run(scenario())
