"""What every part of the transaction coordinator shares: its settings (the broker fills
them from Kafka's `transaction.*` and `transaction.state.log.*` keys), Kafka's logger
name, and the wall clock of the timestamps it stores."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

# Kafka's logger name, so operators' log filters keep matching
log = logging.getLogger("kafka.coordinator.transaction.TransactionCoordinator")


@dataclass(frozen=True)
class TransactionConfig:
    """Kafka's TransactionConfig, with its defaults."""

    transactional_id_expiration_ms: int = 7 * 24 * 3600 * 1000
    max_timeout_ms: int = 900000
    num_partitions: int = 50
    replication_factor: int = 3
    segment_bytes: int = 100 * 1024 * 1024
    load_buffer_size: int = 5 * 1024 * 1024
    min_insync_replicas: int = 2
    abort_timed_out_interval_ms: int = 10000
    remove_expired_interval_ms: int = 3600000
    request_timeout_ms: int = 30000  # the tombstones' append (request.timeout.ms)

    def valid_timeout(self, timeout_ms: int) -> bool:
        """InitProducerId's transaction timeout: positive, at most transaction.max.timeout.ms."""
        return 0 < timeout_ms <= self.max_timeout_ms


def now_ms() -> int:
    """Wall-clock milliseconds: the stored timestamps outlive the process."""
    return int(time.time() * 1000)
