"""The event-loop timers that stand in for Kafka's purgatories, kept by group and member so
they can be restarted and cancelled: per group, the join timer (the initial delay, then
the rebalance timeout) and the pending-sync timer; per member, its session timer, or
for a member id handed out with MEMBER_ID_REQUIRED, the time it has to join with it.

Only bookkeeping: what happens when a timer fires is the rebalance's business."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass

from .group import Group


@dataclass
class GroupTimers:
    join: asyncio.TimerHandle | None = None
    pending_sync: asyncio.TimerHandle | None = None
    initial_delay_left_ms: int | None = None  # set while the initial delay runs


class CoordinatorTimers:
    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self._groups: dict[str, GroupTimers] = {}
        self._members: dict[tuple[str, str], asyncio.TimerHandle] = {}

    def of_group(self, group: Group) -> GroupTimers:
        timers = self._groups.get(group.group_id)
        if timers is None:
            timers = self._groups[group.group_id] = GroupTimers()
        return timers

    def start_member(self, group_id: str, member_id: str, delay_s: float,
                     callback: Callable[[], object]) -> None:
        """Start the member's timer, replacing the one it had."""
        self.cancel_member(group_id, member_id)
        self._members[(group_id, member_id)] = self.loop.call_later(delay_s, callback)

    def member_fired(self, group_id: str, member_id: str) -> None:
        """The member's timer ran: forget its handle."""
        self._members.pop((group_id, member_id), None)

    def cancel_member(self, group_id: str, member_id: str) -> None:
        timer = self._members.pop((group_id, member_id), None)
        if timer is not None:
            timer.cancel()

    def cancel_group(self, group: Group) -> None:
        """The group's timers and those of its members and pending member ids."""
        timers = self._groups.pop(group.group_id, None)
        if timers is not None:
            for handle in (timers.join, timers.pending_sync):
                if handle is not None:
                    handle.cancel()
        for member_id in list(group.members) + list(group.pending_members):
            self.cancel_member(group.group_id, member_id)
