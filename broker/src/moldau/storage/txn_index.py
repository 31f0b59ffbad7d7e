"""The transaction index of a segment (`<base offset>.txnindex`, Kafka's TransactionIndex
and AbortedTxn): the aborted transactions whose ABORT marker lies in the segment, so a
read_committed fetch can tell its consumer which data to drop.

Each entry is 34 bytes, big-endian: version int16 (0), producer id int64, first offset
int64, last offset int64 (the marker's), last stable offset int64 (the LSO when the marker
was written). Entries are appended in marker order (strictly increasing last offsets).
Unlike the offset and time indexes nothing is preallocated or mapped: the file is created
by the first append and a segment without aborted transactions has none. The index is
read whole when searched: it holds one small entry per aborted transaction.

No descriptor is kept open between calls (a log may hold thousands of segments).
"""

from __future__ import annotations

import contextlib
import os
import struct
from collections.abc import Iterable
from dataclasses import dataclass
from typing import NamedTuple

from moldau.errors import KafkaStorageError

from .mapped_index import CorruptIndexError
from .segment_files import fsync_path, rename_if_present

ENTRY = struct.Struct(">hqqqq")
ENTRY_SIZE = ENTRY.size  # 34
CURRENT_VERSION = 0


@dataclass(frozen=True, slots=True)
class AbortedTxn:
    producer_id: int
    first_offset: int
    last_offset: int  # the ABORT marker's offset
    last_stable_offset: int  # the partition's LSO when the marker was written
    version: int = CURRENT_VERSION

    def encode(self) -> bytes:
        return ENTRY.pack(self.version, self.producer_id, self.first_offset, self.last_offset,
                          self.last_stable_offset)


class TxnIndexSearchResult(NamedTuple):
    aborted: list[AbortedTxn]
    # True: an entry's LSO reached the upper bound, so no later segment can hold an
    # aborted transaction overlapping the range and the search stops here
    is_complete: bool


class TransactionIndex:
    """The `.txnindex` of one segment; see the module docstring."""

    def __init__(self, path: str, start_offset: int) -> None:
        self.path = path
        self.start_offset = start_offset  # the segment's base offset
        self._last_offset: int | None = None  # of the last entry; None: not read yet
        self._last_known = False
        self._unsynced = False  # appended to since the last flush
        # True once a read found no file: only append() creates it, so until then every
        # read_committed fetch over this segment is answered without a system call
        self._absent = False

    def exists(self) -> bool:
        return os.path.exists(self.path)

    def may_hold_entries(self) -> bool:
        """False when the index is known to have no file (hence no entry)."""
        return not self._absent

    def append(self, txn: AbortedTxn) -> None:
        """Add an aborted transaction; its last offset must exceed every earlier one."""
        last = self._known_last_offset()
        if last is not None and last >= txn.last_offset:
            raise ValueError(
                "The last offset of appended transactions must increase sequentially, but "
                f"{txn.last_offset} is not greater than current last offset {last} of index "
                f"{self.path}")
        try:
            fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
            try:
                os.write(fd, txn.encode())
            finally:
                os.close(fd)
        except OSError as exc:
            raise KafkaStorageError(f"appending to {self.path} failed: {exc}") from exc
        self._absent = False
        self._last_offset, self._last_known = txn.last_offset, True
        self._unsynced = True

    def entries(self) -> list[AbortedTxn]:
        """Every entry (Kafka's allAbortedTxns); a torn entry at the end is ignored."""
        return [txn for _, txn in self._read()]

    def collect_aborted(self, fetch_offset: int, upper_bound_offset: int) -> TxnIndexSearchResult:
        """The aborted transactions overlapping [fetch_offset, upper_bound_offset)."""
        if self._absent:
            return TxnIndexSearchResult([], False)
        found = []
        for _, txn in self._read():
            if txn.last_offset >= fetch_offset and txn.first_offset < upper_bound_offset:
                found.append(txn)
            if txn.last_stable_offset >= upper_bound_offset:
                return TxnIndexSearchResult(found, True)
        return TxnIndexSearchResult(found, False)

    def truncate_to(self, offset: int) -> None:
        """Drop the entries whose marker is at or after offset (the log was cut there)."""
        previous = None
        for position, txn in self._read():
            if txn.last_offset >= offset:
                self._truncate_file(position)
                self._last_offset, self._last_known = previous, True
                return
            previous = txn.last_offset

    def reset(self) -> None:
        """Remove every entry (the index is rebuilt by recovery)."""
        if self.exists():
            self._truncate_file(0)
        self._last_offset, self._last_known = None, True

    def sanity_check(self) -> None:
        """Raise CorruptIndexError for an entry whose marker lies before the segment."""
        for _, txn in self._read():
            if txn.last_offset < self.start_offset:
                raise CorruptIndexError(
                    f"Last offset of aborted transaction {txn} in index {self.path} is less "
                    f"than start offset {self.start_offset}")

    def flush(self) -> None:
        """fsync what was appended since the last flush (nothing to do otherwise)."""
        if not self._unsynced:
            return
        fsync_path(self.path)
        self._unsynced = False

    def rename_to(self, path: str) -> None:
        """Follow the segment's files (`.deleted`, `.swap`, ...); the file may not exist."""
        rename_if_present(self.path, path)
        self.path = path

    def delete(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            os.remove(self.path)
        self._absent = True
        self._last_offset, self._last_known = None, True

    # --- file access ------------------------------------------------------------------

    def _read(self) -> Iterable[tuple[int, AbortedTxn]]:
        try:
            with open(self.path, "rb") as f:
                data = f.read()
        except FileNotFoundError:
            self._absent = True
            return []
        except OSError as exc:
            raise KafkaStorageError(f"reading {self.path} failed: {exc}") from exc
        entries = []
        for position in range(0, len(data) - ENTRY_SIZE + 1, ENTRY_SIZE):
            version, producer_id, first, last, lso = ENTRY.unpack_from(data, position)
            if version > CURRENT_VERSION:
                raise KafkaStorageError(
                    f"Unexpected aborted transaction version {version} in transaction index "
                    f"{self.path}, current version is {CURRENT_VERSION}")
            entries.append((position, AbortedTxn(producer_id, first, last, lso, version)))
        return entries

    def _known_last_offset(self) -> int | None:
        if not self._last_known:
            with contextlib.suppress(FileNotFoundError):
                torn = os.path.getsize(self.path) % ENTRY_SIZE
                if torn:  # a crash mid-append: later entries must stay aligned
                    self._truncate_file(os.path.getsize(self.path) - torn)
            entries = self.entries()
            self._last_offset = entries[-1].last_offset if entries else None
            self._last_known = True
        return self._last_offset

    def _truncate_file(self, size: int) -> None:
        try:
            os.truncate(self.path, size)
        except FileNotFoundError:
            pass
        except OSError as exc:
            raise KafkaStorageError(f"truncating {self.path} failed: {exc}") from exc


def collect_aborted_transactions(indexes: Iterable[TransactionIndex], fetch_offset: int,
                                 upper_bound_offset: int) -> list[AbortedTxn]:
    """The aborted transactions overlapping [fetch_offset, upper_bound_offset), from the
    txn indexes of the segment holding fetch_offset and the ones after it, in order,
    stopping at the first search that is complete (Kafka's LocalLog
    collectAbortedTransactions)."""
    found: list[AbortedTxn] = []
    for index in indexes:
        result = index.collect_aborted(fetch_offset, upper_bound_offset)
        found.extend(result.aborted)
        if result.is_complete:
            break
    return found
