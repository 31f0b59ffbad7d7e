"""The accounting of transactional runs: what the client was told about each transaction
against what a read_committed consumer read back.

A transactional writer (the checker's `TransactionalRun`, or a consume-transform-produce
copier) tags every record it writes with its transaction (the `mdc-txn` header, a string
unique within the run) and keeps one `TransactionWrites` per transaction: the sequences it
produced in each partition, which of them the client reported undelivered, and the outcome
the client was told:

* committed: `commit_transaction` returned;
* aborted: `abort_transaction` returned (on purpose, or after an abortable error);
* in doubt: neither is known (the commit timed out and the abort failed too, the writer
  died or was fenced meanwhile). Its records may be visible or not, but all or none.

Per transaction, over every partition it wrote (the decision is one for all of them):

* torn: visible in part: some of its delivered records were read, some not. An error,
  whatever the outcome.
* committed but invisible: none of a committed transaction's records was read. An error
  (its sequences are also lost, per partition).
* aborted but visible: a record of an aborted transaction was read. An error.
* unknown tag: a record of the run read with no tag, or with the tag of a transaction
  that did not write it. An error.

The per-partition accounting (lost, duplicated, out of order) is `report.partition_report`
over `PartitionWrites` where committed sequences count as acknowledged and aborted ones
as `aborted`; `transactional_writes` derives them for a writer whose sequences are its
own, a copier passes its input's.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from moldau.checker.report import PartitionRead, PartitionWrites, Report, build_report

TAG_HEADER = "mdc-txn"
COMMITTED, ABORTED, IN_DOUBT = "committed", "aborted", "in_doubt"
OUTCOMES = (COMMITTED, ABORTED, IN_DOUBT)


@dataclass
class TransactionWrites:
    tag: str  # the `mdc-txn` header of its records, unique within the run
    outcome: str  # COMMITTED, ABORTED or IN_DOUBT
    records: dict[int, list[int]] = field(default_factory=dict)  # partition -> sequences
    undelivered: set[tuple[int, int]] = field(default_factory=set)  # (partition, sequence)
    on_purpose: bool = False  # aborted by the writer's choice, not after an error
    error: str | None = None  # why it was aborted or is in doubt

    def delivered(self) -> set[tuple[int, int]]:
        return {(p, s) for p, seqs in self.records.items() for s in seqs} - self.undelivered

    def size(self) -> int:
        return sum(len(seqs) for seqs in self.records.values())


@dataclass(frozen=True)
class TransactionFinding:
    tag: str
    outcome: str
    written: dict[int, int]  # partition -> records delivered in the transaction
    visible: dict[int, int]  # partition -> of those, read back

    def text(self) -> str:
        parts = ", ".join(f"p{p} {self.visible.get(p, 0)}/{n}"
                          for p, n in sorted(self.written.items()))
        return f"{self.tag} ({self.outcome}: {parts})"


@dataclass
class TransactionCheck:
    """The judgement over a run's transactions (`Report.transactions`)."""

    counts: dict[str, int]  # outcome -> transactions
    aborted_on_purpose: int  # of the aborted ones, those the writer chose to abort
    in_doubt_visible: int  # in-doubt transactions read whole
    in_doubt_invisible: int  # in-doubt transactions not read at all
    torn: list[TransactionFinding]
    committed_invisible: list[TransactionFinding]
    aborted_visible: list[TransactionFinding]
    unknown_tags: dict[str, int]  # tag ('' for none) -> records of the run read with it
    doubts: dict[str, str] = field(default_factory=dict)  # in-doubt tag -> why


    @property
    def ok(self) -> bool:
        return not (self.torn or self.committed_invisible or self.aborted_visible
                    or self.unknown_tags)

    def summary(self) -> str:
        c = self.counts
        line = (f"transactions: committed {c[COMMITTED]} aborted {c[ABORTED]} "
                f"(on purpose {self.aborted_on_purpose}) in-doubt {c[IN_DOUBT]} (visible "
                f"{self.in_doubt_visible}, invisible {self.in_doubt_invisible}) | torn "
                f"{len(self.torn)} committed-invisible {len(self.committed_invisible)} "
                f"aborted-visible {len(self.aborted_visible)} unknown-tags "
                f"{sum(self.unknown_tags.values())} | {'OK' if self.ok else 'FAILED'}")
        details = []
        for name, findings in (("torn", self.torn),
                               ("committed but invisible", self.committed_invisible),
                               ("aborted but visible", self.aborted_visible)):
            if findings:
                details.append(f"{name}: " + "; ".join(f.text() for f in findings[:5]))
        if self.doubts:
            why = "; ".join(f"{t}: {e}" for t, e in list(self.doubts.items())[:3])
            details.append(f"in doubt: {why}")
        if self.unknown_tags:
            tags = ", ".join(f"{t or '<none>'} x{n}"
                             for t, n in sorted(self.unknown_tags.items())[:5])
            details.append(f"records with an unknown tag: {tags}")
        return "\n    ".join([line, *details])

    def to_dict(self) -> dict[str, object]:
        def listed(findings: list[TransactionFinding]) -> list[dict[str, object]]:
            return [{"tag": f.tag, "outcome": f.outcome,
                     "written": {str(p): n for p, n in sorted(f.written.items())},
                     "visible": {str(p): n for p, n in sorted(f.visible.items())}}
                    for f in findings]

        return {"ok": self.ok, "counts": self.counts,
                "aborted_on_purpose": self.aborted_on_purpose,
                "in_doubt_visible": self.in_doubt_visible,
                "in_doubt_invisible": self.in_doubt_invisible,
                "torn": listed(self.torn),
                "committed_invisible": listed(self.committed_invisible),
                "aborted_visible": listed(self.aborted_visible),
                "unknown_tags": self.unknown_tags, "in_doubt_errors": self.doubts}


def visible_by_tag(run_id: str, reads: Mapping[int, PartitionRead]
                   ) -> dict[str, set[tuple[int, int]]]:
    """tag -> the (partition, sequence) of the run's records read with it ('' untagged)."""
    visible: dict[str, set[tuple[int, int]]] = defaultdict(set)
    for partition, read in reads.items():
        for offset, record in read.records:
            if record is not None and record.run_id == run_id:
                visible[read.tags.get(offset, "")].add((partition, record.sequence))
    return visible


def check_transactions(run_id: str, transactions: Iterable[TransactionWrites],
                       reads: Mapping[int, PartitionRead]) -> TransactionCheck:
    visible = visible_by_tag(run_id, reads)
    counts = dict.fromkeys(OUTCOMES, 0)
    torn: list[TransactionFinding] = []
    committed_invisible: list[TransactionFinding] = []
    aborted_visible: list[TransactionFinding] = []
    unknown: dict[str, int] = {}
    on_purpose = doubt_visible = doubt_invisible = 0
    doubts: dict[str, str] = {}
    known: set[str] = set()
    for txn in transactions:
        if txn.outcome not in counts:
            raise ValueError(f"transaction {txn.tag}: unknown outcome {txn.outcome!r}")
        counts[txn.outcome] += 1
        on_purpose += txn.on_purpose and txn.outcome == ABORTED
        if txn.outcome == IN_DOUBT:
            doubts[txn.tag] = txn.error or "no answer (the writer stopped or died)"
        known.add(txn.tag)
        written = {(p, s) for p, seqs in txn.records.items() for s in seqs}
        seen = visible.get(txn.tag, set())
        strangers = seen - written  # records this transaction did not write
        if strangers:
            unknown[txn.tag] = len(strangers)
        seen &= written
        delivered = txn.delivered()
        finding = TransactionFinding(
            txn.tag, txn.outcome, _per_partition(delivered), _per_partition(seen & delivered))
        if txn.outcome == ABORTED:
            if seen:
                aborted_visible.append(finding)
            continue
        if seen and not delivered <= seen:
            torn.append(finding)
        elif seen:
            doubt_visible += txn.outcome == IN_DOUBT
        elif txn.outcome == IN_DOUBT:
            doubt_invisible += 1
        elif delivered:
            committed_invisible.append(finding)
    for tag, seen in visible.items():
        if tag not in known:
            unknown[tag] = len(seen)
    return TransactionCheck(counts, on_purpose, doubt_visible, doubt_invisible, torn,
                            committed_invisible, aborted_visible, unknown, doubts)


def transactional_writes(transactions: Iterable[TransactionWrites],
                         sent: Mapping[int, int]) -> dict[int, PartitionWrites]:
    """Per partition writes of a writer whose sequences are its own: `sent` sequences per
    partition, committed ones acknowledged (offset unknown: -1), aborted ones aborted, the
    rest (in-doubt transactions, records never enqueued) in doubt."""
    writes = {p: PartitionWrites(p, n) for p, n in sent.items()}
    for txn in transactions:
        for p, seqs in txn.records.items():
            w = writes.setdefault(p, PartitionWrites(p))
            w.sent = max(w.sent, max(seqs, default=-1) + 1)
            if txn.outcome == COMMITTED:
                w.acknowledged.update(dict.fromkeys(seqs, -1))
            elif txn.outcome == ABORTED:
                w.aborted.update(seqs)
    return writes


def build_transactional_report(run_id: str, topic: str,
                               writes: Mapping[int, PartitionWrites],
                               transactions: Iterable[TransactionWrites],
                               reads: Mapping[int, PartitionRead],
                               producer_errors: Mapping[str, int] | None = None,
                               fatal_error: str | None = None) -> Report:
    check = check_transactions(run_id, transactions, reads)
    return build_report(run_id, topic, writes, reads, producer_errors, fatal_error, check)


def _per_partition(records: set[tuple[int, int]]) -> dict[int, int]:
    counts: dict[int, int] = defaultdict(int)
    for p, _ in records:
        counts[p] += 1
    return dict(counts)
