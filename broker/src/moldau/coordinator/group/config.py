"""What every part of the group coordinator shares: its settings (the broker fills them
from Kafka's `group.*` and `offsets.*` keys), Kafka's logger name, and the wall clock of
the timestamps it stores."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

# Kafka's logger name for all of the coordinator, so operators' log filters keep matching
log = logging.getLogger("kafka.coordinator.group.GroupCoordinator")

NEW_MEMBER_JOIN_TIMEOUT_S = 300.0  # Kafka's NewMemberJoinTimeoutMs


@dataclass
class CoordinatorConfig:
    offsets_partitions: int = 50
    min_session_timeout_ms: int = 6000
    max_session_timeout_ms: int = 1800000
    initial_rebalance_delay_ms: int = 3000
    max_group_size: int = 2**31 - 1
    offset_metadata_max_bytes: int = 4096
    offsets_retention_ms: int = 7 * 24 * 3600 * 1000
    offsets_retention_check_interval_ms: int = 600000


def now_ms() -> int:
    """Wall-clock milliseconds: state and commit timestamps outlive the process."""
    return int(time.time() * 1000)
