"""A stateful property test of PartitionLog against a plain model.

Random sequences of leader and follower appends (batches built by moldau and by
kafka-python, every codec, out-of-order record timestamps), reads, rolls, truncations,
high watermark moves, retention, DeleteRecords, flushes, and crashes (the writer killed
without its clean path, the last segment cut at a random byte past the flushed data or
left with a torn partial batch, index files left preallocated or lost) followed by
recovery.

The model is the list of batches physically in the log with their exact bytes, plus the
log start, log end, high watermark and recovery point. After every step the files on disk
are parsed independently (storage_helpers) and must equal the model byte for byte, with
contiguous offsets, and every index entry must point at the batch it names. After a crash
every acknowledged batch survives: all flushed ones, and every one wholly before the cut.
"""

from __future__ import annotations

import bisect
import itertools
import os
import shutil
import tempfile
from dataclasses import replace
from typing import NamedTuple

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)
from hypothesis_budget import examples
from storage_helpers import (
    T0,
    as_stored,
    batch,
    check_segment_indexes,
    crash,
    kafka_python_batch,
    parse_log_file,
)

from moldau.errors import OffsetOutOfRangeError
from moldau.protocol.records import RecordBatch, iter_batches
from moldau.storage.config import LogConfig
from moldau.storage.log import PartitionLog

HOUR = 3600 * 1000


class Stored(NamedTuple):
    base: int
    last: int
    max_ts: int
    epoch: int
    data: bytes
    stamps: tuple[int, ...]  # the record timestamps, in offset order

    @property
    def size(self) -> int:
        return len(self.data)


batch_shapes = st.fixed_dictionaries(
    {
        "count": st.integers(1, 6),
        "value_size": st.sampled_from([0, 7, 60, 150]),
        "codec": st.sampled_from([0, 0, 1, 2, 3, 4]),
        "writer": st.sampled_from(["moldau", "moldau", "kafka-python"]),
        "jitter": st.lists(st.integers(-3 * HOUR, 2 * HOUR), min_size=8, max_size=8),
        "seed": st.integers(0, 1000),
    }
)


class LogMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.root = tempfile.mkdtemp(prefix="moldau-log-prop-")
        self.directory = os.path.join(self.root, "prop-0")
        self.log: PartitionLog | None = None

    def teardown(self) -> None:
        try:
            if self.log is not None:
                self.log.close()
        finally:
            shutil.rmtree(self.root, ignore_errors=True)

    # --- setup ---------------------------------------------------------------------------

    @initialize(
        segment_bytes=st.integers(2200, 5000),  # room for a follower append of 2 batches
        interval=st.sampled_from([0, 100, 400, 4096]),
        index_slots=st.sampled_from([4, 8, 1000]),
    )
    def open(self, segment_bytes, interval, index_slots):
        self.config = LogConfig(
            segment_bytes=segment_bytes,
            index_interval_bytes=interval,
            segment_index_bytes=24 * index_slots,  # 3n offset, 2n time index entries
            segment_ms=100 * HOUR,
            retention_ms=-1,
            file_delete_delay_ms=0,
        )
        self.log = PartitionLog(self.directory, self.config, sync=False)
        self.model: list[Stored] = []
        self.log_start = 0
        self.leo = 0
        self.hw = 0
        self.recovery_point = 0
        self.epoch = 0
        self.epochs: list[tuple[int, int]] = []  # (epoch, first offset), as Kafka keeps them
        self.clock = T0  # record time moves forward an hour a batch, with jitter

    # --- helpers -----------------------------------------------------------------------------

    def _raw(self, shape) -> bytes:
        self.clock += HOUR
        stamps = [self.clock + j for j in shape["jitter"][: shape["count"]]]
        self._stamps = tuple(stamps)
        if shape["writer"] == "kafka-python":
            return kafka_python_batch(shape["count"], value_size=shape["value_size"],
                                      timestamps=stamps, codec=shape["codec"], seed=shape["seed"])
        return batch(shape["count"], value_size=shape["value_size"], timestamps=stamps,
                     codec=shape["codec"], seed=shape["seed"])

    def _record(self, data: bytes) -> Stored:
        b = RecordBatch(data)
        stored = Stored(b.base_offset, b.last_offset, b.max_timestamp, b.partition_leader_epoch,
                        bytes(data), self._stamps)
        if not self.epochs or self.epochs[-1][0] != stored.epoch:
            # an epoch that starts where the previous one started replaces it (an epoch
            # kept at the log start after retention emptied the log)
            self.epochs = [e for e in self.epochs if e[1] < stored.base]
            self.epochs.append((stored.epoch, stored.base))
        return stored

    def _epochs_from_start(self) -> None:
        # the epoch in force at the log start now starts there; earlier ones are forgotten
        earlier = [e for e in self.epochs if e[1] <= self.log_start]
        if earlier:
            self.epochs = [(earlier[-1][0], self.log_start)] + [
                e for e in self.epochs if e[1] > self.log_start]

    def _epochs_to_end(self) -> None:
        self.epochs = [e for e in self.epochs if e[1] < self.leo]

    def _epochs_on_load(self) -> None:
        # Kafka's loader: truncate from the log end, then from the log start. An epoch kept
        # at the log start of an empty log (start == end) goes here, as in Kafka.
        self._epochs_to_end()
        self._epochs_from_start()

    def _segment_of(self, offset: int) -> int:
        """Index in log.segments of the segment holding offset (largest base <= offset)."""
        bases = [s.base_offset for s in self.log.segments]
        return max(i for i, base in enumerate(bases) if base <= offset)

    # --- appends -------------------------------------------------------------------------------

    @rule(shape=batch_shapes)
    def append_as_leader(self, shape):
        raw = self._raw(shape)
        info = self.log.append_as_leader(raw, self.epoch, now=self.clock)
        stored = info.stored()
        # only baseOffset and the leader epoch change for a CreateTime topic
        assert stored == as_stored(raw, self.leo, self.epoch)
        assert (info.first_offset, info.last_offset) == (self.leo, self.leo + shape["count"] - 1)
        self.model.append(self._record(stored))
        self.leo = info.last_offset + 1

    @rule(shapes=st.lists(batch_shapes, min_size=2, max_size=6))
    def append_burst(self, shapes):
        for shape in shapes:
            self.append_as_leader(shape)

    @rule(shapes=st.lists(batch_shapes, min_size=1, max_size=2))
    def append_as_follower(self, shapes):
        data = b""
        offset = self.leo
        for shape in shapes:
            raw = as_stored(self._raw(shape), offset, self.epoch)
            data += raw
            self.model.append(self._record(raw))
            offset = self.model[-1].last + 1
        info = self.log.append_as_follower(data)
        assert info.stored() == data
        self.leo = offset

    @rule()
    def new_leader_epoch(self):
        self.epoch += 1

    # --- reads ---------------------------------------------------------------------------------

    @rule(data=st.data())
    def read(self, data):
        offset = data.draw(st.integers(self.log_start, self.leo), label="offset")
        max_bytes = data.draw(st.sampled_from([0, 1, 100, 700, 3000, 10**6]), label="max_bytes")
        bounded = data.draw(st.booleans(), label="bounded by hw")
        min_one = data.draw(st.booleans(), label="min_one_batch")
        bound = self.hw if bounded else self.leo
        fetched = self.log.read(offset, max_bytes, max_offset=self.hw if bounded else None,
                                min_one_batch=min_one)
        got = self.log.read_bytes(fetched)
        assert fetched.start.offset == offset
        if offset >= bound:
            assert got == b""
            return
        # Kafka's rule: from the batch holding offset, within its segment, to the first batch
        # not wholly below the bound, at most max_bytes (or the first batch whole)
        i = next(i for i, b in enumerate(self.model) if b.last >= offset)
        segment = self._segment_of(self.model[i].base)
        run = [
            b for b in self.model[i:]
            if self._segment_of(b.base) == segment and b.last < bound
        ]
        # a bound inside a batch withholds that batch; so does a segment boundary
        limit = max(max_bytes, self.model[i].size) if min_one else max_bytes
        available = b"".join(b.data for b in run)
        assert got == available[:limit]
        whole = list(iter_batches(got, allow_partial=True))
        assert [bytes(b.buffer) for b in whole] == [b.data for b in run[: len(whole)]]

    @rule(data=st.data())
    def offset_for_timestamp(self, data):
        records = [
            (ts, b.base + i, b.epoch)
            for b in self.model for i, ts in enumerate(b.stamps)
        ]
        live = [r for r in records if r[1] >= self.log_start]
        choices = [ts + d for ts, _, _ in live[-40:] for d in (-1, 0, 1)] + [T0, self.clock + 1]
        target = data.draw(st.sampled_from(choices), label="timestamp")
        got = self.log.offset_for_timestamp(target)
        want = next(((ts, off) for ts, off, _ in live if ts >= target), None)
        assert (got[:2] if got else None) == want
        if got:
            assert got[2] == next(e for ts, off, e in live if off == got[1])
        # the special timestamps
        epoch_at_start = max((e for e, start in self.epochs if start <= self.log_start),
                             default=-1)
        assert self.log.offset_for_timestamp(-2) == (-1, self.log_start, epoch_at_start)
        latest = self.epochs[-1][0] if self.epochs else -1
        assert self.log.offset_for_timestamp(-1) == (-1, self.leo, latest)
        if records:
            top = max(ts for ts, _, _ in records)
            first = next(r for r in records if r[0] == top)
            if first[1] >= self.log_start:  # Kafka would answer below the log start
                assert self.log.offset_for_timestamp(-3)[:2] == first[:2]
        else:
            assert self.log.offset_for_timestamp(-3) is None

    @rule(data=st.data())
    def read_out_of_range(self, data):
        offset = data.draw(st.sampled_from([self.log_start - 1, self.leo + 1]))
        if offset < 0:
            return
        try:
            self.log.read(offset, 100)
        except OffsetOutOfRangeError:
            return
        raise AssertionError(f"read at {offset} outside [{self.log_start}, {self.leo}]")

    # --- roll, high watermark, truncation ------------------------------------------------------

    @rule()
    def roll(self):
        self.log.roll()

    @rule(data=st.data())
    def move_high_watermark(self, data):
        self.hw = data.draw(st.integers(self.log_start, self.leo), label="hw")
        assert self.log.update_high_watermark(self.hw) == self.hw

    @rule(data=st.data())
    def truncate(self, data):
        target = data.draw(st.integers(max(0, self.log_start - 5), self.leo + 2), label="target")
        first_base = self.log.segments[0].base_offset
        changed = self.log.truncate_to(target)
        if target >= self.leo:
            assert not changed
            self._epochs_to_end()  # Kafka still drops epochs starting at the log end
            return
        assert changed
        if target <= first_base:
            self.model, self.epochs = [], []
            self.leo = self.log_start = target
        else:
            self.model = [b for b in self.model if b.last < target]
            self.leo = self.model[-1].last + 1 if self.model else first_base
            self.log_start = min(self.log_start, self.leo)
            self._epochs_to_end()
        self.hw = min(self.hw, self.leo)
        self.recovery_point = min(self.recovery_point, self.leo)

    # --- retention -----------------------------------------------------------------------------

    def _layout(self):
        segments = self.log.segments
        bases = [s.base_offset for s in segments]
        sizes = [s.size for s in segments]
        uppers = [*bases[1:], self.leo]  # the offset each segment ends below
        return bases, sizes, uppers

    def _take(self, layout, first: int, predicate) -> int:
        """How many segments from `first` on Kafka's deletableSegments takes: wholly below
        the high watermark, not the empty active segment, while the predicate holds."""
        bases, sizes, uppers = layout
        n = 0
        for i in range(first, len(bases)):
            if uppers[i] > self.hw or (i == len(bases) - 1 and sizes[i] == 0):
                break
            if not predicate(i):
                break
            n += 1
        return n

    def _below_log_start(self, layout, i: int) -> bool:
        """Kafka's deleteLogStartOffsetBreachedSegments: the next segment starts at or below
        the log start (so never the active segment)."""
        return i < len(layout[0]) - 1 and layout[2][i] <= self.log_start

    def _drop_segments(self, layout, count: int) -> None:
        if count:
            bases = layout[0]
            new_start = bases[count] if count < len(bases) else self.leo
            self.model = [b for b in self.model if b.base >= new_start]
            self.log_start = max(self.log_start, new_start)
            self._epochs_from_start()

    @rule(data=st.data(), mode=st.sampled_from(["bytes", "ms"]))
    def retention(self, data, mode):
        layout = self._layout()
        bases, sizes, _uppers = layout
        by_start = self._take(layout, 0, lambda i: self._below_log_start(layout, i))
        now = self.clock + data.draw(st.integers(0, 20 * HOUR), label="later")
        if mode == "bytes":
            limit = data.draw(st.integers(0, 3 * self.config.segment_bytes), label="bytes")
            config = replace(self.config, retention_bytes=limit)
            excess = sum(sizes[by_start:]) - limit

            def breached(i):
                nonlocal excess
                if excess < sizes[i]:
                    return False
                excess -= sizes[i]
                return True
        else:
            limit = data.draw(st.integers(0, 40 * HOUR), label="ms")
            config = replace(self.config, retention_ms=limit)
            max_ts = [
                max((b.max_ts for b in self.model if self._segment_of(b.base) == i), default=-1)
                for i in range(len(bases))
            ]

            def breached(i):
                return max_ts[i] >= 0 and now - max_ts[i] > limit

        expected = by_start + self._take(layout, by_start, breached)
        self.log.config = config
        try:
            deleted = self.log.delete_old_segments(now)
        finally:
            self.log.config = self.config
        assert deleted == expected
        self._drop_segments(layout, expected)
        # file.delete.delay.ms=0: the renamed .deleted files are gone at once
        assert not any(n.endswith(".deleted") for n in os.listdir(self.directory))

    @rule(data=st.data())
    def delete_records(self, data):
        target = data.draw(st.integers(self.log_start, self.hw + 1), label="delete to")
        if target > self.hw:
            try:
                self.log.delete_records(target)
            except OffsetOutOfRangeError:
                return
            raise AssertionError("DeleteRecords above the high watermark must fail")
        layout = self._layout()
        self.log_start = max(self.log_start, target)
        doomed = self._take(layout, 0, lambda i: self._below_log_start(layout, i))
        assert self.log.delete_records(target) == self.log_start
        self._epochs_from_start()
        self._drop_segments(layout, doomed)

    @rule()
    def flush(self):
        self.log.flush()
        self.recovery_point = self.leo
        assert self.log.recovery_point == self.leo

    # --- crash and recovery ---------------------------------------------------------------------

    @rule(data=st.data(), damage=st.sampled_from(["cut", "cut", "torn", "none", "lose-index"]))
    def crash_and_recover(self, data, damage):
        bases = [seg.base_offset for seg in self.log.segments]
        # recovery scans from the segment holding the recovery point
        scanned_from = bases[max(0, bisect.bisect_right(bases, self.recovery_point) - 1)]
        active = self.log.active_segment
        in_last = [b for b in self.model if b.base >= active.base_offset]
        # the bytes of the last segment that were flushed: a crash cannot take those
        flushed = sum(b.size for b in in_last if b.last < self.recovery_point)
        crash(self.log)
        self.log = None
        cut = active.size
        if damage == "cut":
            cut = data.draw(st.integers(flushed, active.size), label="cut at")
            os.truncate(active.log_path, cut)
        elif damage == "torn":
            raw = as_stored(batch(3, value_size=50, seed=5), self.leo, self.epoch)
            keep = data.draw(st.integers(1, len(raw) - 1), label="torn bytes")
            with open(active.log_path, "ab") as f:
                f.write(raw[:keep])
        elif damage == "lose-index":
            victim = data.draw(st.sampled_from(
                sorted(n for n in os.listdir(self.directory) if n.endswith("index"))))
            os.remove(os.path.join(self.directory, victim))
        acknowledged = [b for b in self.model if b.last < self.recovery_point]
        survivors = [b for b in self.model if b.base < active.base_offset]
        position = 0
        for b in in_last:
            position += b.size
            if position > cut:
                break
            survivors.append(b)
        self.log = PartitionLog(
            self.directory, self.config, recovery_point=self.recovery_point,
            log_start_offset=self.log_start, high_watermark=self.hw,
            clean_shutdown=False, sync=False,
        )
        self.model = survivors
        self.leo = survivors[-1].last + 1 if survivors else active.base_offset
        if self.leo < self.log_start:  # the cut went below the log start: start over there
            self.model, self.leo, self.epochs = [], self.log_start, []
        else:
            assert self.model[: len(acknowledged)] == acknowledged
            # Kafka's recovery re-adds the epoch of every scanned batch newer than the
            # cached latest (it may have been dropped by a truncation to the log start)
            for b in self.model:
                latest = self.epochs[-1][0] if self.epochs else -1
                if b.base >= scanned_from and b.epoch > latest:
                    self.epochs = [e for e in self.epochs if e[1] < b.base]
                    self.epochs.append((b.epoch, b.base))
            self._epochs_on_load()
        self.hw = min(max(self.hw, self.log_start), self.leo)
        self.recovery_point = min(max(self.recovery_point, self.log_start), self.leo)
        assert self.log.recovery_point == self.recovery_point

    @rule()
    def clean_restart(self):
        self.log.close()
        self.log = PartitionLog(
            self.directory, self.config, recovery_point=self.recovery_point,
            log_start_offset=self.log_start, high_watermark=self.hw, sync=False,
        )
        self.recovery_point = self.leo  # a clean shutdown means everything was flushed
        self._epochs_on_load()

    # --- invariants ---------------------------------------------------------------------------

    @precondition(lambda self: self.log is not None)
    @invariant()
    def matches_the_model_on_disk(self):
        log = self.log
        assert (log.log_start_offset, log.log_end_offset, log.high_watermark) == (
            self.log_start, self.leo, self.hw)
        on_disk = []
        segments = log.segments
        for i, seg in enumerate(segments):
            batches = parse_log_file(seg.log_path)
            assert os.path.getsize(seg.log_path) == seg.size
            check_segment_indexes(seg, batches)
            if i + 1 < len(segments):
                assert seg.base_offset < segments[i + 1].base_offset
            for b in batches:
                assert b.base_offset >= seg.base_offset
                if i + 1 < len(segments):
                    assert b.last_offset < segments[i + 1].base_offset
            on_disk += [b.data for b in batches]
        assert on_disk == [b.data for b in self.model]
        for a, b in itertools.pairwise(self.model):
            assert b.base == a.last + 1, "offsets must be contiguous"
        if self.model:
            assert self.model[-1].last + 1 == self.leo
            assert self.model[0].base <= self.log_start or not self.model
        else:
            assert segments[-1].base_offset == self.leo
        live = [b for b in self.model if b.last >= self.log_start]
        if live:
            assert live[0].base <= self.log_start

    @precondition(lambda self: self.log is not None)
    @invariant()
    def epoch_cache_matches_the_batches(self):
        assert [tuple(e) for e in self.log.epochs.entries] == self.epochs
        # and with the batches themselves: each live batch's epoch is the one in force
        for b in self.model:
            if b.base >= self.log_start:
                assert self.log.epochs.epoch_for_offset(b.base) == b.epoch


LogMachine.TestCase.settings = settings(
    max_examples=examples(int(os.environ.get("MOLDAU_PROP_EXAMPLES", "800"))),
    stateful_step_count=35,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
test_partition_log = LogMachine.TestCase
