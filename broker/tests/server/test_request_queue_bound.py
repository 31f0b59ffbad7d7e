"""The broker-wide bound on requests received and not yet handled (unit test of
network.RequestQueueBound): `queued.max.requests` counts them, `queued.max.request.bytes`
their bytes when set, and a connection parked on a full bound resumes once it drains."""

from __future__ import annotations

from moldau.server.network import RequestQueueBound


class ParkedConnection:
    def __init__(self) -> None:
        self.resumed = 0

    def resume_from_queue_bound(self) -> None:
        self.resumed += 1


def test_the_byte_bound_fills_before_the_count_bound() -> None:
    bound = RequestQueueBound(100, max_bytes=1000)
    bound.add([bytearray(600)])
    assert not bound.full()
    bound.add([bytearray(500)])
    assert bound.full() and bound.queued == 2 and bound.queued_bytes == 1100
    parked = ParkedConnection()
    bound.park(parked)  # type: ignore[arg-type]
    bound.release(1, 500)
    assert bound.full() is False and parked.resumed == 1


def test_without_a_byte_bound_only_the_count_counts() -> None:
    bound = RequestQueueBound(2)  # queued.max.request.bytes -1: Kafka's default
    bound.add([bytearray(10**7)])
    assert not bound.full()
    bound.add([bytearray(1)])
    assert bound.full()
    parked = ParkedConnection()
    bound.park(parked)  # type: ignore[arg-type]
    bound.release(1, 1)
    assert parked.resumed == 1 and not bound.full()
