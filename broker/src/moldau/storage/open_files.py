"""A warning in the log well before the broker runs out of file descriptors.

Every segment keeps its `.log` open, so the partitions and segments a broker holds, plus
its connections, count against the open-files limit (RLIMIT_NOFILE, `LimitNOFILE` of the
systemd unit). At the limit a new segment or partition cannot be opened and its log dir
goes offline, as in Kafka. The log manager checks at startup and then periodically; the
same figures are exported as `process_open_fds` / `process_max_fds` (metrics/process.py),
which the OpenFilesNearLimit alert rule watches.
"""

from __future__ import annotations

import logging
import resource

import psutil

log = logging.getLogger(__name__)

WARN_FRACTION = 0.8  # of the soft limit
CHECK_INTERVAL_MS = 30_000  # counting lists /proc/self/fd: about 1 ms per 5,000 descriptors


def open_descriptors() -> int:
    return psutil.Process().num_fds()


class OpenFilesWatch:
    """Logs a WARN when the open descriptors pass WARN_FRACTION of the soft limit, again
    at each further tenth of the headroom used, and an INFO once back below."""

    def __init__(self, fraction: float = WARN_FRACTION) -> None:
        self.fraction = fraction
        self._warned_at = 0  # the descriptor count of the last warning; 0: below

    def check(self, segments: int | None = None) -> bool:
        """Compare the open descriptors with the limit; True while above the threshold.
        segments: how many segments the broker holds open, for the message."""
        soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if soft == resource.RLIM_INFINITY:
            return False
        count = open_descriptors()
        threshold = int(soft * self.fraction)
        if count < threshold:
            if self._warned_at:
                log.info("Open file descriptors back to %d of %d", count, soft)
            self._warned_at = 0
            return False
        step = max(1, (soft - threshold) // 10)
        if not self._warned_at or count >= self._warned_at + step:
            self._warned_at = count
            held = f" ({segments} of them segment files)" if segments is not None else ""
            log.warning(
                "%d open file descriptors%s, %.0f%% of the limit of %d (RLIMIT_NOFILE): at"
                " the limit new segments and partitions cannot be opened and their log dir"
                " goes offline. Raise LimitNOFILE in the broker's systemd unit"
                " (broker_limit_nofile of the Ansible role; ulimit -n outside systemd): one"
                " descriptor per segment plus connections (docs/broker.md)",
                count, held, 100 * count / soft, soft)
        return True
