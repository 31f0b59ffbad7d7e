"""What a JoinGroup and a SyncGroup answer. A request that must wait for the rest of the
group parks on a future of its member (`Member.awaiting_join`, `awaiting_sync`) that the
rebalance completes with one of these."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class JoinResult:
    error: int = 0
    member_id: str = ""
    generation: int = -1
    protocol_type: str | None = None
    protocol: str | None = None
    leader: str = ""
    skip_assignment: bool = False
    members: list[tuple[str, str | None, bytes]] = field(default_factory=list)


@dataclass
class SyncResult:
    error: int = 0
    protocol_type: str | None = None
    protocol: str | None = None
    assignment: bytes = b""
