"""When the tools' client may try a broker again, and how long one attempt may take, as
Kafka's clients decide it (ClusterConnectionStates): each failed attempt at an address
doubles the wait before the next one, from reconnect.backoff.ms up to
reconnect.backoff.max.ms, and the time the next attempt may spend connecting, from
socket.connection.setup.timeout.ms up to its .max.ms; both with 20 % jitter, both reset
once a connection succeeds."""

from __future__ import annotations

import math
import random
import time
from collections.abc import Mapping
from dataclasses import dataclass

from moldau.tools.options import ToolError

JITTER = 0.2
DEFAULTS_MS = {
    "reconnect.backoff.ms": 50,
    "reconnect.backoff.max.ms": 1000,
    "socket.connection.setup.timeout.ms": 10000,
    "socket.connection.setup.timeout.max.ms": 30000,
}
Address = tuple[str, int]


def setting_ms(config: Mapping[str, str], key: str, default: int) -> int:
    """A millisecond setting of a client config; a value that is not a whole number is
    refused with Kafka's ConfigException wording."""
    text = str(config.get(key, default)).strip()
    try:
        value = int(text)
    except ValueError:
        raise ToolError(f"org.apache.kafka.common.config.ConfigException: Invalid value "
                        f"{text} for configuration {key}: Not a number of type LONG") from None
    if value < 0:
        raise ToolError(f"org.apache.kafka.common.config.ConfigException: Invalid value "
                        f"{value} for configuration {key}: Value must be at least 0")
    return value


@dataclass(frozen=True)
class ExponentialBackoff:
    """initial * 2^attempts with jitter, capped at maximum (Kafka's ExponentialBackoff)."""

    initial_ms: int
    maximum_ms: int

    def ms(self, attempts: int) -> float:
        if self.maximum_ms <= self.initial_ms or self.initial_ms == 0:
            return float(self.initial_ms)  # no growth: no jitter either, as Kafka
        ceiling = math.log(self.maximum_ms / self.initial_ms, 2)
        term = self.initial_ms * 2 ** min(attempts, ceiling)
        return min(term * random.uniform(1 - JITTER, 1 + JITTER), self.maximum_ms)


@dataclass
class _Failures:
    count: int = 0
    retry_at: float = 0.0  # time.monotonic()


class Reconnects:
    """Per-address failure counts of one client, and the timings they call for."""

    def __init__(self, config: Mapping[str, str]) -> None:
        ms = {key: setting_ms(config, key, default) for key, default in DEFAULTS_MS.items()}
        self.backoff = ExponentialBackoff(ms["reconnect.backoff.ms"],
                                          ms["reconnect.backoff.max.ms"])
        self.setup = ExponentialBackoff(ms["socket.connection.setup.timeout.ms"],
                                        ms["socket.connection.setup.timeout.max.ms"])
        self._failures: dict[Address, _Failures] = {}

    def setup_timeout(self, address: Address) -> float:
        """Seconds the next attempt at the address may take (TCP, TLS and SASL)."""
        failures = self._failures.get(address)
        return self.setup.ms(failures.count if failures else 0) / 1000

    def retry_at(self, address: Address) -> float:
        failures = self._failures.get(address)
        return failures.retry_at if failures else 0.0

    def failed(self, address: Address) -> None:
        failures = self._failures.setdefault(address, _Failures())
        failures.count += 1
        failures.retry_at = time.monotonic() + self.backoff.ms(failures.count - 1) / 1000

    def connected(self, address: Address) -> None:
        self._failures.pop(address, None)

    def wait_for(self, address: Address, deadline: float) -> bool:
        """Sleeps out the address's backoff; False when the deadline comes first."""
        pause = self.retry_at(address) - time.monotonic()
        if pause > 0:
            if time.monotonic() + pause > deadline:
                time.sleep(max(deadline - time.monotonic(), 0))
                return False
            time.sleep(pause)
        return True
