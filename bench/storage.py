"""Storage engine benchmarks: appends, offset lookups and crash recovery of a partition log.

Each Moldau figure has a peer measured in the same run, on the same filesystem, with the
two sides interleaved round by round (a busy spell slows both sides of a round alike):

- Appends: `PartitionLog.append_as_leader` of pre-built 16 KiB batches into the page
  cache (no fsync; it validates header and CRC-32C, assigns offsets, writes, keeps the
  indexes), next to `os.write` of the same bytes, 16 KiB per call, to a fresh file in
  the same directory: the bandwidth the kernel gives one writer at that granularity.
- Lookups: `log.read(offset, 1 MiB)` of a random offset (positions only, no bytes
  copied) in a log of 10,000 segments next to the same lookup in a log of 10 segments of
  the same shape: the ratio shows how the lookup grows with the segment count.
- Recovery: reopening a log with `clean_shutdown=False, recovery_point=0` (every batch
  read, structure and CRC-32C checked, indexes rebuilt) next to reading the same files
  sequentially with `os.read` in 4 MiB chunks. Both read from a warm page cache.

Run standalone with `python bench/storage.py`, or through `make bench`.
"""

from __future__ import annotations

import bisect
import gc
import itertools
import math
import os
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from statistics import median
from typing import Any

import _support as s

ORDER = 20  # after the protocol codec
TITLE = "Storage"
PACKAGES = ("moldau", "crc32c", "crc32c-rs")

KIB = 1024
MIB = 1024 * KIB
MB = 1e6  # throughput in MB/s: 10^6 bytes per second

NOW = 1_700_000_000_000  # the batches' timestamp, and the broker clock of every append

GOAL_APPEND_SHARE = 0.80  # append bandwidth at least 80% of raw os.write
CRC_COVERED_FROM = 21  # a v2 batch's CRC-32C covers its bytes from the attributes on
# Offset lookup O(log n) in the segment count: from 10 to 10,000 segments a lookup may
# take at most log(10,000) / log(10) = 4x the time (lookup_bound)

APPEND_BATCH = 16 * KIB
APPEND_ROUND_MIB = 32  # per side and round; a fresh file each round
APPEND_ROUNDS = 15  # -> 480 MiB per side
RAW_BIG_WRITE = MIB  # reference: the same bytes in 1 MiB writes
LARGE_BATCH = 256 * KIB  # reference: where the per-append cost stops mattering
# The first appends to a fresh log write the first entries of its freshly mapped indexes,
# which costs milliseconds (see the roll row); that is a segment roll's cost, paid once per
# segment.bytes (1 GiB by default), not per 32 MiB round. Both sides skip as many bytes.
UNTIMED = 4

LOOKUP_SEGMENTS = (10, 10_000)
LOOKUP_SEGMENT_BYTES = 16 * KIB  # 8 batches of 2 KiB, 4 records each
LOOKUP_BATCH = 2 * KIB
LOOKUP_RECORDS_PER_BATCH = 4
LOOKUP_INDEX_BYTES = 8 * KIB  # active segment only; see _lookup_config
LOOKUP_OFFSETS = 4096  # random offsets per log, cycled through

RECOVERY_MIB = 256
RECOVERY_ROUNDS = 7
RECOVERY_SEGMENT_BYTES = 64 * MIB
READ_CHUNK = 4 * MIB

ROLL_APPENDS = 40  # reference: appends that each roll a segment

# Space the suite needs at once: one append round per side, the recovery log, the
# lookup logs; with a margin. Less free space scales the sizes down.
MIN_FREE_FRACTION = 4


# --- inputs -----------------------------------------------------------------------------


def record_batch(size: int, seed: int, records: int = 1) -> bytes:
    """A valid uncompressed v2 batch of exactly `size` bytes holding `records` records,
    with random (incompressible) values, built by Moldau's own producer-side builder."""
    from moldau.protocol.records import build_batch

    payload = random.Random(seed).randbytes(size)
    value = (size - 61 - 20 * records) // records
    extra = 0
    for _ in range(8):  # varint lengths shift by a byte or two; converge on the last value
        items = [(None, payload[:value], [], NOW) for _ in range(records - 1)]
        items.append((None, payload[: value + extra], [], NOW))
        batch = build_batch(items)
        if len(batch) == size:
            return batch
        extra += size - len(batch)
    raise RuntimeError(f"could not build a batch of exactly {size} bytes")


def _log_config(**changes: Any) -> Any:
    from moldau.storage.config import LogConfig

    # Keep everything: retention must not delete what the suite measures.
    return LogConfig(retention_ms=-1, **changes)


def _open_log(directory: Path, config: Any, **kwargs: Any) -> Any:
    from moldau.storage.log import PartitionLog

    return PartitionLog(str(directory), config, **kwargs)


# --- machine facts ----------------------------------------------------------------------


def filesystem(path: Path) -> str:
    """`df -T` (as `--output`) of the directory the suite writes to: type, device, mount point."""
    try:
        out = subprocess.run(
            ["df", "--output=fstype,source,target", str(path)],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout.splitlines()
        fstype, source, target = out[-1].split(None, 2)
        return f"{fstype} ({source}, mounted on {target})"
    except (OSError, subprocess.SubprocessError, ValueError, IndexError):
        return "unknown (df -T failed)"


def memory_gib() -> float:
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30


def raise_fd_limit() -> tuple[int, int, int]:
    """Raise the soft open-files limit to the hard one; (soft before, soft now, hard)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = hard if hard != resource.RLIM_INFINITY else max(soft, 1 << 20)
    if soft != resource.RLIM_INFINITY and soft < target:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        except (ValueError, OSError):
            target = soft
    return soft, resource.getrlimit(resource.RLIMIT_NOFILE)[0], hard


def create_cost(directory: Path, files: int = 50) -> float:
    """Median seconds of creating an empty file in (a fresh subdirectory of) directory."""
    directory.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix="create-cost-", dir=directory))
    samples = []
    try:
        for i in range(files):
            path = scratch / f"f{i}"
            start = time.perf_counter()
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
            samples.append(time.perf_counter() - start)
            os.close(fd)
    finally:
        shutil.rmtree(scratch)
    return median(samples)


def max_map_count() -> int:
    try:
        return int(Path("/proc/sys/vm/max_map_count").read_text())
    except (OSError, ValueError):
        return 65530  # Linux's default


@contextmanager
def gc_off() -> Iterator[None]:
    """Like timeit: no garbage collection inside a timed section."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def timing(samples: list[float], loop: int) -> s.Timing:
    """Per-operation samples (one per round) as a Timing, so ratio_to pairs the rounds."""
    return s.Timing(median(samples), loop, len(samples), tuple(samples))


def mbps(t: s.Timing, bytes_per_op: int) -> float:
    return bytes_per_op / t.median / MB


def pct(share: float) -> str:
    return f"{100 * share:.0f}%"


# --- 1. appends -------------------------------------------------------------------------


@dataclass
class AppendResult:
    batch_size: int
    moldau: s.Timing
    raw: s.Timing
    raw_big: s.Timing | None  # the same bytes in RAW_BIG_WRITE writes
    batches_per_round: int
    crc_write: s.Timing | None = None  # CRC-32C of each batch, then os.write of it
    python_floor: s.Timing | None = None  # the least a validating append in Python does


def _moldau_append(directory: Path, batches: list[bytes]) -> float:
    """Seconds for the appends of batches[UNTIMED:] into a fresh log."""
    log = _open_log(directory, _log_config())
    append = log.append_as_leader
    for batch in batches[:UNTIMED]:
        append(batch, 0, now=NOW)
    with gc_off():
        start = time.perf_counter()
        for batch in batches[UNTIMED:]:
            append(batch, 0, now=NOW)
        elapsed = time.perf_counter() - start
    assert log.log_end_offset == len(batches), "every batch holds one record"
    log.close()
    shutil.rmtree(directory)
    return elapsed


def _raw_write(path: Path, head: bytes, chunks: list[bytes], check_crc: bool = False) -> float:
    """Seconds for writing chunks to a fresh file, after head (untimed). check_crc first
    computes each chunk's CRC-32C over its CRC-covered bytes, with the storage engine's
    CRC-32C: the least an append that validates what it stores can do (a floor, not an
    append path)."""
    from moldau.storage.crc import crc32c

    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        write = os.write
        write(fd, head)
        with gc_off():
            start = time.perf_counter()
            if check_crc:
                for chunk in chunks:
                    crc32c(memoryview(chunk)[CRC_COVERED_FROM:])
                    if write(fd, chunk) != len(chunk):
                        raise OSError(f"short write to {path}")
            else:  # the plain peer pays no branch per chunk
                for chunk in chunks:
                    if write(fd, chunk) != len(chunk):
                        raise OSError(f"short write to {path}")
            elapsed = time.perf_counter() - start
    finally:
        os.close(fd)
    path.unlink()
    return elapsed


def _python_floor(path: Path, head: bytes, batches: list[bytes]) -> float:
    """Seconds for the least a validating append can do in Python, one call per batch:
    unpack the header, check length, magic, CRC-32C, record count and base offset,
    write the batch with its offset and epoch patched (pwritev, no copy) and put an
    offset index entry in a mapping. No roll checks, no time index, no bookkeeping: a
    floor for the interpreter's share, not an append path."""
    import mmap
    import struct

    from moldau.protocol.records import HEADER
    from moldau.storage.crc import crc32c

    unpack, pack_front = HEADER.unpack_from, struct.Struct(">qii").pack
    pack_entry = struct.Struct(">ii").pack_into
    pwritev = os.pwritev
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    index = mmap.mmap(-1, 8 * (len(batches) + 1))
    state = [os.write(fd, head), 0, 0]  # file size, next offset, index entries

    def append(batch: bytes) -> None:
        h = unpack(batch, 0)
        view = memoryview(batch)
        if h[1] + 12 != len(batch) or h[3] != 2 or crc32c(view[CRC_COVERED_FROM:]) != h[4]:
            raise ValueError("invalid batch")
        if h[12] <= 0 or h[6] != h[12] - 1 or h[0] != 0:
            raise ValueError("invalid batch")
        size, offset, entries = state
        written = pwritev(fd, (pack_front(offset, h[1], 0), view[16:]), size)
        pack_entry(index, entries * 8, offset, size)
        state[0], state[1], state[2] = size + written, offset + h[6] + 1, entries + 1

    try:
        with gc_off():
            start = time.perf_counter()
            for batch in batches:
                append(batch)
            elapsed = time.perf_counter() - start
    finally:
        index.close()
        os.close(fd)
    path.unlink()
    return elapsed


def _appends(
    workdir: Path, round_mib: int, rounds: int, batch_size: int, big_writes: bool
) -> AppendResult:
    pool = [record_batch(batch_size, seed) for seed in range(16)]
    count = round_mib * MIB // batch_size
    batches = [pool[i % len(pool)] for i in range(count)]
    data = b"".join(batches)
    head, timed = data[: UNTIMED * batch_size], data[UNTIMED * batch_size :]
    big = [timed[i : i + RAW_BIG_WRITE] for i in range(0, len(timed), RAW_BIG_WRITE)]
    sides: dict[str, Callable[[int], float]] = {
        "moldau": lambda r: _moldau_append(workdir / f"append{r}-0", batches),
        "raw": lambda r: _raw_write(workdir / f"raw{r}.bin", head, batches[UNTIMED:]),
    }
    if big_writes:
        sides["raw_big"] = lambda r: _raw_write(workdir / f"rawbig{r}.bin", head, big)
        sides["crc_write"] = lambda r: _raw_write(workdir / f"crc{r}.bin", head,
                                                  batches[UNTIMED:], check_crc=True)
        sides["python_floor"] = lambda r: _python_floor(workdir / f"floor{r}.bin", head,
                                                        batches[UNTIMED:])
    for side in sides.values():
        side(-1)  # warm-up: imports, first allocations
    samples: dict[str, list[float]] = {name: [] for name in sides}
    order = list(sides)
    timed_batches = count - UNTIMED
    for r in range(rounds):
        k = r % len(order)
        for name in order[k:] + order[:k]:  # rotate who goes first
            samples[name].append(sides[name](r) / timed_batches)
    return AppendResult(
        batch_size,
        timing(samples["moldau"], timed_batches),
        timing(samples["raw"], timed_batches),
        timing(samples["raw_big"], timed_batches) if big_writes else None,
        timed_batches,
        timing(samples["crc_write"], timed_batches) if big_writes else None,
        timing(samples["python_floor"], timed_batches) if big_writes else None,
    )


def _append_profile(workdir: Path) -> Callable[[], str]:
    """cProfile of the append path: one 16 KiB batch per call into a fresh log."""

    def profile() -> str:
        directory = workdir / "profile-0"
        log = _open_log(directory, _log_config())
        pool = itertools.cycle([record_batch(APPEND_BATCH, seed) for seed in range(16)])
        try:
            return s.profile_top(lambda: log.append_as_leader(next(pool), 0, now=NOW), 2048, 8)
        finally:
            log.close()
            shutil.rmtree(directory)

    return profile


# --- 2. lookups -------------------------------------------------------------------------


def _lookup_config() -> Any:
    # Kafka's segment.index.bytes (10 MiB) is the size of the *active* segment's indexes
    # only: a roll trims them to their entries, so the read path does not see it. Each
    # roll with 10 MiB indexes costs milliseconds here (see the roll row), which would
    # make building 10,000 segments take minutes; 8 KiB keeps the build short.
    return _log_config(
        segment_bytes=LOOKUP_SEGMENT_BYTES,
        segment_index_bytes=LOOKUP_INDEX_BYTES,
        index_interval_bytes=4096,
    )


def _build_segments(directory: Path, segments: int) -> Any:
    """A log of `segments` full segments: one append of 8 batches fills a segment, the
    next append rolls."""
    per_segment = LOOKUP_SEGMENT_BYTES // LOOKUP_BATCH
    pool = [
        record_batch(LOOKUP_BATCH, seed, LOOKUP_RECORDS_PER_BATCH) for seed in range(per_segment)
    ]
    record_set = b"".join(pool)
    log = _open_log(directory, _lookup_config())
    for _ in range(segments):
        log.append_as_leader(record_set, 0, now=NOW)
    log.update_high_watermark(log.log_end_offset)
    assert len(log.segments) == segments, (len(log.segments), segments)
    return log


@dataclass
class LookupResult:
    times: dict[str, s.Timing]  # keys: see _lookups
    counts: tuple[int, int]
    build_seconds: dict[int, float]
    wanted: int
    limit_note: str
    profile: str | None = None


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def _fds_per_segment(workdir: Path) -> int:
    """Descriptors one more rolled segment holds, counted (not assumed): its `.log`, plus
    one per index still mapped (Python's mmap keeps a duplicate of the file's descriptor)."""
    directory = workdir / "fdcount-0"
    log = _build_segments(directory, 2)
    before = _open_fds()
    log.roll()
    after = _open_fds()
    log.close()
    shutil.rmtree(directory)
    return after - before


def _segment_budget(wanted: int, per_segment: int, reserved: int) -> tuple[int, str]:
    """How many segments this process can hold open: `per_segment` descriptors and two
    mappings each, after `reserved` descriptors for everything else."""
    before, soft, hard = raise_fd_limit()
    by_fds = (soft - _open_fds() - reserved - 64) // max(per_segment, 1)
    by_maps = (max_map_count() - 4096) // 2
    fits = min(wanted, by_fds, by_maps)
    raised = f"raised from {before}" if soft != before else "already at the hard limit"
    note = (
        f"open files limit {soft:,} ({raised}; hard limit {hard:,}), vm.max_map_count "
        f"{max_map_count():,}; {per_segment} descriptors per segment"
    )
    return fits, note


def _lookups(workdir: Path) -> LookupResult:
    """Random-offset reads in a log of 10 segments and in one of (up to) 10,000, with
    diagnostics for the large one: offsets confined to its oldest or newest 10 segments
    (the same working set as the small log: what differs is only where they sit), and a
    plain `os.pread` of a whole segment from a random one of each log (the cost of
    touching a larger working set, without Moldau's code)."""
    wanted = LOOKUP_SEGMENTS[-1]
    from moldau.storage.segment import MAPPED_INDEXES

    per_segment = _fds_per_segment(workdir)
    # Reads map indexes again, in the descriptors left beyond MAPPED_INDEXES.RESERVED.
    fits, note = _segment_budget(
        wanted, per_segment, per_segment * LOOKUP_SEGMENTS[0] + MAPPED_INDEXES.RESERVED)
    few, many = LOOKUP_SEGMENTS[0], max(fits, LOOKUP_SEGMENTS[0])
    logs: dict[int, Any] = {}
    build: dict[int, float] = {}
    rng = random.Random(20)
    try:
        for n in (few, many):
            start = time.perf_counter()
            logs[n] = _build_segments(workdir / f"lookup{n}-0", n)
            build[n] = time.perf_counter() - start
        big = logs[many]
        per = big.segments[1].base_offset  # offsets per segment
        ranges = {
            "few": (logs[few], 0, logs[few].log_end_offset),
            "many": (big, 0, big.log_end_offset),
            "oldest": (big, 0, few * per),
            "newest": (big, big.log_end_offset - few * per, big.log_end_offset),
        }
        fns: dict[str, Callable[[], object]] = {}
        for name, (log, low, high) in ranges.items():
            offsets = [rng.randrange(low, high) for _ in range(LOOKUP_OFFSETS)]
            for offset in offsets[:64]:  # the lookups find the batch that holds the offset
                found = log.read(offset, MIB)
                assert found.slice is not None and found.start.offset == offset
            fns[name] = _cycle_reads(log, offsets)
            if name in ("few", "many"):
                fns[f"search_{name}"] = _cycle_searches(log, offsets)
        for n, name in ((few, "pread_few"), (many, "pread_many")):
            fds = itertools.cycle(
                [rng.choice(logs[n].segments).fd for _ in range(LOOKUP_OFFSETS)]
            )
            fns[name] = lambda fds=fds: os.pread(next(fds), LOOKUP_SEGMENT_BYTES, 0)
        t = s.measure(fns)
        flatness = t["few"].ratio_to(t["many"])
        profile = (
            s.profile_top(fns["many"], 20_000, 8) if flatness > lookup_bound(few, many) else None
        )
    finally:
        for log in logs.values():
            log.close()
        for n in (few, many):
            shutil.rmtree(workdir / f"lookup{n}-0", ignore_errors=True)
    return LookupResult(t, (few, many), build, wanted, note, profile)


def _cycle_reads(log: Any, offsets: list[int]) -> Callable[[], object]:
    it = itertools.cycle(offsets)
    read = log.read
    return lambda: read(next(it), MIB)


def _cycle_searches(log: Any, offsets: list[int]) -> Callable[[], object]:
    """The searches of a read alone: the segment holding the offset (a bisect over the
    segments' base offsets, as the log does) and its offset index entry; no file read."""
    it = itertools.cycle(offsets)
    segments = log.segments
    bases = [segment.base_offset for segment in segments]
    right = bisect.bisect_right

    def search() -> object:
        offset = next(it)
        return segments[right(bases, offset) - 1].offset_index.lookup(offset)

    return search


def lookup_bound(few: int, many: int) -> float:
    """How much longer an O(log n) lookup may take in `many` segments than in `few`."""
    return math.log(many) / math.log(few)


# --- 3. recovery ------------------------------------------------------------------------


@dataclass
class RecoveryResult:
    recover: s.Timing
    raw: s.Timing
    clean_open: s.Timing
    total_bytes: int
    segments: int


def _write_recovery_log(directory: Path, mib: int) -> tuple[int, int]:
    pool = [record_batch(APPEND_BATCH, seed) for seed in range(64)]
    record_set = b"".join(pool)  # 1 MiB per append: the build is not what is measured
    log = _open_log(directory, _log_config(segment_bytes=RECOVERY_SEGMENT_BYTES))
    for _ in range(mib):
        log.append_as_leader(record_set, 0, now=NOW)
    end, segments = log.log_end_offset, len(log.segments)
    log.close()
    return end, segments


def _read_files(paths: list[Path]) -> int:
    total = 0
    read = os.read
    for path in paths:
        fd = os.open(path, os.O_RDONLY)
        try:
            while chunk := read(fd, READ_CHUNK):
                total += len(chunk)
        finally:
            os.close(fd)
    return total


def _recovery(workdir: Path, mib: int, rounds: int) -> RecoveryResult:
    directory = workdir / "recovery-0"
    config = _log_config(segment_bytes=RECOVERY_SEGMENT_BYTES)
    end, segments = _write_recovery_log(directory, mib)
    logs = sorted(directory.glob("*.log"))
    total = sum(p.stat().st_size for p in logs)

    def recover() -> float:
        with gc_off():
            start = time.perf_counter()
            log = _open_log(directory, config, clean_shutdown=False, recovery_point=0)
            elapsed = time.perf_counter() - start
        assert log.log_end_offset == end and len(log.segments) == segments
        log.close()
        return elapsed

    def raw() -> float:
        with gc_off():
            start = time.perf_counter()
            got = _read_files(logs)
            elapsed = time.perf_counter() - start
        assert got == total
        return elapsed

    def clean_open() -> float:
        with gc_off():
            start = time.perf_counter()
            log = _open_log(directory, config, clean_shutdown=True)
            elapsed = time.perf_counter() - start
        assert log.log_end_offset == end
        log.close()
        return elapsed

    sides = {"recover": recover, "raw": raw, "clean": clean_open}
    for side in sides.values():
        side()  # warm-up: everything in the page cache, indexes rebuilt once
    samples: dict[str, list[float]] = {name: [] for name in sides}
    order = list(sides)
    try:
        for r in range(rounds):
            for name in order[r % 3 :] + order[: r % 3]:
                samples[name].append(sides[name]())
    finally:
        shutil.rmtree(directory)
    return RecoveryResult(
        timing(samples["recover"], 1),
        timing(samples["raw"], 1),
        timing(samples["clean"], 1),
        total,
        segments,
    )


# --- reference: rolls -------------------------------------------------------------------


def _rolls(workdir: Path, appends: int) -> dict[int, s.Timing]:
    """Time of an append that rolls a new segment, with Kafka's 10 MiB index
    preallocation and with the 8 KiB the lookup logs use: one batch fills a segment, so
    every append rolls; the two logs take turns, append by append."""
    from moldau.storage.config import LogConfig

    batch = record_batch(APPEND_BATCH, 99)
    sizes = (LogConfig.segment_index_bytes, LOOKUP_INDEX_BYTES)
    samples: dict[int, list[float]] = {size: [] for size in sizes}
    logs = {
        size: _open_log(
            workdir / f"roll{size}-0",
            _log_config(segment_bytes=APPEND_BATCH, segment_index_bytes=size),
        )
        for size in sizes
    }
    try:
        for log in logs.values():
            log.append_as_leader(batch, 0, now=NOW)
        with gc_off():
            for _ in range(appends):
                for size, log in logs.items():
                    start = time.perf_counter()
                    log.append_as_leader(batch, 0, now=NOW)
                    samples[size].append(time.perf_counter() - start)
        assert all(len(log.segments) == appends + 1 for log in logs.values())
    finally:
        for size, log in logs.items():
            log.close()
            shutil.rmtree(workdir / f"roll{size}-0")
    return {size: timing(values, 1) for size, values in samples.items()}


# --- report -----------------------------------------------------------------------------


def _goal(met: bool) -> str:
    return "**met**" if met else "**missed**"


def _scale(workdir: Path) -> tuple[float, str]:
    """1.0, or less when the disk is short of space (the suite deletes as it goes)."""
    needed = MIN_FREE_FRACTION * (
        2 * APPEND_ROUND_MIB * MIB + RECOVERY_MIB * MIB
        + LOOKUP_SEGMENTS[-1] * 3 * LOOKUP_SEGMENT_BYTES
    )
    free = shutil.disk_usage(workdir).free
    if free >= needed:
        return 1.0, f"{free / 2**30:.0f} GiB free"
    return max(free / needed, 0.05), f"only {free / 2**30:.1f} GiB free: sizes scaled down"


def run() -> str:
    clock = s.Stopwatch()
    quick = s.RUNS < 10
    # The default temporary directory (TMPDIR, else /tmp); the report names it.
    workdir = Path(tempfile.mkdtemp(prefix="moldau-bench-storage-"))
    try:
        scale, space = _scale(workdir)
        create = create_cost(workdir)
        round_mib = max(1, int((4 if quick else APPEND_ROUND_MIB) * scale))
        append_rounds = 3 if quick else APPEND_ROUNDS
        recovery_mib = max(8, int((16 if quick else RECOVERY_MIB) * scale))
        recovery_rounds = 2 if quick else RECOVERY_ROUNDS
        fs = filesystem(workdir)

        rolls = _rolls(workdir, 8 if quick else ROLL_APPENDS)
        appended = [
            _appends(workdir, round_mib, append_rounds, APPEND_BATCH, big_writes=True),
            _appends(workdir, round_mib, append_rounds, LARGE_BATCH, big_writes=False),
        ]
        share = appended[0].moldau.ratio_to(appended[0].raw)
        profile = _append_profile(workdir)() if share < GOAL_APPEND_SHARE else None
        lookups = _lookups(workdir)
        recovered = _recovery(workdir, recovery_mib, recovery_rounds)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    place = f"{fs}; {space}; {memory_gib():.0f} GiB of RAM"
    return _report(clock, place, (workdir.parent, create), round_mib, appended, share,
                   profile, lookups, recovered, rolls)


def _report(
    clock: s.Stopwatch,
    place: str,
    where: tuple[Path, float],
    round_mib: int,
    appended: list[AppendResult],
    share: float,
    profile: str | None,
    lookups: LookupResult,
    recovered: RecoveryResult,
    rolls: dict[int, s.Timing],
) -> str:
    a, large = appended
    assert a.raw_big is not None and a.crc_write is not None and a.python_floor is not None
    from moldau.storage.crc import IMPLEMENTATION as crc_package
    floor_share = a.crc_write.ratio_to(a.raw)
    python_share = a.python_floor.ratio_to(a.raw)
    per_side = a.moldau.runs * round_mib
    rec = recovered
    rec_share = rec.recover.ratio_to(rec.raw)
    few, many = lookups.counts
    lt = lookups.times
    flatness = lt["few"].ratio_to(lt["many"])  # time(many) / time(few)
    position_skew = lt["newest"].ratio_to(lt["oldest"])  # time(oldest) / time(newest)
    total_mib = rec.total_bytes / MIB

    def tput(t: s.Timing, size: int) -> str:
        return f"{mbps(t, size):,.0f} MB/s ({s.fmt_time(t.median)} per {_size(size)})"

    def append_row(case: str, ours: s.Timing, peer: s.Timing, result: AppendResult) -> list:
        """A row of the append table: ours and the peer at result's batch size."""
        size = result.batch_size
        return [case, tput(ours, size), tput(peer, size), pct(ours.ratio_to(peer)),
                f"{result.moldau.runs} rounds x {result.batches_per_round} batches"]

    throughput_rows = [
        append_row(
            "append 16 KiB batches, page cache (no fsync): `append_as_leader` vs `os.write` "
            "of the same bytes, 16 KiB per call",
            a.moldau, a.raw, a,
        ),
        append_row(
            "the same appends vs `os.write` of the same bytes in 1 MiB writes "
            "(reference: the syscall count's share)",
            a.moldau, a.raw_big, a,
        ),
        append_row(
            f"floor: CRC-32C (`{crc_package}`, as the storage engine) of each 16 KiB batch "
            "then `os.write` of it (no offsets, no indexes: the least a validating append "
            "does) vs `os.write` alone",
            a.crc_write, a.raw, a,
        ),
        append_row(
            "Python floor: one Python function per batch that checks the header and "
            "CRC-32C, writes the batch with offset and epoch patched (`pwritev`) and puts "
            "an offset index entry in a mapping, nothing else (the interpreter's least "
            "share) vs `os.write` alone",
            a.python_floor, a.raw, a,
        ),
        append_row(
            f"reference: append {_size(LARGE_BATCH)} batches vs `os.write` of the same bytes, "
            f"{_size(LARGE_BATCH)} per call",
            large.moldau, large.raw, large,
        ),
        [
            f"crash recovery of {total_mib:.0f} MiB ({rec.segments} segments of 16 KiB "
            "batches): reopen with `clean_shutdown=False, recovery_point=0` vs `os.read` "
            "of the same files in 4 MiB chunks",
            f"{rec.total_bytes / rec.recover.median / MB:,.0f} MB/s "
            f"({s.fmt_time(rec.recover.median)})",
            f"{rec.total_bytes / rec.raw.median / MB:,.0f} MB/s "
            f"({s.fmt_time(rec.raw.median)})",
            pct(rec_share),
            f"{rec.recover.runs} rounds",
        ],
    ]
    lookup_rows = [
        [
            f"`log.read(random offset, 1 MiB)`, {label}",
            s.fmt_time(lt[key].median),
            s.fmt_ratio(lt[base].ratio_to(lt[key])),
            s.fmt_loop(lt[key]),
        ]
        for label, key, base in (
            (f"{few} segments", "few", "few"),
            (f"{many:,} segments", "many", "few"),
            (f"{many:,} segments, offsets in its oldest {few} segments", "oldest", "few"),
            (f"{many:,} segments, offsets in its newest {few} segments", "newest", "few"),
        )
    ]
    lookup_rows += [
        [
            f"the searches alone (segment bisect and offset index lookup, no file read), "
            f"{label}",
            s.fmt_time(lt[key].median),
            s.fmt_ratio(lt["search_few"].ratio_to(lt[key])),
            s.fmt_loop(lt[key]),
        ]
        for label, key in ((f"{few} segments", "search_few"),
                           (f"{many:,} segments", "search_many"))
    ]
    lookup_rows += [
        [
            f"peer: `os.pread` of a whole 16 KiB segment file, random segment of {label}",
            s.fmt_time(lt[key].median),
            s.fmt_ratio(lt["pread_few"].ratio_to(lt[key])),
            s.fmt_loop(lt[key]),
        ]
        for label, key in ((f"the {few}", "pread_few"), (f"the {many:,}", "pread_many"))
    ]
    from moldau.storage.config import LogConfig

    default_index = LogConfig.segment_index_bytes
    roll_rows = [
        [
            f"append of one 16 KiB batch that rolls a new segment, segment.index.bytes "
            f"{_size(size)}" + (" (Kafka's default)" if size == default_index else ""),
            s.fmt_time(t.median),
            s.fmt_ratio(rolls[LOOKUP_INDEX_BYTES].ratio_to(t)),
            f"{t.runs} appends",
        ]
        for size, t in rolls.items()
    ]
    limited = many < lookups.wanted
    lines = [
        f"## {TITLE}",
        "",
        "Throughput and latency of `moldau.storage.log.PartitionLog` next to what the "
        "operating system does with the same bytes on the same filesystem, measured in the "
        "same run with the two sides interleaved round by round (the first side of a round "
        "rotates). Each round writes a fresh file or log, deleted after it. Medians of the "
        "rounds; the share is the median of the per-round ratios (Moldau / peer "
        "bandwidth). MB/s = 10^6 bytes per second.",
        "",
        f"- Filesystem: {place}, so every file of the suite stays in the page cache. "
        f"Files live in a temporary directory under `{where[0]}`, removed at the end. "
        f"Creating an empty file there took {s.fmt_time(where[1])} (median of 50 "
        "`open(O_CREAT)`s); a segment roll creates three.",
        "- Batches: valid uncompressed v2 batches with random (incompressible) values, "
        "built with `moldau.protocol.records.build_batch`, 16 distinct ones cycled; each "
        "holds one record at base offset 0, as a producer sends it.",
        "- Appends: `append_as_leader(batch, 0, now=...)` with `LogConfig(retention_ms=-1)` "
        "(otherwise Kafka's defaults: 1 GiB segments, 4 KiB index interval, no flush), "
        "one call per batch, as `bytes`: a read-only buffer, so it is not patched in place "
        "but written uncopied with its new first 16 bytes (offset, length, leader epoch) "
        "in one `pwritev` (the network layer hands a writable view of the request frame "
        "instead, patched in place and `pwrite`n). It validates the header and CRC-32C "
        f"(`{crc_package}`), assigns offsets and leader epoch, writes, and updates both "
        f"indexes. {round_mib} MiB per side and round into a fresh log or file, "
        f"{per_side} MiB per side in all. The first {UNTIMED} batches of each round are "
        "written untimed on every side: in a fresh log they write the first entries of "
        "its newly mapped indexes, a segment roll's cost (see the roll rows below), paid "
        "once per `segment.bytes`. The 1 MiB-write row shows how much of the raw figure is "
        f"the number of system calls; the {_size(LARGE_BATCH)} row, the same appends with "
        "batches 16 times larger (fewer calls for the same bytes).",
        "- Recovery: the log is written with 64 MiB segments and closed cleanly; each "
        "round reopens it as after a crash, which reads every batch (4 MiB `pread`s), "
        "checks its structure and CRC-32C, and rebuilds both indexes. The peer reads "
        "the same `.log` files with `os.read` in 4 MiB chunks. Nothing is dropped from "
        "the page cache between rounds: both sides read warm files (this measures the CPU "
        "cost of recovery, not the disk).",
        "",
        s.table(["case", "Moldau", "peer", "Moldau / peer", "rounds"], throughput_rows),
        "",
        "Offset lookups: logs of full 16 KiB segments (8 batches of 2 KiB, 4 records "
        "each; index entry every 4 KiB), built with `append_as_leader` "
        f"({lookups.build_seconds[few]:.1f} s and {lookups.build_seconds[many]:.1f} s). A "
        "read of an offset below the log end returns the segment file range to "
        "`sendfile`: no record bytes are copied, but the batch headers are scanned from "
        f"the index entry on with a `pread`. {LOOKUP_OFFSETS} random offsets are cycled "
        "through; each median is one lookup, all rows interleaved. The oldest/newest rows "
        f"confine the offsets to {few} segments of the large log, the working set of the "
        "small one: only the segment's place in the log differs. The `os.pread` rows are "
        "the peer for the working set: the same kind of system call on a random segment, "
        "without Moldau's code, so their ratio is what a larger working set (CPU caches, "
        "page tables, descriptors) costs by itself.",
        "",
        s.table(["case", "median", "vs 10 segments", "runs x loop"], lookup_rows),
        "",
        f"Segment limits of this process: {lookups.limit_note} (counted after a roll: its "
        "`.log`; a roll unmaps the indexes, and a read maps them again, two more "
        "descriptors since CPython's `mmap.mmap` keeps a duplicate of each, for as many "
        "segments at once as the descriptors left allow), and two mappings."
        + (
            f" **{lookups.wanted:,} segments did not fit: the large log has {many:,}.**"
            if limited
            else ""
        ),
        "",
        "The lookup logs use `segment.index.bytes` = 8 KiB instead of Kafka's 10 MiB: it "
        "sizes only the active segment's indexes (a roll trims them to their entries, so "
        "the read path is the same), but with 10 MiB every roll costs milliseconds, as "
        "these appends that each roll a segment show (interleaved, same directory):",
        "",
        s.table(["case", "median", f"vs {_size(LOOKUP_INDEX_BYTES)}", "runs"], roll_rows),
        "",
        "Goals:",
        "",
        f"- Append bandwidth at least {pct(GOAL_APPEND_SHARE)} of raw `os.write` "
        f"bandwidth (16 KiB batches, page cache): {pct(share)}, "
        f"{_goal(share >= GOAL_APPEND_SHARE)}. Checking the CRC-32C alone before each "
        f"write leaves {pct(floor_share)} of the raw bandwidth: the goal leaves the rest of "
        "an append (header checks, offsets, indexes, producer state) "
        f"{max(floor_share - GOAL_APPEND_SHARE, 0) * 100:.0f} points. The least a Python "
        f"function per batch can do (the Python floor row) leaves {pct(python_share)}"
        + (
            ": the goal is out of reach of any append written in Python on this machine."
            if python_share < GOAL_APPEND_SHARE
            else "."
        ),
        f"- Offset lookup O(log n) in the segment count: {many:,} segments take "
        f"{flatness:.2f}x the time of {few} (O(log n) allows log({many:,}) / log({few}) = "
        f"{lookup_bound(few, many):.1f}x): {_goal(flatness <= lookup_bound(few, many))}; "
        f"the searches alone grow {lt['search_few'].ratio_to(lt['search_many']):.2f}x, a "
        f"plain `os.pread` of a random segment "
        f"{lt['pread_few'].ratio_to(lt['pread_many']):.2f}x between the same two logs "
        "(what a 1,000 times larger working set costs CPU caches and page tables). Same "
        "working "
        f"set, oldest vs newest {few} segments: "
        f"{position_skew:.2f}x"
        + (
            " (a lookup costs more the more segments follow the one it reads: work "
            "linear in the segment count; see the profile below)."
            if position_skew > 1.2
            else "."
        ),
        f"- Recovery (no goal set): {pct(rec_share)} of the raw sequential read bandwidth "
        f"of the same warm files; a clean reopen of the same log takes "
        f"{s.fmt_time(rec.clean_open.median)}.",
        "",
    ]
    if profile is not None:
        lines += [
            "Where the append path's time goes (cProfile of 2048 appends of one 16 KiB batch "
            "into a fresh log; own time per function, the shares are what to read):",
            "",
            profile,
            "",
        ]
    if lookups.profile is not None:
        lines += [
            f"Where a random-offset lookup in the {many:,}-segment log spends its time "
            "(cProfile of 20,000 lookups; own time per function):",
            "",
            lookups.profile,
            "",
        ]
    lines += ["Measured on:", "", s.environment(clock, PACKAGES)]
    return "\n".join(lines) + "\n"


def _size(size: int) -> str:
    if size >= MIB and size % MIB == 0:
        return f"{size // MIB} MiB"
    return f"{size // KIB} KiB" if size % KIB == 0 else f"{size} B"


if __name__ == "__main__":
    s.configure(quick="--quick" in sys.argv[1:])
    print(run())
