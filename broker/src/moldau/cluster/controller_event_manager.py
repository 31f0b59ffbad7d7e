"""The controller's event queue (Kafka's ControllerEventManager): one event at a time, in
the order posted, so each sees the state the previous one left.

Only `Elect` runs while the broker is not the controller; anything else is dropped then
(an `Ask` fails with NOT_CONTROLLER). A conditional write that lost a race with a leader's
ISR update (or another writer) runs the event again on fresh state, as Kafka's controller
retries such partitions. An event that finds the controller epoch moved posts `Elect`,
which finds the new holder of /controller and resigns.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from moldau.cluster.controller_events import Ask, ControllerEvent, Elect, QueuedEvent
from moldau.cluster.zk_client import (
    ControllerMovedError,
    ZkBadVersionError,
    ZooKeeperUnavailableError,
)
from moldau.errors import NotControllerError

log = logging.getLogger("kafka.controller")

T = TypeVar("T")
BAD_VERSION_RETRIES = 5


class ControllerEventManager:
    def __init__(self, broker_id: int, process: Callable[[ControllerEvent], Awaitable[None]],
                 is_active: Callable[[], bool]) -> None:
        self.broker_id = broker_id
        self._process = process
        self._is_active = is_active
        self._events: asyncio.Queue[QueuedEvent] = asyncio.Queue()
        self._worker: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._worker = asyncio.ensure_future(self._run())

    async def stop(self) -> None:
        if self._worker is not None:
            self._worker.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._worker

    def post(self, event: QueuedEvent) -> None:
        self._events.put_nowait(event)

    async def ask(self, run: Callable[[], Awaitable[T]]) -> T:
        """Run `run()` as an event and return its result (or raise its error)."""
        future: asyncio.Future[T] = asyncio.get_running_loop().create_future()
        self.post(Ask(run, future))
        return await future

    async def _run(self) -> None:
        while True:
            event = await self._events.get()
            name = type(event).__name__
            if not isinstance(event, Elect) and not self._is_active():
                _fail(event, NotControllerError(f"broker {self.broker_id} is not the controller"))
                continue
            try:
                await self._with_retries(event, name)
            except asyncio.CancelledError:
                raise
            except ZooKeeperUnavailableError as exc:  # an outage, not a bug: no traceback
                log.error("[Controller id=%d] Could not process event %s: %s",
                          self.broker_id, name, exc)
            except ControllerMovedError as exc:  # another broker was elected meanwhile
                log.info("[Controller id=%d] Stopped processing event %s: %s",
                         self.broker_id, name, exc)
                _fail(event, NotControllerError(str(exc)))
                self.post(Elect())
            except Exception:
                log.exception("[Controller id=%d] Error processing event %s", self.broker_id,
                              name)

    async def _with_retries(self, event: QueuedEvent, name: str) -> None:
        for attempt in range(1, BAD_VERSION_RETRIES + 1):
            try:
                await (_answer(event) if isinstance(event, Ask) else self._process(event))
                return
            except ZkBadVersionError as exc:
                if attempt == BAD_VERSION_RETRIES:
                    _fail(event, exc)
                    raise
                log.info("[Controller id=%d] Retrying event %s: %s", self.broker_id, name, exc)
                await asyncio.sleep(0.02 * attempt)


async def _answer(ask: Ask[Any]) -> None:  # Any: asks of every result type share the queue
    """Run an Ask and settle its future; a lost conditional write is left to the retries,
    and any other failure is also raised so the loop logs it."""
    try:
        result = await ask.run()
    except ZkBadVersionError:
        raise
    except ControllerMovedError as exc:
        _fail(ask, NotControllerError(str(exc)))
        raise
    except Exception as exc:
        _fail(ask, exc)
        raise
    if not ask.future.done():
        ask.future.set_result(result)


def _fail(event: QueuedEvent, error: BaseException) -> None:
    """An Ask's caller gets the error (the first one set wins); other events have none."""
    if isinstance(event, Ask) and not event.future.done():
        event.future.set_exception(error)
