"""The errors of the ZooKeeper layer, and which kazoo exceptions they stand for."""

from __future__ import annotations

from typing import Any

from kazoo.exceptions import (
    BadVersionError,
    ConnectionClosedError,
    ConnectionLoss,
    KazooException,
    NodeExistsError,
    NoNodeError,
    OperationTimeoutError,
    RolledBackError,
    RuntimeInconsistency,
    SessionExpiredError,
)
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.retry import RetryFailedError

from moldau.errors import RequestTimedOutError

# kazoo's ways of saying ZooKeeper cannot be reached now (ZooKeeperUnavailableError).
UNAVAILABLE = (ConnectionLoss, OperationTimeoutError, SessionExpiredError, RetryFailedError,
               KazooTimeoutError, ConnectionClosedError)



class ZkError(Exception):
    """Base of the errors of the ZooKeeper layer."""


class ZooKeeperUnavailableError(ZkError, RequestTimedOutError):
    """No connection to ZooKeeper (at start, or for longer than an operation may wait).
    A request handler that meets it answers REQUEST_TIMED_OUT with this message."""


class ZkNodeExistsError(ZkError):
    """A znode that must not exist does (a broker id registered by another live broker)."""


class ZkNoNodeError(ZkError):
    """A znode that must exist does not."""


class ZkBadVersionError(ZkError):
    """A conditional write lost against a concurrent writer (the znode version moved)."""


class ControllerMovedError(ZkError):
    """The controller epoch moved: this broker is no longer (or not) the controller."""


def check_multi_results(results: list[Any], what: str) -> None:  # Any: kazoo's op results
    """Raise the error a failed multi-op (kazoo transaction) stands for, if any."""
    # A failed multi-op reports the failing op's error; the ops before it come back as
    # RolledBackError and those after it as RuntimeInconsistency.
    failures = [r for r in results if isinstance(r, Exception)
                and not isinstance(r, (RolledBackError, RuntimeInconsistency))]
    if not failures:
        return
    error = failures[0]
    if isinstance(error, BadVersionError):
        raise ControllerMovedError(f"{what}: the controller epoch moved") from error
    if isinstance(error, NodeExistsError):
        raise ZkNodeExistsError(f"{what}: already exist") from error
    if isinstance(error, NoNodeError):
        raise ZkNoNodeError(f"{what}: missing parent znode") from error
    raise error if isinstance(error, KazooException) else ZkError(str(error))
