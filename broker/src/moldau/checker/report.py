"""The accounting: what one producer run wrote against what a consumer read back.

Inputs are plain data, so the accounting is testable without a cluster:

* `PartitionWrites`: per partition, how many sequences the run handed to its client
  (0 .. sent-1) and which of them were acknowledged (with the offset the broker gave),
  which failed (with the error); every other sequence is in doubt (no answer before
  the producer closed).
* `PartitionRead`: per partition, the records read from the log start to the end offset
  queried before reading, in offset order, each parsed (None: another writer's record),
  plus the records that claimed to be the checker's but did not parse.

Definitions, per partition, over the records of *this run* (other runs' records in the
topic are counted as foreign and otherwise ignored):

* lost: an acknowledged sequence that was not read at all. An error.
* duplicated: a sequence read more than once. An error.
* out of order: in offset order, the first occurrence of a sequence that is lower than
  the highest sequence read before it (0, 2, 1 makes 1 out of order; a repeated
  sequence counts as duplicated only, so 0, 1, 2, 1 is one duplicate). An error.
* unexpected: a record that cannot have been written here: its sequence was never sent,
  it names another partition, or it claims to be the checker's but does not parse. An
  error.
* landed unacknowledged: an in-doubt or failed sequence that was read. Not an error: a
  write whose answer was lost may still have been stored (at most once, with
  idempotence), and a timed-out write may have landed.
* aborted but visible (transactional runs, `txn_report`): a sequence of a transaction the
  client aborted, read with read_committed. An error.
* offset mismatch: an acknowledged sequence read at another offset than the one the
  broker acknowledged. Reported, not counted as an error (a client may be given no
  offset for a retried batch).

A partition is ok when it has no lost, duplicated, out-of-order or unexpected records and
its read reached the end offset; the report is ok when every partition is.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from moldau.checker.records import CheckerRecord


@dataclass
class PartitionWrites:
    partition: int
    sent: int = 0  # sequences 0 .. sent-1 were handed to the client
    acknowledged: dict[int, int] = field(default_factory=dict)  # sequence -> offset
    failed: dict[int, str] = field(default_factory=dict)  # sequence -> error
    # transactional runs: sequences of transactions the client aborted (never to be read)
    aborted: set[int] = field(default_factory=set)

    def in_doubt(self) -> set[int]:
        return (set(range(self.sent)) - self.acknowledged.keys() - self.failed.keys()
                - self.aborted)


@dataclass
class PartitionRead:
    partition: int
    # (offset, record) in offset order; record None: not the checker's
    records: list[tuple[int, CheckerRecord | None]] = field(default_factory=list)
    corrupt: list[tuple[int, str]] = field(default_factory=list)  # (offset, why)
    start_offset: int = 0  # the low watermark when reading started
    end_offset: int = 0  # the high watermark (end offset) the read had to reach
    complete: bool = True  # the read reached end_offset before its timeout
    error: str | None = None  # why it did not, when known
    # offset -> the record's transaction tag (its `mdc-txn` header), where it has one
    tags: dict[int, str] = field(default_factory=dict)


@dataclass
class PartitionReport:
    partition: int
    sent: int
    acknowledged: int
    failed: int
    in_doubt: int
    read: int  # records of this run read in this partition, duplicates included
    lost: list[int]
    duplicated: dict[int, list[int]]  # sequence -> every offset it was read at
    out_of_order: list[tuple[int, int, int]]  # (offset, sequence, highest sequence before)
    unexpected: list[tuple[int, str]]  # (offset, why)
    landed_unacknowledged: int  # in-doubt or failed sequences that were read
    offset_mismatch: list[tuple[int, int, list[int]]]  # (sequence, acked offset, read at)
    foreign: int  # other writers' records
    start_offset: int
    end_offset: int
    read_complete: bool
    read_error: str | None
    failed_errors: dict[str, int]  # error -> how many sequences failed with it
    aborted: int = 0  # sequences of aborted transactions (transactional runs)
    aborted_visible: list[int] = field(default_factory=list)  # ... that were read anyway

    @property
    def ok(self) -> bool:
        return (self.read_complete and not self.lost and not self.duplicated
                and not self.out_of_order and not self.unexpected
                and not self.aborted_visible)

    def summary(self) -> str:
        line = (f"partition {self.partition}: sent {self.sent} acked {self.acknowledged} "
                f"failed {self.failed} in-doubt {self.in_doubt} | read {self.read} "
                f"(offsets {self.start_offset}..{self.end_offset}) lost {len(self.lost)} "
                f"duplicated {len(self.duplicated)} out-of-order {len(self.out_of_order)} "
                f"unexpected {len(self.unexpected)} | landed-unacked "
                f"{self.landed_unacknowledged} offset-mismatch {len(self.offset_mismatch)} "
                f"foreign {self.foreign}{self._aborted_counts()} | "
                f"{'OK' if self.ok else 'FAILED'}")
        details = []
        if not self.read_complete:
            details.append(f"read incomplete: {self.read_error or 'timed out'}")
        if self.lost:
            details.append(f"lost sequences {_ranges(self.lost)}")
        if self.duplicated:
            dups = [f"{seq}@{offsets}" for seq, offsets in sorted(self.duplicated.items())[:5]]
            details.append(f"duplicated {', '.join(dups)}")
        if self.out_of_order:
            ooo = [f"{seq}@{offset} after {before}"
                   for offset, seq, before in self.out_of_order[:5]]
            details.append(f"out of order {', '.join(ooo)}")
        if self.unexpected:
            details.append(f"unexpected {self.unexpected[:3]}")
        if self.aborted_visible:
            details.append(f"aborted but visible sequences {_ranges(self.aborted_visible)}")
        return "\n    ".join([line, *details])

    def _aborted_counts(self) -> str:
        # only transactional runs have aborted sequences: the idempotent line is unchanged
        if not self.aborted and not self.aborted_visible:
            return ""
        return f" aborted {self.aborted} aborted-visible {len(self.aborted_visible)}"

    def to_dict(self) -> dict[str, object]:
        """The JSON form of this partition's result."""
        return {
            "partition": self.partition, "ok": self.ok,
            "sent": self.sent, "acknowledged": self.acknowledged, "failed": self.failed,
            "in_doubt": self.in_doubt, "read": self.read,
            "lost": self.lost,
            "duplicated": {str(seq): offsets for seq, offsets in self.duplicated.items()},
            "out_of_order": [{"offset": o, "sequence": s, "after": b}
                             for o, s, b in self.out_of_order],
            "unexpected": [{"offset": o, "reason": r} for o, r in self.unexpected],
            "landed_unacknowledged": self.landed_unacknowledged,
            "offset_mismatch": [{"sequence": s, "acknowledged_offset": a, "read_offsets": r}
                                for s, a, r in self.offset_mismatch],
            "foreign": self.foreign,
            "start_offset": self.start_offset, "end_offset": self.end_offset,
            "read_complete": self.read_complete, "read_error": self.read_error,
            "failed_errors": self.failed_errors,
            "aborted": self.aborted, "aborted_visible": self.aborted_visible,
        }


COUNTS = ("sent", "acknowledged", "failed", "in_doubt", "read", "lost", "duplicated",
          "out_of_order", "unexpected", "landed_unacknowledged", "offset_mismatch", "foreign",
          "aborted", "aborted_visible")


class TransactionVerdict(Protocol):
    """The judgement over a transactional run's transactions (`txn_report`)."""

    @property
    def ok(self) -> bool: ...

    def summary(self) -> str: ...

    def to_dict(self) -> dict[str, object]: ...


@dataclass
class Report:
    run_id: str
    topic: str
    partitions: dict[int, PartitionReport]
    producer_errors: dict[str, int] = field(default_factory=dict)  # client errors seen
    fatal_error: str | None = None  # the producer's fatal error, if it had one
    transactions: TransactionVerdict | None = None  # transactional runs only

    @property
    def ok(self) -> bool:
        return (all(p.ok for p in self.partitions.values())
                and (self.transactions is None or self.transactions.ok))

    def totals(self) -> dict[str, int]:
        totals = dict.fromkeys(COUNTS, 0)
        for p in self.partitions.values():
            for name in COUNTS:
                value = getattr(p, name)
                totals[name] += value if isinstance(value, int) else len(value)
        return totals

    # shorthands for the totals tests look at most
    @property
    def acknowledged(self) -> int:
        return self.totals()["acknowledged"]

    @property
    def lost(self) -> int:
        return self.totals()["lost"]

    @property
    def duplicated(self) -> int:
        return self.totals()["duplicated"]

    @property
    def out_of_order(self) -> int:
        return self.totals()["out_of_order"]

    def summary(self) -> str:
        lines = [f"durability check of run {self.run_id} on topic {self.topic!r}, "
                 f"{len(self.partitions)} partition(s)"]
        lines += [self.partitions[p].summary() for p in sorted(self.partitions)]
        t = self.totals()
        lines.append(
            f"total: sent {t['sent']} acked {t['acknowledged']} failed {t['failed']} "
            f"in-doubt {t['in_doubt']} | read {t['read']} lost {t['lost']} duplicated "
            f"{t['duplicated']} out-of-order {t['out_of_order']} unexpected "
            f"{t['unexpected']} | landed-unacked {t['landed_unacknowledged']} "
            f"offset-mismatch {t['offset_mismatch']} foreign {t['foreign']}"
            + (f" aborted {t['aborted']} aborted-visible {t['aborted_visible']}"
               if t["aborted"] or t["aborted_visible"] else ""))
        if self.transactions is not None:
            lines.append(self.transactions.summary())
        if self.fatal_error:
            lines.append(f"producer fatal error: {self.fatal_error}")
        if self.producer_errors:
            errors = ", ".join(f"{e} x{n}" for e, n in sorted(self.producer_errors.items()))
            lines.append(f"producer errors: {errors}")
        lines.append("RESULT: OK" if self.ok else "RESULT: FAILED")
        return "\n".join(lines)

    def to_dict(self) -> dict[str, object]:
        return {"run_id": self.run_id, "topic": self.topic, "ok": self.ok,
                "totals": self.totals(), "fatal_error": self.fatal_error,
                "producer_errors": self.producer_errors,
                "partitions": [self.partitions[p].to_dict() for p in sorted(self.partitions)],
                **({} if self.transactions is None
                   else {"transactions": self.transactions.to_dict()})}

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent)


def partition_report(run_id: str, writes: PartitionWrites, read: PartitionRead) -> PartitionReport:
    partition = writes.partition
    in_doubt = writes.in_doubt()
    read_at: dict[int, list[int]] = {}  # sequence -> offsets, in offset order
    out_of_order: list[tuple[int, int, int]] = []
    unexpected = [(offset, f"corrupt: {why}") for offset, why in read.corrupt]
    foreign = 0
    highest: int | None = None
    for offset, record in sorted(read.records, key=lambda r: r[0]):
        if record is None or record.run_id != run_id:
            foreign += 1
            continue
        if record.partition != partition:
            unexpected.append((offset, f"sequence {record.sequence} was sent to partition "
                                       f"{record.partition}"))
            continue
        seq = record.sequence
        if not 0 <= seq < writes.sent:
            unexpected.append((offset, f"sequence {seq} was never sent "
                                       f"(sent 0..{writes.sent - 1})"))
            continue
        if seq in read_at:
            read_at[seq].append(offset)
            continue
        if highest is not None and seq < highest:
            out_of_order.append((offset, seq, highest))
        read_at[seq] = [offset]
        highest = seq if highest is None else max(highest, seq)
    lost = sorted(seq for seq in writes.acknowledged if seq not in read_at)
    aborted_visible = sorted(seq for seq in read_at if seq in writes.aborted)
    mismatch = [(seq, acked, read_at[seq]) for seq, acked in sorted(writes.acknowledged.items())
                if acked >= 0 and seq in read_at and acked not in read_at[seq]]
    return PartitionReport(
        partition=partition, sent=writes.sent, acknowledged=len(writes.acknowledged),
        failed=len(writes.failed), in_doubt=len(in_doubt),
        read=sum(len(offsets) for offsets in read_at.values()),
        lost=lost,
        duplicated={seq: offsets for seq, offsets in sorted(read_at.items()) if len(offsets) > 1},
        out_of_order=out_of_order, unexpected=unexpected,
        landed_unacknowledged=sum(1 for seq in read_at if seq not in writes.acknowledged
                                  and seq not in writes.aborted),
        offset_mismatch=mismatch, foreign=foreign,
        start_offset=read.start_offset, end_offset=read.end_offset,
        read_complete=read.complete, read_error=read.error,
        failed_errors=dict(Counter(writes.failed.values())),
        aborted=len(writes.aborted), aborted_visible=aborted_visible,
    )


def build_report(run_id: str, topic: str, writes: Mapping[int, PartitionWrites],
                 reads: Mapping[int, PartitionRead],
                 producer_errors: Mapping[str, int] | None = None,
                 fatal_error: str | None = None,
                 transactions: TransactionVerdict | None = None) -> Report:
    """The report over every partition written or read; a partition written but not read
    counts as an incomplete read."""
    partitions = {}
    for p in sorted(set(writes) | set(reads)):
        read = reads.get(p) or PartitionRead(p, complete=False, error="not read")
        partitions[p] = partition_report(run_id, writes.get(p) or PartitionWrites(p), read)
    return Report(run_id, topic, partitions, dict(producer_errors or {}), fatal_error,
                  transactions)


def _ranges(values: Iterable[int], limit: int = 10) -> str:
    """1, 2, 3, 7, 9, 10 -> '1-3, 7, 9-10' (the first `limit` runs)."""
    runs: list[list[int]] = []
    for v in sorted(values):
        if runs and v == runs[-1][1] + 1:
            runs[-1][1] = v
        else:
            runs.append([v, v])
    text = [f"{a}" if a == b else f"{a}-{b}" for a, b in runs[:limit]]
    if len(runs) > limit:
        text.append(f"... ({len(runs) - limit} more runs)")
    return ", ".join(text)
