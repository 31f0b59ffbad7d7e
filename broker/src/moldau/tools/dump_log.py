"""kafka-dump-log (kafka.tools.DumpLogSegments): the batches of .log segments, and the
entries of .index and .timeindex files, in Kafka's text. Reads the files directly, so it
works on a stopped broker's log directory."""

from __future__ import annotations

import bisect
import os
import struct
import sys
from collections.abc import Callable
from dataclasses import dataclass, field

from moldau.errors import CorruptRecordError, KafkaStorageError
from moldau.protocol.errors import ProtocolError
from moldau.protocol.records import (
    CONTROL_ABORT,
    CONTROL_COMMIT,
    RecordBatch,
    iter_batches,
    parse_control_key,
    parse_end_txn_marker,
)
from moldau.storage.index import CorruptIndexError
from moldau.storage.segment import scan_batch_headers
from moldau.storage.txn_index import TransactionIndex
from moldau.tools import offsets_decoder, txn_log_decoder
from moldau.tools.options import Opt, Options, require
from moldau.tools.runner import ArgumentError, Tool

CODECS = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}
TIME_TYPES = {0: "CreateTime", 1: "LogAppendTime"}
# Kafka's ControlRecordType names (ABORT and COMMIT are transaction markers)
CONTROL_TYPES = {0: "ABORT", 1: "COMMIT", 2: "LEADER_CHANGE", 3: "SNAPSHOT_HEADER",
                 4: "SNAPSHOT_FOOTER", 5: "KRAFT_VERSION", 6: "KRAFT_VOTERS"}
_INDEX_ENTRY = struct.Struct(">ii")
_TIME_ENTRY = struct.Struct(">qi")

OPTIONS = [
    Opt("files", "REQUIRED: The comma separated list of data and index log files to be "
        "dumped.", "file1, file2, ..."),
    Opt("print-data-log", "If set, printing the messages content when dumping data logs. "
        "Automatically set if any decoder option is specified."),
    Opt("deep-iteration", "If set, uses deep instead of shallow iteration. Automatically "
        "set if print-data-log is enabled."),
    Opt("verify-index-only", "If set, just verify the index log without printing its "
        "content."),
    Opt("index-sanity-check", "If set, just checks the index sanity without printing its "
        "content. This is the same check that is executed on broker startup to determine "
        "if an index needs rebuilding or not."),
    Opt("max-bytes", "Limit the amount of total batches read in bytes avoiding reading the "
        "whole .log file(s).", "size", int, 2**31 - 1),
    Opt("offsets-decoder", "If set, log data will be parsed as offset data from the "
        "__consumer_offsets topic."),
    Opt("transaction-log-decoder", "If set, log data will be parsed as transaction metadata "
        "from the __transaction_state topic."),
]


def _text(data: bytes | None) -> str:
    return data.decode("utf-8", "replace") if data is not None else ""


def _plain(offset: int, key: bytes | None,
           value: bytes | None) -> tuple[str | None, str | None]:
    # Kafka's default parser gives no payload for a record without a value (a tombstone),
    # as it gives no key for one without a key: neither is printed.
    return (None if key is None else _text(key)), (None if value is None else _text(value))


def dump_segment(path: str, deep: bool, contents: bool, max_bytes: int,
                 parse: Callable[[int, bytes | None, bytes | None],
                                 tuple[str | None, str | None]] = _plain) -> list[str]:
    with open(path, "rb") as fh:
        data = fh.read(max_bytes)
    base = int(os.path.basename(path).split(".")[0])
    lines = [f"Log starting offset: {base}"]
    position = 0
    try:
        for batch in iter_batches(data, allow_partial=True):
            horizon = batch.delete_horizon_ms
            lines.append(
                f"baseOffset: {batch.base_offset} lastOffset: {batch.last_offset} count: "
                f"{batch.records_count} baseSequence: {batch.base_sequence} lastSequence: "
                f"{batch.last_sequence} producerId: {batch.producer_id} producerEpoch: "
                f"{batch.producer_epoch} partitionLeaderEpoch: {batch.partition_leader_epoch} "
                f"isTransactional: {str(batch.is_transactional).lower()} isControl: "
                f"{str(batch.is_control).lower()} deleteHorizonMs: "
                + ("OptionalLong.empty" if horizon is None else f"OptionalLong[{horizon}]")
                + f" position: {position} {TIME_TYPES[batch.timestamp_type]}: "
                f"{batch.max_timestamp} size: {batch.size_in_bytes} magic: {batch.magic} "
                f"compresscodec: {CODECS.get(batch.compression, 'unknown')} crc: "
                f"{batch.crc & 0xFFFFFFFF} isvalid: {str(batch.verify_crc()).lower()}")
            position += batch.size_in_bytes
            if not (deep or contents):
                continue
            for record in batch.records():
                sequence = (batch.base_sequence + record.offset - batch.base_offset
                            if batch.base_sequence >= 0 else -1)
                line = (f"| offset: {record.offset} {TIME_TYPES[batch.timestamp_type]}: "
                        f"{record.timestamp} keySize: "
                        f"{-1 if record.key is None else len(record.key)} valueSize: "
                        f"{-1 if record.value is None else len(record.value)} sequence: "
                        f"{sequence} headerKeys: [{','.join(k for k, _ in record.headers)}]")
                if batch.is_control:  # a marker's fields, never its key and value
                    line += control_text(record.key, record.value)
                elif contents:
                    key, payload = parse(record.offset, record.key, record.value)
                    if key is not None:
                        line += f" key: {key}"
                    if payload is not None:
                        line += f" payload: {payload}"
                lines.append(line)
    except ProtocolError as exc:
        lines.append(f"Found invalid data at position {position}: {exc}")
    return lines


def control_text(key: bytes | None, value: bytes | None) -> str:
    """What Kafka prints after a control record's metadata: the marker of an ABORT or
    COMMIT, the type of any other."""
    try:
        _, control_type = parse_control_key(key)
        name = CONTROL_TYPES.get(control_type, "UNKNOWN")
        if control_type in (CONTROL_ABORT, CONTROL_COMMIT):
            _, coordinator_epoch = parse_end_txn_marker(value)
            return f" endTxnMarker: {name} coordinatorEpoch: {coordinator_epoch}"
        return f" controlType: {name}({control_type})"
    except ProtocolError:
        return " controlType: UNKNOWN(-1)"


def dump_txn_index(path: str) -> list[str]:
    """Each aborted transaction of a .txnindex, as Kafka's dumpTxnIndex prints it."""
    if not os.path.exists(path):
        raise FileNotFoundError(2, "No such file or directory", path)
    base = int(os.path.basename(path).split(".")[0])
    try:
        entries = TransactionIndex(path, base).entries()
    except KafkaStorageError as exc:
        raise CorruptIndexError(str(exc)) from None
    return [f"version: {e.version} producerId: {e.producer_id} firstOffset: {e.first_offset} "
            f"lastOffset: {e.last_offset} lastStableOffset: {e.last_stable_offset}"
            for e in entries]


def _entries(path: str, time_index: bool) -> list[tuple[int, int]]:
    """(offset, position) or (timestamp, offset) entries with absolute offsets, up to the
    first all-zero entry after the first (a preallocated file's unused tail)."""
    with open(path, "rb") as fh:
        data = fh.read()
    base = int(os.path.basename(path).split(".")[0])
    entry = _TIME_ENTRY if time_index else _INDEX_ENTRY
    out = []
    for at in range(0, len(data) - entry.size + 1, entry.size):
        first, second = entry.unpack_from(data, at)
        if first == 0 and second == 0 and at:
            break
        out.append((first, base + second) if time_index else (base + first, second))
    return out


def _segment_of(index_path: str) -> str:
    directory, name = os.path.split(index_path)
    return os.path.join(directory, name.split(".")[0] + ".log")


def _first_batch(log_path: str, position: int, offset: int = -1) -> RecordBatch | None:
    """The first whole batch from `position` on whose last offset is >= offset, reading
    only the headers of the batches before it; None if there is none."""
    with open(log_path, "rb") as fh:
        fd = fh.fileno()
        try:
            for header in scan_batch_headers(fd, log_path, position, os.fstat(fd).st_size):
                if header.last_offset >= offset:
                    data = os.pread(fd, header.size, header.position)
                    return RecordBatch(data) if len(data) == header.size else None
        except CorruptRecordError:
            pass
    return None


@dataclass
class IndexProblems:
    """What the index dumps found, printed after every file as Kafka does."""

    offset_mismatches: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    time_mismatches: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    out_of_order: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    not_found: dict[str, list[tuple[int, int]]] = field(default_factory=dict)

    def report(self) -> None:
        for name, pairs in self.offset_mismatches.items():
            print(f"Mismatches in :{name}", file=sys.stderr)
            for indexed, logged in pairs:
                print(f"  Index offset: {indexed}, log offset: {logged}", file=sys.stderr)
        for name, pairs in self.time_mismatches.items():
            print(f"Found timestamp mismatch in :{name}", file=sys.stderr)
            for indexed, logged in pairs:
                print(f"  Index timestamp: {indexed}, log timestamp: {logged}",
                      file=sys.stderr)
        for name, pairs in self.out_of_order.items():
            print(f"Found out of order timestamp in :{name}", file=sys.stderr)
            for indexed, previous in pairs:
                print(f"  Index timestamp: {indexed}, Previously indexed timestamp: "
                      f"{previous}", file=sys.stderr)
        for pairs in self.not_found.values():
            print("The following indexed offsets are not found in the log.", file=sys.stderr)
            for indexed, logged in pairs:
                print(f"Indexed offset: {indexed}, found log offset: {logged}",
                      file=sys.stderr)


def sanity_check(path: str) -> str:
    """Kafka's index sanityCheck, the one a broker runs before trusting an index: a whole
    number of entries, and a last slot (a preallocated file's zeros included) not below
    the base offset, nor, in a time index, below the first timestamp."""
    time_index = path.endswith(".timeindex")
    entry = _TIME_ENTRY if time_index else _INDEX_ENTRY
    with open(path, "rb") as fh:
        data = fh.read()
    base = int(os.path.basename(path).split(".")[0])
    full = os.path.abspath(path)
    if len(data) % entry.size:
        kind = "Time index" if time_index else "Index"
        raise CorruptIndexError(f"{kind} file {full} is corrupt, found {len(data)} bytes "
                                f"which is neither positive nor a multiple of {entry.size}.")
    if data:
        first, second = entry.unpack_from(data, len(data) - entry.size)
        if time_index:
            first_timestamp = entry.unpack_from(data, 0)[0]
            if first < first_timestamp:
                raise CorruptIndexError(
                    f"Corrupt time index found, time index file ({full}) has non-zero size "
                    f"but the last timestamp is {first} which is less than the first "
                    f"timestamp {first_timestamp}")
            if base + second < base:
                raise CorruptIndexError(
                    f"Corrupt time index found, time index file ({full}) has non-zero size "
                    f"but the last offset is {base + second} which is less than the first "
                    f"offset {base}")
        elif base + first < base:
            raise CorruptIndexError(
                f"Corrupt index found, index file ({full}) has non-zero size but the last "
                f"offset is {base + first} which is less than the base offset {base}.")
    return f"{path} passed sanity check."


def dump_index(path: str, verify_only: bool, problems: IndexProblems) -> list[str]:
    """Each entry of an offset index, checked against the batch at its position: the
    batch there must end at the indexed offset."""
    log_path, lines = _segment_of(path), []
    for offset, position in _entries(path, False):
        batch = _first_batch(log_path, position)
        found = batch.last_offset if batch is not None else -1
        if found != offset:
            problems.offset_mismatches.setdefault(os.path.abspath(path), []).append(
                (offset, found))
        if not verify_only:
            lines.append(f"offset: {offset} position: {position}")
    return lines


def dump_time_index(path: str, verify_only: bool, problems: IndexProblems) -> list[str]:
    """Each entry of a time index, checked against the log: the batch ending at the
    indexed offset must hold that largest timestamp, and timestamps must grow."""
    log_path, lines = _segment_of(path), []
    index_path = path.removesuffix(".timeindex") + ".index"
    entries = _entries(index_path, False) if os.path.exists(index_path) else []
    indexed = [o for o, _ in entries]
    previous = -1
    name = os.path.abspath(path)
    for timestamp, offset in _entries(path, True):
        at = bisect.bisect_right(indexed, offset) - 1  # the offset index's floor entry
        batch = _first_batch(log_path, entries[at][1] if at >= 0 else 0, offset)
        if batch is None or batch.last_offset != offset:
            problems.not_found.setdefault(name, []).append(
                (offset, -1 if batch is None else batch.last_offset))
        else:
            largest = max((r.timestamp for r in batch.records()), default=-1)
            if largest != timestamp:
                problems.time_mismatches.setdefault(name, []).append((timestamp, largest))
            if previous >= timestamp:
                problems.out_of_order.setdefault(name, []).append((timestamp, previous))
        if not verify_only:
            lines.append(f"timestamp: {timestamp} offset: {offset}")
        previous = timestamp
    return lines


def run(options: Options) -> int:
    require(options, "files")
    parse = (offsets_decoder.parse if options.has("offsets-decoder")
             else txn_log_decoder.parse if options.has("transaction-log-decoder") else _plain)
    # a decoder implies the contents
    contents = options.has("print-data-log") or parse is not _plain
    deep = options.has("deep-iteration") or contents
    verify_only, sanity_only = options.has("verify-index-only"), options.has(
        "index-sanity-check")
    problems = IndexProblems()
    for path in options.get("files").split(","):
        path = path.strip()
        print(f"Dumping {path}")
        try:
            if path.endswith(".log"):
                lines = dump_segment(path, deep, contents, options.get("max-bytes"), parse)
            elif path.endswith((".index", ".timeindex")) and sanity_only:
                lines = [sanity_check(path)]
            elif path.endswith(".timeindex"):
                lines = dump_time_index(path, verify_only, problems)
            elif path.endswith(".index"):
                lines = dump_index(path, verify_only, problems)
            elif path.endswith(".txnindex"):
                lines = dump_txn_index(path)
            else:
                raise ArgumentError(f"Ignoring unknown file {path}")
        except OSError as exc:
            raise ArgumentError(f"{path} ({exc.strerror})") from None
        except CorruptIndexError as exc:
            raise ArgumentError(str(exc)) from None
        except ValueError:
            raise ArgumentError(f"{path} is not named <base offset>.<log|index|timeindex|"
                                "txnindex>") from None
        for line in lines:
            print(line)
    problems.report()
    return 0


TOOL = Tool("dump-log", "This tool helps to parse a log file and dump its contents to the "
            "console, useful for debugging a seemingly corrupt log segment.", OPTIONS, run)
