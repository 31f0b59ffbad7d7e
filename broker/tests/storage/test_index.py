"""Offset and time indexes: Kafka's byte format, lookups, trimming, reopening, corruption."""

import bisect
import os
import shutil
import struct
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule
from hypothesis_budget import examples

from moldau.storage.index import (
    DEFAULT_MAX_INDEX_SIZE,
    NO_TIMESTAMP,
    CorruptIndexError,
    IndexAppendError,
    IndexClosedError,
    IndexFullError,
    IndexOffsetOverflowError,
    OffsetIndex,
    OffsetPosition,
    TimeIndex,
    TimestampOffset,
    base_offset_of,
    segment_file_name,
)

DATA = Path(__file__).resolve().parent.parent / "data" / "storage"
INT32_MAX = 2**31 - 1

GOLDEN_OFFSETS = [(105, 0), (130, 4120), (171, 8250)]
GOLDEN_TIMES = [(1700000000000, 105), (1700000000500, 130), (1700000001000, 171)]


def offset_index(tmp_path, base=100, size=1024, **kw) -> OffsetIndex:
    return OffsetIndex(tmp_path / segment_file_name(base, ".index"), base, size, **kw)


def time_index(tmp_path, base=100, size=1200, **kw) -> TimeIndex:
    return TimeIndex(tmp_path / segment_file_name(base, ".timeindex"), base, size, **kw)


# -- file names ------------------------------------------------------------------------


def test_segment_file_names():
    assert segment_file_name(0, ".index") == "00000000000000000000.index"
    assert segment_file_name(42, ".timeindex") == "00000000000000000042.timeindex"
    assert segment_file_name(2**63 - 1, ".log") == "09223372036854775807.log"
    with pytest.raises(ValueError):
        segment_file_name(-1, ".log")


@pytest.mark.parametrize(
    "name, base",
    [
        ("00000000000000000042.index", 42),
        ("/var/kafka/t-0/00000000000000001000.timeindex", 1000),
        ("00000000000000000007.index.deleted", 7),
        ("00000000000000000007.log.swap", 7),
    ],
)
def test_base_offset_of(name, base):
    assert base_offset_of(name) == base
    assert base_offset_of(Path(name)) == base


@pytest.mark.parametrize("name", ["leader-epoch-checkpoint", ".index", "12a.index", "-1.index"])
def test_base_offset_of_rejects_other_names(name):
    with pytest.raises(ValueError, match="segment file name"):
        base_offset_of(name)


# -- creation, preallocation, trimming ----------------------------------------------------


def test_new_index_is_preallocated_to_whole_entries(tmp_path):
    idx = offset_index(tmp_path, size=1001)
    assert idx.length == 1000 == os.path.getsize(idx.path)
    assert (idx.entries, idx.max_entries, idx.size_in_bytes) == (0, 125, 0)
    t = time_index(tmp_path, size=1001)
    assert t.length == 996 and t.max_entries == 83
    idx.close()
    t.close()


def test_default_max_size_is_ten_mebibytes(tmp_path):
    idx = OffsetIndex(tmp_path / "00000000000000000000.index")
    assert idx.length == DEFAULT_MAX_INDEX_SIZE == 10 * 1024 * 1024
    assert idx.base_offset == 0  # taken from the file name
    idx.close()
    assert os.path.getsize(idx.path) == 0


def test_max_size_below_one_entry_is_refused(tmp_path):
    with pytest.raises(ValueError, match="max index size"):
        offset_index(tmp_path, size=7)
    assert not list(tmp_path.iterdir())


def test_close_trims_reopen_derives_entries_resize_grows(tmp_path):
    idx = offset_index(tmp_path)
    for offset, position in GOLDEN_OFFSETS:
        idx.append(offset, position)
    idx.close()
    idx.close()  # twice is harmless
    assert os.path.getsize(idx.path) == 24
    again = OffsetIndex(idx.path, 100, 1024)
    assert again.entries == 3 and again.is_full()  # trimmed: no free slot until resized
    assert again.last_offset == 171
    with pytest.raises(IndexFullError):
        again.append(200, 9000)
    assert again.resize(1024) is True
    assert again.resize(1024) is False
    assert again.max_entries == 128 and os.path.getsize(idx.path) == 1024
    again.append(200, 9000)
    assert again.lookup(250) == (200, 9000)
    again.close()
    assert os.path.getsize(idx.path) == 32


def test_empty_index_closes_to_an_empty_file_and_reopens(tmp_path):
    idx = offset_index(tmp_path)
    idx.close()
    assert os.path.getsize(idx.path) == 0
    again = OffsetIndex(idx.path, 100, 1024)
    assert again.entries == 0 and again.lookup(500) == (100, 0)
    again.sanity_check(full=True)
    again.resize(80)
    again.append(100, 0)
    again.close()


def test_resize_below_the_entries_is_refused(tmp_path):
    idx = offset_index(tmp_path)
    idx.append(101, 0)
    idx.append(102, 10)
    with pytest.raises(ValueError, match="holds 2 entries"):
        idx.resize(8)
    idx.close()


def test_reset_empties_and_regrows(tmp_path):
    idx = offset_index(tmp_path)
    idx.append(101, 0)
    idx.trim_to_valid_size()
    assert idx.length == 8
    idx.reset()
    assert idx.entries == 0 and idx.length == 1024 and idx.last_offset == 100
    idx.close()


def test_read_only_index(tmp_path):
    with pytest.raises(FileNotFoundError):
        offset_index(tmp_path, writable=False)
    shutil.copy(DATA / "00000000000000000100.index", tmp_path)
    idx = offset_index(tmp_path, writable=False)
    assert idx.lookup(140) == (130, 4120)
    with pytest.raises(ValueError, match="read-only"):
        idx.append(200, 9000)
    idx.close()
    assert os.path.getsize(idx.path) == 24


def test_closed_index_refuses_use(tmp_path):
    idx = offset_index(tmp_path)
    idx.close()
    for call in (lambda: idx.lookup(1), lambda: idx.append(101, 0), lambda: idx.truncate_to(0)):
        with pytest.raises(IndexClosedError):
            call()
    idx.flush()  # flushing a closed index is a no-op


def test_flush_rename_delete(tmp_path):
    idx = offset_index(tmp_path)
    idx.append(101, 0)
    idx.flush()
    with open(idx.path, "rb") as f:
        assert f.read(8) == struct.pack(">ii", 1, 0)
    deleted = idx.path + ".deleted"
    idx.rename_to(deleted)
    assert idx.path == deleted and os.path.exists(deleted)
    idx.append(102, 5)  # the mapping survives the rename
    assert idx.delete_if_exists() is True
    assert idx.delete_if_exists() is False
    assert not list(tmp_path.iterdir())


def test_context_manager_closes(tmp_path):
    with offset_index(tmp_path) as idx:
        idx.append(101, 0)
    assert idx.closed and os.path.getsize(idx.path) == 8


# -- offset index ---------------------------------------------------------------------------


def test_offset_lookup_semantics(tmp_path):
    idx = offset_index(tmp_path)
    assert idx.lookup(150) == OffsetPosition(100, 0)  # empty: (base offset, 0)
    for offset, position in GOLDEN_OFFSETS:
        idx.append(offset, position)
    assert idx.lookup(0) == (100, 0)
    assert idx.lookup(104) == (100, 0)
    assert idx.lookup(105) == (105, 0)
    assert idx.lookup(129) == (105, 0)
    assert idx.lookup(130) == (130, 4120)
    assert idx.lookup(170) == (130, 4120)
    assert idx.lookup(10**12) == (171, 8250)
    assert idx.entry(1) == (130, 4120)
    with pytest.raises(IndexError):
        idx.entry(3)
    idx.close()


def test_offset_append_must_increase(tmp_path):
    idx = offset_index(tmp_path)
    idx.append(110, 100)
    with pytest.raises(IndexAppendError, match="not larger than the last offset 110"):
        idx.append(110, 200)
    with pytest.raises(IndexAppendError, match="not larger"):
        idx.append(105, 200)
    with pytest.raises(IndexAppendError, match="below the last position 100"):
        idx.append(111, 99)
    with pytest.raises(IndexAppendError, match="int32"):
        idx.append(111, 2**31)
    idx.append(111, 100)  # an equal position is fine
    assert idx.entries == 2
    idx.close()


def test_offset_append_overflow(tmp_path):
    idx = offset_index(tmp_path)
    with pytest.raises(IndexOffsetOverflowError):
        idx.append(99, 0)
    with pytest.raises(IndexOffsetOverflowError):
        idx.append(100 + INT32_MAX + 1, 0)
    assert idx.can_append_offset(100 + INT32_MAX) and not idx.can_append_offset(99)
    idx.append(100 + INT32_MAX, 0)
    assert idx.lookup(2**40) == (100 + INT32_MAX, 0)
    idx.close()


def test_offset_index_full(tmp_path):
    idx = offset_index(tmp_path, size=24)
    for i in range(3):
        idx.append(101 + i, i)
    assert idx.is_full()
    with pytest.raises(IndexFullError):
        idx.append(200, 10)
    idx.close()


def test_offset_truncate_to(tmp_path):
    idx = offset_index(tmp_path)
    for offset, position in GOLDEN_OFFSETS:
        idx.append(offset, position)
    idx.truncate_to(1000)  # past the end: no effect
    assert idx.entries == 3
    idx.truncate_to(171)  # exact: the entry goes
    assert idx.entries == 2 and idx.last_offset == 130
    idx.truncate_to(129)  # between: everything >= 129 goes
    assert idx.entries == 1 and idx.last_offset == 105
    idx.append(106, 10)  # appends continue from the new end
    idx.truncate_to(50)
    assert idx.entries == 0 and idx.last_offset == 100
    idx.append(101, 0)  # an empty index takes any position again
    idx.close()
    assert os.path.getsize(idx.path) == 8


def test_fetch_upper_bound_offset(tmp_path):
    idx = offset_index(tmp_path)
    for offset, position in GOLDEN_OFFSETS:
        idx.append(offset, position)
    assert idx.fetch_upper_bound_offset(OffsetPosition(105, 0), 4000) == (130, 4120)
    assert idx.fetch_upper_bound_offset(OffsetPosition(105, 0), 4120) == (130, 4120)
    assert idx.fetch_upper_bound_offset(OffsetPosition(130, 4120), 1) == (171, 8250)
    assert idx.fetch_upper_bound_offset(OffsetPosition(171, 8250), 1) is None
    idx.close()


def test_lookup_across_the_warm_section(tmp_path):
    # 1024 entries are warm (8 KiB); use several times that so both branches are taken.
    idx = offset_index(tmp_path, size=8 * 5000)
    offsets = [100 + 3 * i + 1 for i in range(5000)]
    for i, offset in enumerate(offsets):
        idx.append(offset, 10 * i)
    for target in [0, 100, 101, 102, *range(2000, 15200, 37), 15098, 15099, 15100, 10**9]:
        k = bisect.bisect_right(offsets, target)
        want = (100, 0) if k == 0 else (offsets[k - 1], 10 * (k - 1))
        assert idx.lookup(target) == want, target
    idx.close()


# -- time index ------------------------------------------------------------------------------


def test_time_lookup_semantics(tmp_path):
    t = time_index(tmp_path)
    assert t.last_entry == TimestampOffset(NO_TIMESTAMP, 100)
    assert t.lookup(5) == TimestampOffset(NO_TIMESTAMP, 100)
    for ts, offset in GOLDEN_TIMES:
        t.maybe_append(ts, offset)
    assert t.lookup(0) == (NO_TIMESTAMP, 100)
    assert t.lookup(1700000000000) == (1700000000000, 105)
    assert t.lookup(1700000000499) == (1700000000000, 105)
    assert t.lookup(1700000000500) == (1700000000500, 130)
    assert t.lookup(2**62) == (1700000001000, 171)
    assert t.entry(2) == (1700000001000, 171)
    t.close()


def test_time_maybe_append_rules(tmp_path):
    t = time_index(tmp_path)
    t.maybe_append(NO_TIMESTAMP, 101)  # no timestamp (magic 0): nothing indexed
    assert t.entries == 0
    t.maybe_append(1000, 110)
    t.maybe_append(1000, 110)  # the same entry again (roll/close): skipped
    t.maybe_append(1000, 120)  # same timestamp, later offset: skipped
    assert t.entries == 1
    with pytest.raises(IndexAppendError, match="below the last offset 110"):
        t.maybe_append(2000, 109)
    with pytest.raises(IndexAppendError, match="below the last timestamp 1000"):
        t.maybe_append(999, 130)
    t.maybe_append(1001, 110)  # a greater timestamp at the same offset is allowed
    assert t.last_entry == (1001, 110) and t.entries == 2
    with pytest.raises(IndexOffsetOverflowError):
        t.maybe_append(5000, 100 + INT32_MAX + 1)
    t.close()


def test_time_index_keeps_the_last_slot_for_the_roll(tmp_path):
    t = time_index(tmp_path, size=36)  # 3 slots
    t.maybe_append(1, 101)
    t.maybe_append(2, 102)
    assert t.is_full()
    with pytest.raises(IndexFullError):
        t.maybe_append(3, 103)
    t.maybe_append(3, 103, skip_full_check=True)
    assert t.entries == 3
    with pytest.raises(IndexFullError):
        t.maybe_append(4, 104, skip_full_check=True)
    t.close()


def test_time_truncate_to(tmp_path):
    t = time_index(tmp_path)
    for ts, offset in GOLDEN_TIMES:
        t.maybe_append(ts, offset)
    t.truncate_to(131)
    assert t.entries == 2 and t.last_entry == (1700000000500, 130)
    t.truncate_to(130)
    assert t.last_entry == (1700000000000, 105)
    t.truncate_to(0)
    assert t.last_entry == (NO_TIMESTAMP, 100)
    t.maybe_append(5, 100)  # any timestamp > -1 starts over
    t.close()


def test_time_resize_reloads_last_entry(tmp_path):
    t = time_index(tmp_path)
    t.maybe_append(10, 101)
    t.close()
    again = TimeIndex(t.path, 100, 1200)
    assert again.last_entry == (10, 101) and again.is_full()
    again.resize(1200)
    again.maybe_append(20, 102)
    assert again.lookup(15) == (10, 101) and again.lookup(25) == (20, 102)
    again.close()


# -- golden files ------------------------------------------------------------------------------


def test_golden_offset_index_reads_and_writes_identically(tmp_path):
    shutil.copy(DATA / "00000000000000000100.index", tmp_path)
    golden = offset_index(tmp_path, size=4096)
    assert golden.entries == 3
    assert [golden.entry(n) for n in range(3)] == GOLDEN_OFFSETS
    golden.sanity_check(full=True)
    golden.close()
    out = tmp_path / "new"
    out.mkdir()
    idx = offset_index(out)
    for offset, position in GOLDEN_OFFSETS:
        idx.append(offset, position)
    idx.close()
    assert Path(idx.path).read_bytes() == (DATA / "00000000000000000100.index").read_bytes()


def test_golden_time_index_reads_and_writes_identically(tmp_path):
    shutil.copy(DATA / "00000000000000000100.timeindex", tmp_path)
    golden = time_index(tmp_path)
    assert [golden.entry(n) for n in range(3)] == GOLDEN_TIMES
    golden.sanity_check(full=True)
    golden.close()
    out = tmp_path / "new"
    out.mkdir()
    t = time_index(out)
    for ts, offset in GOLDEN_TIMES:
        t.maybe_append(ts, offset)
    t.close()
    assert Path(t.path).read_bytes() == (DATA / "00000000000000000100.timeindex").read_bytes()


# -- corruption -------------------------------------------------------------------------------


def pack(fmt: str, entries) -> bytes:
    return b"".join(struct.pack(fmt, *e) for e in entries)


def write_file(tmp_path, name, data: bytes) -> Path:
    path = tmp_path / name
    path.write_bytes(data)
    return path


def test_size_not_a_multiple_of_the_entry_size(tmp_path):
    data = (DATA / "00000000000000000100.index").read_bytes() + b"\x00" * 5
    write_file(tmp_path, "00000000000000000100.index", data)
    idx = offset_index(tmp_path)
    assert idx.entries == 3  # whole entries only
    with pytest.raises(CorruptIndexError, match="not a multiple of the entry size 8"):
        idx.sanity_check()
    idx.close_handler()


def test_last_offset_below_base_offset(tmp_path):
    write_file(tmp_path, "00000000000000000100.index", struct.pack(">iiii", 1, 0, -5, 10))
    idx = offset_index(tmp_path)
    with pytest.raises(CorruptIndexError, match="below the base offset 100"):
        idx.sanity_check()
    idx.close()
    t_data = struct.pack(">qi", 10, -1)
    write_file(tmp_path, "00000000000000000100.timeindex", t_data)
    t = time_index(tmp_path)
    with pytest.raises(CorruptIndexError, match="below the base offset"):
        t.sanity_check()
    t.close()


def test_zero_tail_of_a_crashed_preallocated_index(tmp_path):
    # A crash leaves the preallocated file untrimmed: real entries, then zeros.
    idx = offset_index(tmp_path, size=64)
    idx.append(105, 0)
    idx.append(130, 4120)
    idx.flush()
    crashed = tmp_path / "crashed"
    crashed.mkdir()
    shutil.copy(idx.path, crashed)
    idx.close()
    reopened = offset_index(crashed, size=64)
    assert reopened.entries == 8
    with pytest.raises(CorruptIndexError, match="offsets do not increase"):
        reopened.sanity_check()
    reopened.close_handler()

    t = time_index(tmp_path, size=60)
    t.maybe_append(1700000000000, 105)
    t.flush()
    shutil.copy(t.path, crashed)
    t.close()
    reopened_t = time_index(crashed, size=60)
    with pytest.raises(CorruptIndexError, match="timestamps do not increase"):
        reopened_t.sanity_check()
    reopened_t.close_handler()


def test_full_check_finds_disorder_in_the_middle(tmp_path):
    entries = [(1, 0), (5, 10), (3, 20), (9, 30)]
    write_file(tmp_path, "00000000000000000100.index", pack(">ii", entries))
    idx = offset_index(tmp_path)
    idx.sanity_check()  # the O(1) check only sees the ends
    with pytest.raises(CorruptIndexError, match="entry 2"):
        idx.sanity_check(full=True)
    idx.close()
    positions = [(1, 0), (2, 30), (3, 20), (4, 40)]
    write_file(tmp_path, "00000000000000000100.index", pack(">ii", positions))
    idx = offset_index(tmp_path)
    with pytest.raises(CorruptIndexError, match="entry 2"):
        idx.sanity_check(full=True)
    idx.close()
    times = [(10, 1), (30, 2), (20, 3), (40, 4)]
    write_file(tmp_path, "00000000000000000100.timeindex", pack(">qi", times))
    t = time_index(tmp_path)
    t.sanity_check()
    with pytest.raises(CorruptIndexError, match="entry 2"):
        t.sanity_check(full=True)
    t.close()


@settings(
    max_examples=examples(60), deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(data=st.binary(max_size=200))
def test_random_bytes_never_crash_the_reader(tmp_path, data):
    path = write_file(tmp_path, "00000000000000000100.index", data)
    idx = OffsetIndex(path, 100, 1024)
    try:
        idx.sanity_check(full=True)
    except CorruptIndexError:
        idx.close_handler()
        return
    # Whatever passes the full check behaves like the sorted list it holds.
    model = [idx.entry(n) for n in range(idx.entries)]
    offsets = [o for o, _ in model]
    assert offsets == sorted(set(offsets))
    for target in (0, 100, 2**31, 2**33):
        k = bisect.bisect_right(offsets, target)
        assert idx.lookup(target) == (model[k - 1] if k else (100, 0))
    idx.close_handler()


# -- model-based property tests ------------------------------------------------------------------


class OffsetIndexMachine(RuleBasedStateMachine):
    """Random appends, lookups, truncations, trims and reopenings against a list model."""

    MAX_SIZE = 8 * 40

    def __init__(self):
        super().__init__()
        self.dir = tempfile.mkdtemp(prefix="moldau-index-")
        self.base = 1000
        self.path = os.path.join(self.dir, segment_file_name(self.base, ".index"))
        self.idx = OffsetIndex(self.path, self.base, self.MAX_SIZE)
        self.model: list[tuple[int, int]] = []

    def teardown(self):
        self.idx.close()
        shutil.rmtree(self.dir)

    def _next(self) -> tuple[int, int]:
        return self.model[-1] if self.model else (self.base - 1, 0)

    @precondition(lambda self: not self.idx.is_full())
    @rule(offset_step=st.integers(1, 1000), position_step=st.integers(0, 5000))
    def append(self, offset_step, position_step):
        last_offset, last_position = self._next()
        entry = (last_offset + offset_step, last_position + position_step)
        self.idx.append(*entry)
        self.model.append(entry)

    @precondition(lambda self: bool(self.model))
    @rule(back=st.integers(0, 1000), position_step=st.integers(0, 10))
    def append_out_of_order_is_refused(self, back, position_step):
        last_offset, last_position = self.model[-1]
        with pytest.raises(IndexAppendError):
            self.idx.append(last_offset - back, last_position + position_step)

    @rule(goal=st.integers(0, 60000))
    def lookup(self, goal):
        offsets = [o for o, _ in self.model]
        k = bisect.bisect_right(offsets, goal)
        assert self.idx.lookup(goal) == (self.model[k - 1] if k else (self.base, 0))

    @rule(goal=st.integers(900, 60000))
    def truncate_to(self, goal):
        self.idx.truncate_to(goal)
        self.model = [e for e in self.model if e[0] < goal]

    @rule()
    def close_and_reopen_for_append(self):
        self.idx.close()
        assert os.path.getsize(self.path) == 8 * len(self.model)
        self.idx = OffsetIndex(self.path, self.base, self.MAX_SIZE)
        self.idx.sanity_check(full=True)
        self.idx.resize(self.MAX_SIZE)

    @rule()
    def trim(self):
        self.idx.trim_to_valid_size()
        assert self.idx.is_full()
        self.idx.resize(self.MAX_SIZE)

    @invariant()
    def agrees_with_model(self):
        assert self.idx.entries == len(self.model)
        assert self.idx.last_offset == (self.model[-1][0] if self.model else self.base)
        if self.model:
            assert self.idx.entry(len(self.model) - 1) == self.model[-1]


class TimeIndexMachine(RuleBasedStateMachine):
    MAX_SIZE = 12 * 30

    def __init__(self):
        super().__init__()
        self.dir = tempfile.mkdtemp(prefix="moldau-timeindex-")
        self.base = 500
        self.path = os.path.join(self.dir, segment_file_name(self.base, ".timeindex"))
        self.idx = TimeIndex(self.path, self.base, self.MAX_SIZE)
        self.model: list[tuple[int, int]] = []

    def teardown(self):
        self.idx.close()
        shutil.rmtree(self.dir)

    @precondition(lambda self: not self.idx.is_full())
    @rule(ts_step=st.integers(0, 100), offset_step=st.integers(0, 50))
    def maybe_append(self, ts_step, offset_step):
        last_ts, last_offset = self.model[-1] if self.model else (NO_TIMESTAMP, self.base)
        # Equal timestamps are drawn too: those appends must be skipped.
        ts = (last_ts if self.model else 0) + ts_step
        entry = (ts, last_offset + offset_step)
        self.idx.maybe_append(*entry)
        if ts > last_ts:
            self.model.append(entry)

    @rule(goal=st.integers(-5, 4000))
    def lookup(self, goal):
        stamps = [t for t, _ in self.model]
        k = bisect.bisect_right(stamps, goal)
        assert self.idx.lookup(goal) == (self.model[k - 1] if k else (NO_TIMESTAMP, self.base))

    @rule(goal=st.integers(400, 2500))
    def truncate_to(self, goal):
        self.idx.truncate_to(goal)
        self.model = [e for e in self.model if e[1] < goal]

    @rule()
    def close_and_reopen_for_append(self):
        self.idx.close()
        self.idx = TimeIndex(self.path, self.base, self.MAX_SIZE)
        self.idx.resize(self.MAX_SIZE)

    @invariant()
    def agrees_with_model(self):
        assert self.idx.entries == len(self.model)
        want = self.model[-1] if self.model else (NO_TIMESTAMP, self.base)
        assert self.idx.last_entry == want
        self.idx.sanity_check(full=True)


MACHINE_SETTINGS = settings(max_examples=examples(60), stateful_step_count=40, deadline=None)
TestOffsetIndexModel = OffsetIndexMachine.TestCase
TestOffsetIndexModel.settings = MACHINE_SETTINGS
TestTimeIndexModel = TimeIndexMachine.TestCase
TestTimeIndexModel.settings = MACHINE_SETTINGS
