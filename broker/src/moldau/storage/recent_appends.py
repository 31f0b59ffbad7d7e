"""The last appends to a partition's active segment: where each starts and, while they are
small, their bytes, so a fetch at the tail reads neither an index nor the file.

A caught-up follower's next fetch starts at the first batch of an append it has not seen
(as does a consumer's at the high watermark): knowing that batch's position saves the
index lookup and the pread of batch headers, and holding the bytes just written saves
the pread of the records (the fetch handler copies small answers into the response
rather than using sendfile). The bytes are those the append already had in hand (a view
of the request that brought them, a copy only when that request holds much more), kept
under a cap per partition and one for the whole process; the oldest go first.

Everything here describes the active segment as it is: PartitionLog clears it whenever
segments roll, go, or are cut or replaced, and on close.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .segment import LogSegment

# How many appends a partition remembers the position of
RECENT_APPENDS = 16
# The bytes of recent appends kept per partition: an append larger than this is not
# kept (a large answer goes out with sendfile, which needs no read)
PARTITION_BYTES = 32 * 1024
# The bytes kept by all partitions together (RecentBytesBudget.cap): 1,000 partitions
# that each took small appends hold 8 MiB, not 32
BROKER_BYTES = 8 * 1024 * 1024
# What a kept piece costs beyond its bytes: its memoryview (184 bytes), a bytes object's
# header when it is a copy, and its slots in the lists
PIECE_OVERHEAD = 256
# A view of a request is kept (no copy) while the request is at most twice the view and
# this much (and within PARTITION_BYTES): beyond, a copy of the view costs less memory
# than holding the request
VIEW_SLACK = 1024


class KeptBytes:
    """The bytes of one partition's latest appends: pieces that follow each other in the
    active segment, each with its file position and what holding it costs (the whole
    request when the piece is a view into it)."""

    __slots__ = ("costs", "held", "pieces", "starts")

    def __init__(self) -> None:
        self.starts: list[int] = []
        self.pieces: list[memoryview] = []  # read-only
        self.costs: list[int] = []
        self.held = 0

    def drop(self) -> int:
        """Forget them all; what they cost."""
        released, self.held = self.held, 0
        if self.starts:
            self.starts.clear()
            self.pieces.clear()
            self.costs.clear()
        return released


class RecentBytesBudget:
    """The cap on the bytes that all partitions keep together: past it, the partition
    that appended least recently drops its bytes. It holds the bytes alone (not the
    logs), and is used from the thread that owns the logs, as they are."""

    def __init__(self, cap: int = BROKER_BYTES) -> None:
        self.cap = cap
        self.held = 0
        self._holders: OrderedDict[KeptBytes, None] = OrderedDict()

    def charge(self, kept: KeptBytes, delta: int) -> None:
        """kept's cost changed by delta (it just took an append when delta > 0)."""
        self.held += delta
        holders = self._holders
        if kept.held:
            holders[kept] = None
            holders.move_to_end(kept)
        else:
            holders.pop(kept, None)
        while self.held > self.cap and holders:
            self.held -= holders.popitem(last=False)[0].drop()


# The process's budget: the logs of every broker in the process share it (tests run
# several brokers in one process)
BUDGET = RecentBytesBudget()


class RecentAppends:
    """A partition's recent appends: base offset of each append's first batch -> (segment,
    file position, that batch's size), and the bytes of the latest appends while they are
    contiguous in the file and within PARTITION_BYTES."""

    __slots__ = ("_kept", "budget", "positions")

    def __init__(self, budget: RecentBytesBudget = BUDGET) -> None:
        self.positions: dict[int, tuple[LogSegment, int, int]] = {}
        self._kept = KeptBytes()
        self.budget = budget

    @property
    def bytes_held(self) -> int:
        return self._kept.held

    def get(self, offset: int) -> tuple[LogSegment, int, int] | None:
        return self.positions.get(offset)

    def add(self, base_offset: int, segment: LogSegment, position: int, batch_size: int,
            data: bytes | bytearray | memoryview, head: bytes | None) -> None:
        """An append of `data` at `position` (its first batch at base_offset, batch_size
        bytes); `head`, if given, was written in place of data's first bytes."""
        positions = self.positions
        positions[base_offset] = (segment, position, batch_size)
        if len(positions) > RECENT_APPENDS:
            del positions[next(iter(positions))]
        kept = self._kept
        starts = kept.starts
        size = len(data)
        too_large = size + PIECE_OVERHEAD > PARTITION_BYTES
        if too_large or (starts and starts[-1] + len(kept.pieces[-1]) != position):
            self.drop_bytes()  # a read can no longer run from the kept bytes to the end
            if too_large:
                return
        piece, cost = _kept(data, head, size)
        starts.append(position)
        kept.pieces.append(piece)
        kept.costs.append(cost)
        held = kept.held + cost
        while held > PARTITION_BYTES or len(starts) > RECENT_APPENDS:
            del starts[0], kept.pieces[0]
            held -= kept.costs.pop(0)
        delta = held - kept.held
        kept.held = held
        self.budget.charge(kept, delta)

    def bytes_at(self, position: int, size: int) -> memoryview | bytes | None:
        """The file's bytes [position, position + size) when they are all kept, else None."""
        kept = self._kept
        starts, pieces = kept.starts, kept.pieces
        if not starts or size <= 0 or position + size > starts[-1] + len(pieces[-1]):
            return None
        try:
            i = starts.index(position)
        except ValueError:
            return None  # kept bytes start at appends only, as reads from here do
        first = pieces[i]
        if len(first) >= size:
            return first[:size]
        parts = [first]
        need = size - len(first)
        for piece in pieces[i + 1:]:
            parts.append(piece[:need])
            need -= len(piece)
            if need <= 0:
                break
        return b"".join(parts)

    def drop_bytes(self) -> None:
        """Forget the kept bytes (the positions stay)."""
        released = self._kept.drop()
        if released:
            self.budget.charge(self._kept, -released)

    def clear(self) -> None:
        self.positions.clear()
        self.drop_bytes()

    def __contains__(self, offset: int) -> bool:
        return offset in self.positions

    def __len__(self) -> int:
        return len(self.positions)


def _kept(data: bytes | bytearray | memoryview, head: bytes | None,
          size: int) -> tuple[memoryview, int]:
    """The bytes of an append as they are in the file, read-only, and their cost."""
    if head is not None:  # a read-only batch whose front was patched on the way to disk
        piece = memoryview(head + bytes(memoryview(data)[len(head):size]))
        return piece, size + PIECE_OVERHEAD
    if type(data) is memoryview:
        whole = data.obj
        whole_size = len(whole) if isinstance(whole, (bytes, bytearray)) else -1
        if 0 <= whole_size <= min(2 * size + VIEW_SLACK, PARTITION_BYTES - PIECE_OVERHEAD):
            return data.toreadonly(), whole_size + PIECE_OVERHEAD
        return memoryview(bytes(data)), size + PIECE_OVERHEAD
    if type(data) is bytes:
        return memoryview(data), size + PIECE_OVERHEAD
    # a bytearray may still change: a copy
    return memoryview(bytes(data)), size + PIECE_OVERHEAD
