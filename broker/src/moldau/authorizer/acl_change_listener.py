"""Follows the ACL change notifications (Kafka's ZkNodeChangeNotificationListener on
`/kafka-acl-changes` and `/kafka-acl-extended-changes`): each new `acl_changes_<seq>` node,
in order, names one resource pattern to re-read; notifications older than 15 minutes are
deleted on the way.

kazoo's children watches only wake the listener's own thread, which does the reads: a
watch callback must not block kazoo's event thread, and the handler re-reads ZooKeeper.
A pass that fails while ZooKeeper is away is retried until it succeeds.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from kazoo.recipe.watchers import ChildrenWatch

from moldau.authorizer.acl_store import AclStore, AclStoreUnavailableError, sequence_number
from moldau.security.acls import CHANGE_ROOTS, ResourcePattern, decode_acl_change

log = logging.getLogger("kafka.common.ZkNodeChangeNotificationListener")

# ZkNodeChangeNotificationListener's changeExpirationMs
CHANGE_EXPIRATION_MS = 15 * 60 * 1000
_RETRY_S = 0.5


class AclChangeListener:
    """Calls `on_change(pattern)` on its thread for every change notification after the
    ones it has seen (all present ones on the first pass, as Kafka's listener does)."""

    def __init__(self, store: AclStore, on_change: Callable[[ResourcePattern], None],
                 expiration_ms: int = CHANGE_EXPIRATION_MS) -> None:
        self.store = store
        self.on_change = on_change
        self.expiration_ms = expiration_ms
        self._last_seen: dict[str, int] = {}
        self._pending: set[str] = set()
        self._wake = threading.Condition()
        self._stopped = False
        self._failing = False  # the last pass met an outage
        self._thread = threading.Thread(target=self._run, name="acl-change-listener",
                                        daemon=True)

    def start(self) -> None:
        """Start the thread, then watch both change roots (which must exist)."""
        self._thread.start()
        for root in CHANGE_ROOTS:
            ChildrenWatch(self.store.zk, root, self._watcher(root))

    def stop(self) -> None:
        with self._wake:
            self._stopped = True
            self._wake.notify()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout=5)

    def _watcher(self, root: str) -> Callable[[list[str]], bool | None]:
        def on_children(_children: list[str]) -> bool | None:
            if self._stopped:
                return False  # kazoo drops the watch
            self._request(root)
            return None
        return on_children

    def _request(self, root: str) -> None:
        with self._wake:
            self._pending.add(root)
            self._wake.notify()

    def _run(self) -> None:
        while True:
            with self._wake:
                while not self._pending and not self._stopped:
                    self._wake.wait()
                if self._stopped:
                    return
                roots, self._pending = self._pending, set()
            for root in sorted(roots):
                try:
                    self.process(root)
                except AclStoreUnavailableError as exc:
                    # once per outage at WARNING: the retries go on every half second
                    level = logging.DEBUG if self._failing else logging.WARNING
                    log.log(level, "Could not read ACL change notifications under %s, "
                            "retrying: %s", root, exc)
                    self._failing = True
                    self._retry_later(root)
                    continue
                except Exception:  # a bug, not an outage: the next notification retries
                    log.exception("Error processing ACL change notifications under %s", root)
                if self._failing:
                    log.info("Reading ACL change notifications again")
                    self._failing = False

    def _retry_later(self, root: str) -> None:
        with self._wake:
            if not self._stopped:
                self._wake.wait(_RETRY_S)  # woken early by stop()
            self._pending.add(root)

    def process(self, root: str) -> None:
        """One pass over a change root: hand each unseen notification to on_change, in
        order, then delete the expired ones."""
        nodes = self.store.change_nodes(root)
        last_seen = self._last_seen.get(root, -1)
        for node in nodes:
            number = sequence_number(node.name)
            if number <= last_seen:
                continue
            try:
                pattern = decode_acl_change(root, node.data)
            except ValueError as exc:
                log.error("Ignoring malformed ACL change notification %s/%s: %s", root,
                          node.name, exc)
            else:
                self.on_change(pattern)
            self._last_seen[root] = last_seen = number
        now_ms = time.time() * 1000
        expired = [node.name for node in nodes if now_ms - node.ctime_ms > self.expiration_ms]
        if expired:
            self.store.delete_change_nodes(root, expired)
