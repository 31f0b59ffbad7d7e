"""The client quotas' measurement (server/rate_sensors.py) against Kafka's arithmetic:
Rate over sampled windows with its lower bound on the span, QuotaUtils' throttle time,
the token bucket of the controller mutation quota."""

from __future__ import annotations

import pytest

from moldau.server.rate_sensors import (
    Avg,
    Max,
    Rate,
    TokenBucket,
    WindowConfig,
    java_round,
    throttle_time_ms,
    token_throttle_time_ms,
)

ELEVEN_BY_ONE = WindowConfig.of(11, 1)


def test_a_fresh_rate_is_measured_over_samples_minus_one_windows() -> None:
    rate = Rate(ELEVEN_BY_ONE)
    rate.record(1000, 0.0)
    # 0 ms elapsed, no full window: the span is 10 windows, not 0 (no burst is infinite)
    assert rate.window_ms(0.0) == 10_000
    assert rate.measure(0.0) == pytest.approx(100.0)
    # 500 ms in: still 10 missing windows added to the elapsed time
    assert rate.window_ms(500.0) == 10_500
    assert rate.measure(500.0) == pytest.approx(1000 / 10.5)


def test_the_span_is_the_elapsed_time_once_it_has_the_windows() -> None:
    rate = Rate(ELEVEN_BY_ONE)
    for second in range(11):
        rate.record(100, second * 1000.0)
    # 11 windows with 100 each; 10.5 s since the oldest started (10 full windows)
    assert rate.window_ms(10_500.0) == 10_500
    assert rate.measure(10_500.0) == pytest.approx(1100 / 10.5)


def test_old_windows_roll_out() -> None:
    rate = Rate(WindowConfig.of(3, 1))
    rate.record(900, 0.0)
    rate.record(30, 3_500.0)
    # the first window's last event is 3 windows old: it no longer counts
    assert rate.windows.total(3_500.0) == 30
    assert rate.measure(3_500.0) == pytest.approx(30 / 2.0)


def test_a_window_that_is_full_is_replaced() -> None:
    rate = Rate(WindowConfig.of(2, 1))
    rate.record(1, 0.0)
    rate.record(2, 1000.0)  # a second window
    assert rate.windows.total(1999.0) == 3
    rate.record(4, 2000.0)  # a third; the first's last event is two windows old
    assert rate.windows.total(2000.0) == 6
    rate.record(8, 2500.0)
    assert rate.windows.total(2999.0) == 14
    assert rate.windows.total(3000.0) == 12


def test_throttle_time_is_kafkas_formula() -> None:
    # O = 150, T = 100 over W = 10 s: X = 0.5 x 10 s
    assert throttle_time_ms(150.0, 100.0, 10_000.0) == 5_000
    # rounded half up, as Math.round
    assert throttle_time_ms(100.0125, 100.0, 10_000.0) == 1
    assert java_round(2.5) == 3 and java_round(-2.5) == -2


def test_a_burst_over_the_quota_is_throttled_by_the_formula() -> None:
    rate = Rate(ELEVEN_BY_ONE)
    rate.record(2_000_000, 0.0)  # 2 MB at once against 100 kB/s
    observed = rate.measure(0.0)
    delay = throttle_time_ms(observed, 100_000.0, rate.window_ms(0.0))
    assert observed == pytest.approx(200_000.0)
    assert delay == 10_000
    # O x W / (W + X) = T
    assert observed * 10_000 / (10_000 + delay) == pytest.approx(100_000.0)


def test_avg_is_the_mean_of_the_windows_values() -> None:
    avg = Avg(ELEVEN_BY_ONE)
    assert avg.measure(0.0) == 0.0
    avg.record(100, 0.0)
    avg.record(300, 10.0)
    assert avg.measure(20.0) == 200.0


def test_max_is_the_largest_value_of_the_windows_until_they_roll_out() -> None:
    # Kafka's Max over 2 windows of 30 s (the transaction coordinator's load times)
    largest = Max(WindowConfig.of(2, 30))
    assert largest.measure(0.0) == 0.0  # Kafka: NaN
    largest.record(5.0, 0.0)
    largest.record(40.0, 1_000.0)
    largest.record(7.0, 31_000.0)  # the next window
    assert largest.measure(31_000.0) == 40.0
    assert largest.measure(61_000.0) == 7.0  # the first window is gone
    assert largest.measure(200_000.0) == 0.0


def test_the_token_bucket_starts_full_and_may_go_negative() -> None:
    bucket = TokenBucket(WindowConfig.of(11, 1))
    assert bucket.burst(2.0) == 22.0
    assert bucket.measure(2.0, 0.0) == 22.0
    bucket.record(30, 2.0, 0.0)  # a mutation takes its permits even past empty
    assert bucket.measure(2.0, 0.0) == -8.0
    # refilled at the quota's rate: 4 s later, 8 tokens more
    assert bucket.measure(2.0, 4_000.0) == pytest.approx(0.0)
    # never above the burst
    assert bucket.measure(2.0, 1_000_000.0) == 22.0
    assert token_throttle_time_ms(-8.0, 2.0) == 4_000
