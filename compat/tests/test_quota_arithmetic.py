"""Moldau's client quota arithmetic against Kafka 3.9.1's own: the same scripts of records,
un-records (a throttled fetch's) and readings, on the same clock, through Kafka's
ClientQuotaManager (compat/java/QuotaArithmetic.java) and Moldau's
(broker/src/moldau/server/quota_managers.py), give the same throttle times and the same
byte-rate readings. No broker: the measurement alone."""

from __future__ import annotations

import math
import random

import pytest

from compat import javac, launcher
from moldau.server.client_quota_configs import ClientQuotaConfigs, QuotaEntity
from moldau.server.quota_managers import ClientQuotaManager
from moldau.server.rate_sensors import WindowConfig

Op = tuple[str, int] | tuple[str, int, int]
BEAN = "kafka.server:type=Produce,client-id=c"


def script(seed: int, bound: float, length: int = 2000) -> list[Op]:
    """Records of many sizes (from a thousandth of the quota to ten times it) at gaps
    around the window edges (0, 1 ms, just under, at and over a window, past the whole
    span), a fifth of them taken back out as a throttled fetch's are, and readings between
    them."""
    rnd = random.Random(seed)
    ops: list[Op] = []
    now = rnd.randint(0, 5000)
    for _ in range(length):
        now += rnd.choice([0, 1, 3, 10, 50, 200, 999, 1000, 1001, 2500, 12_000])
        value = int(bound * rnd.choice([0.001, 0.0655, 0.123457, 1, 10]))
        ops.append(("r", now, value))
        if rnd.random() < 0.2:
            ops.append(("u", now, value))
        if rnd.random() < 0.3:
            now += rnd.choice([0, 1, 500, 1000])
            ops.append(("m", now))
    return ops


def kafka(samples: int, window_s: int, bound: float, ops: list[Op]) -> list[float]:
    text = "".join(" ".join(map(str, op)) + "\n" for op in ops)
    run = launcher.run_tool("QuotaArithmetic", [str(samples), str(window_s), repr(bound)],
                            stdin=text, extra_classpath=[str(javac.classes_dir())])
    assert run.exit_code == 0, run.stderr
    return [float(line) for line in run.stdout.split()]


def moldau(samples: int, window_s: int, bound: float, ops: list[Op]) -> list[float]:
    configs = ClientQuotaConfigs()
    configs.set_client(QuotaEntity(None, "c"), {"producer_byte_rate": bound})
    manager = ClientQuotaManager("Produce", "producer_byte_rate", "byte-rate", configs,
                                 WindowConfig.of(samples, window_s), lambda: 0.0)
    out: list[float] = []
    for op in ops:
        kind, now = op[0], float(op[1])
        if kind == "r":
            out.append(manager.record("ANONYMOUS", "c", op[2], now))  # type: ignore[misc]
        elif kind == "u":
            manager.record_no_throttle("ANONYMOUS", "c", -op[2], now)  # type: ignore[misc]
        else:
            bean = manager.beans(now).get(BEAN)
            out.append(float(bean["byte-rate"]) if bean else math.nan)  # type: ignore[arg-type]
    return out


@pytest.mark.parametrize(("samples", "bound", "seed"), [
    (11, 1_000_000.0, 1),   # Kafka's default windows, the book's 1 MB/s
    (11, 10_000_000.0, 2),  # ... and its 10 MB/s
    (2, 1_000_000.0, 3),    # the short windows of make test's quota tests
    (5, 3333.0, 4),
])
def test_throttle_times_and_readings_are_kafkas(samples: int, bound: float, seed: int) -> None:
    ops = script(seed, bound)
    expected = kafka(samples, 1, bound, ops)
    got = moldau(samples, 1, bound, ops)
    assert len(got) == len(expected) == sum(op[0] != "u" for op in ops)
    differing = [(op, e, g) for op, e, g in zip((o for o in ops if o[0] != "u"), expected, got,
                                                strict=True)
                 if not (e == g or (math.isnan(e) and math.isnan(g)))]
    assert not differing, differing[:5]
    assert any(e > 0 for op, e in zip((o for o in ops if o[0] != "u"), expected, strict=True)
               if op[0] == "r")  # the scripts do get throttled
