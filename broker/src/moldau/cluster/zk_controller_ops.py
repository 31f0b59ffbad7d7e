"""KafkaZkClient's operations for the controller: its election and resignation
(/controller, /controller_epoch), and the notifications brokers send it (ISR changes,
failed log dirs).

Each function is a method of KafkaZkClient, which binds it in its class body (zk_client.py);
it takes the ZkSession it runs on and uses its generic operations (zk_session.py).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError

from moldau.cluster import zk_data as zd
from moldau.cluster.zk_errors import check_multi_results

if TYPE_CHECKING:
    from moldau.cluster.zk_session import ZkSession

# The logger of the ZooKeeper client, whichever of its modules logs.
log = logging.getLogger("moldau.cluster.zk_client")


def get_controller_id(self: ZkSession) -> int | None:
    found = self.get(zd.CONTROLLER_PATH)
    return zd.decode_controller(found[0]) if found else None


def get_controller_epoch(self: ZkSession) -> tuple[int, int] | None:
    """(controller epoch, znode version of /controller_epoch), or None before the first
    election."""
    found = self.get(zd.CONTROLLER_EPOCH_PATH)
    return (zd.decode_controller_epoch(found[0]), found[1].version) if found else None


def try_elect_controller(self: ZkSession, broker_id: int) -> int | None:
    """registerControllerAndIncrementControllerEpoch: create the ephemeral /controller
    (checked against the /controller_epoch version we read), then bump the epoch with a
    conditional write. Returns the new epoch, or None when another broker won."""
    zk = self._client()
    self._create_if_missing(zd.CONTROLLER_EPOCH_PATH,
                            zd.encode_controller_epoch(zd.INITIAL_CONTROLLER_EPOCH - 1))
    current = get_controller_epoch(self)
    if current is None:
        return None
    epoch, epoch_version = current

    def commit() -> list[Any]:  # Any: kazoo's untyped per-op results
        txn = zk.transaction()
        txn.check(zd.CONTROLLER_EPOCH_PATH, epoch_version)
        txn.create(zd.CONTROLLER_PATH, zd.encode_controller(broker_id), ephemeral=True)
        return txn.commit()

    results = self._call(commit)
    if isinstance(results[0], BadVersionError):
        return None  # the epoch moved under us: someone else was elected
    if isinstance(results[1], NodeExistsError):
        found = self.get(zd.CONTROLLER_PATH)
        if found is None or found[1].ephemeralOwner != self._current_session_id():
            return None
    elif isinstance(results[1], Exception):
        check_multi_results(results, "controller election")
    try:
        stat = self._call(zk.set, zd.CONTROLLER_EPOCH_PATH,
                          zd.encode_controller_epoch(epoch + 1), epoch_version)
    except BadVersionError:
        return None  # ControllerMovedException in Kafka
    self.controller_epoch_zk_version = stat.version
    log.info("broker %d elected controller, epoch %d", broker_id, epoch + 1)
    return epoch + 1


def resign_controller(self: ZkSession) -> bool:
    """Delete /controller if this session holds it; True when it did."""
    found = self.get(zd.CONTROLLER_PATH)
    if found is None or found[1].ephemeralOwner != self._current_session_id():
        return False
    try:
        self._call(self._client().delete, zd.CONTROLLER_PATH, found[1].version)
    except (NoNodeError, BadVersionError):
        return False
    return True


# -- notifications to the controller ----------------------------------------------------


def _notify(self: ZkSession, parent: str, prefix: str, data: bytes) -> str:
    """A sequential notification znode under parent (the controller watches it)."""
    created = self._call(self._client().create, f"{parent}/{prefix}", data,
                         sequence=True, makepath=True)
    return created.rsplit("/", 1)[1]


def _take_notifications(self: ZkSession, parent: str, prefix: str) -> list[bytes]:
    """The data of every pending notification under parent; the notifications go."""
    zk = self._client()
    paths = [f"{parent}/{c}" for c in self.get_children(parent) if c.startswith(prefix)]
    out = []
    for path, found in zip(paths, self._get_many(paths), strict=True):
        if found is not None:
            out.append(found[0])
        with contextlib.suppress(NoNodeError):
            self._call(zk.delete, path)
    return out


def create_isr_change_notification(self: ZkSession,
                                   partitions: Iterable[tuple[str, int]]) -> str:
    """A leader changed ISRs in ZooKeeper: tell the controller."""
    return _notify(self, zd.ISR_CHANGE_NOTIFICATION_PATH, zd.ISR_CHANGE_PREFIX,
                   zd.encode_isr_change(sorted(partitions)))


def take_isr_change_notifications(self: ZkSession) -> set[tuple[str, int]]:
    """The partitions named by every pending ISR change notification."""
    changed: set[tuple[str, int]] = set()
    for data in _take_notifications(self, zd.ISR_CHANGE_NOTIFICATION_PATH,
                                    zd.ISR_CHANGE_PREFIX):
        changed |= zd.decode_isr_change(data)
    return changed


def create_log_dir_event_notification(self: ZkSession, broker_id: int) -> str:
    """A log dir of this broker failed: tell the controller."""
    return _notify(self, zd.LOG_DIR_EVENT_NOTIFICATION_PATH, zd.LOG_DIR_EVENT_PREFIX,
                   zd.encode_log_dir_event(broker_id))


def take_log_dir_event_notifications(self: ZkSession) -> set[int]:
    """The brokers named by every pending log dir event notification."""
    brokers = set()
    for data in _take_notifications(self, zd.LOG_DIR_EVENT_NOTIFICATION_PATH,
                                    zd.LOG_DIR_EVENT_PREFIX):
        with contextlib.suppress(Exception):  # an unreadable one is dropped
            brokers.add(zd.decode_log_dir_event(data))
    return brokers
