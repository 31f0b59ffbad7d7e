"""The replication throttle's token bucket and replica lists, on a fake clock."""

from __future__ import annotations

import pytest

from moldau.replication.throttle import UNLIMITED, ByteRateQuota, is_throttled
from moldau.storage.config import ConfigError, LogConfig


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_the_bucket_holds_traffic_to_the_rate_plus_one_second() -> None:
    clock = Clock()
    quota = ByteRateQuota(lambda: 1000.0, clock)
    taken = 0
    for _ in range(1000):  # 10 s in steps of 10 ms, taking whatever is allowed
        allowed = quota.available()
        if allowed > 0:
            step = int(min(allowed, 300))
            quota.record(step)
            taken += step
        clock.now += 0.01
    assert 9000 <= taken <= 1000 * 10 + 1000


def test_an_unlimited_rate_allows_everything_and_a_new_rate_applies_at_once() -> None:
    clock = Clock()
    rate = [UNLIMITED]
    quota = ByteRateQuota(lambda: rate[0], clock)
    assert quota.available() == UNLIMITED
    quota.record(10**9)
    rate[0] = 500.0
    assert quota.available() == 500.0  # a fresh limit starts with one second of it
    quota.record(800)
    assert quota.available() < 0
    clock.now += 1.0
    assert 0 < quota.available() <= 500


def test_replica_lists_name_partition_and_broker() -> None:
    config = LogConfig.from_properties({"follower.replication.throttled.replicas": "0:2, 3:1",
                                        "leader.replication.throttled.replicas": "*"})
    assert is_throttled(config, "follower", 0, 2)
    assert is_throttled(config, "follower", 3, 1)
    assert not is_throttled(config, "follower", 0, 1)
    assert is_throttled(config, "leader", 7, 9)
    assert not is_throttled(LogConfig(), "leader", 0, 1)


@pytest.mark.parametrize("value", ["x", "0:", ":1", "0-1", "*,0:1"])
def test_malformed_replica_lists_are_refused(value: str) -> None:
    with pytest.raises(ConfigError, match="must be the literal"):
        LogConfig.from_properties({"leader.replication.throttled.replicas": value})


def test_a_follower_asks_again_soon_when_its_leader_only_lags_the_controller() -> None:
    from moldau.replication.replica_fetcher import retry_delay_s

    # UNKNOWN_LEADER_EPOCH, NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_OR_PARTITION: the leader
    # has not applied the controller's LeaderAndIsr yet; it will within milliseconds
    for code in (75, 6, 3):
        assert retry_delay_s(code, 1.0) <= 0.1
    assert retry_delay_s(75, 0.02) == 0.02  # never longer than the configured backoff
    for code in (74, 56, -1):  # FENCED_LEADER_EPOCH waits for our own LeaderAndIsr
        assert retry_delay_s(code, 1.0) == 1.0


def test_a_follower_caught_up_to_the_leader_is_not_throttled() -> None:
    """Kafka's shouldFollowerThrottle: only a follower short of the leader's high watermark
    waits for tokens. One that caught up (a new replica now in the ISR) fetches freely, or
    every acks=all produce would wait while the bucket is empty."""
    from types import SimpleNamespace

    from moldau.replication.replica_fetcher import FetcherConfig, FetchState, ReplicaFetcher
    from moldau.replication.throttle import ReplicationThrottle

    clock = Clock()
    throttle = ReplicationThrottle("follower", 2, lambda topic: LogConfig.from_properties(
        {"follower.replication.throttled.replicas": "*"}), lambda: 1000.0)
    throttle.quota = ByteRateQuota(lambda: 1000.0, clock)
    throttle.quota.available()
    throttle.quota.record(5000)  # the bucket is empty: the moving partitions took it all
    fetcher = SimpleNamespace(throttle=throttle, config=FetcherConfig(broker_id=2))
    moving = FetchState(SimpleNamespace(topic="t", index=0), truncating=False)
    moving.lag = 700
    in_sync = FetchState(SimpleNamespace(topic="t", index=1), truncating=False,
                         caught_up=True)
    fresh = FetchState(SimpleNamespace(topic="t", index=2), truncating=False)  # no answer yet
    limits = ReplicaFetcher._throttled_limits(fetcher, [moving, in_sync, fresh])  # type: ignore[arg-type]
    assert limits == {("t", 0): 0, ("t", 2): 0}
