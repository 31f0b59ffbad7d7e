"""kafka-dump-log (kafka.tools.DumpLogSegments): the batches of .log segments, and the
entries of .index and .timeindex files, in Kafka's text. Reads the files directly, so it
works on a stopped broker's log directory."""

from __future__ import annotations

import os
import struct

from moldau.protocol.errors import ProtocolError
from moldau.protocol.records import iter_batches
from moldau.tools.options import Opt, Options, UsageError, require
from moldau.tools.runner import ArgumentError, Tool

CODECS = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}
TIME_TYPES = {0: "CreateTime", 1: "LogAppendTime"}
_INDEX_ENTRY = struct.Struct(">ii")
_TIME_ENTRY = struct.Struct(">qi")

OPTIONS = [
    Opt("files", "REQUIRED: The comma separated list of data and index log files to be "
        "dumped.", "String: file1, file2, ..."),
    Opt("print-data-log", "If set, printing the messages content when dumping data logs. "
        "Automatically set if any decoder option is specified."),
    Opt("deep-iteration", "If set, uses deep instead of shallow iteration. Automatically "
        "set if print-data-log is enabled."),
    Opt("verify-index-only", "If set, just verify the index log without printing its "
        "content (not supported yet)."),
    Opt("index-sanity-check", "If set, just checks the index sanity without printing its "
        "content (not supported yet)."),
    Opt("max-bytes", "Limit the amount of total batches read in bytes avoiding reading the "
        "whole .log file(s).", "Integer: size", int, 2**31 - 1),
    Opt("offsets-decoder", "If set, log data will be parsed as offset data from the "
        "__consumer_offsets topic (not supported yet)."),
]


def _text(data: bytes | None) -> str:
    return data.decode("utf-8", "replace") if data is not None else ""


def dump_segment(path: str, deep: bool, contents: bool, max_bytes: int) -> list[str]:
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
            if not (deep or contents) or batch.is_control:
                continue
            for record in batch.records():
                sequence = (batch.base_sequence + record.offset - batch.base_offset
                            if batch.base_sequence >= 0 else -1)
                line = (f"| offset: {record.offset} {TIME_TYPES[batch.timestamp_type]}: "
                        f"{record.timestamp} keySize: "
                        f"{-1 if record.key is None else len(record.key)} valueSize: "
                        f"{-1 if record.value is None else len(record.value)} sequence: "
                        f"{sequence} headerKeys: [{','.join(k for k, _ in record.headers)}]")
                if contents:
                    if record.key is not None:
                        line += f" key: {_text(record.key)}"
                    line += f" payload: {_text(record.value)}"
                lines.append(line)
    except ProtocolError as exc:
        lines.append(f"Found invalid data at position {position}: {exc}")
    return lines


def dump_index(path: str, time_index: bool) -> list[str]:
    with open(path, "rb") as fh:
        data = fh.read()
    base = int(os.path.basename(path).split(".")[0])
    entry = _TIME_ENTRY if time_index else _INDEX_ENTRY
    lines = []
    for at in range(0, len(data) - entry.size + 1, entry.size):
        first, second = entry.unpack_from(data, at)
        if time_index:
            if first == 0 and second == 0 and at:
                break  # preallocated, unused entries
            lines.append(f"timestamp: {first} offset: {base + second}")
        else:
            if first == 0 and second == 0 and at:
                break
            lines.append(f"offset: {base + first} position: {second}")
    return lines


def run(options: Options) -> int:
    require(options, "files")
    if options.has("offsets-decoder"):
        raise UsageError("--offsets-decoder is not supported by Moldau's dump-log yet")
    contents = options.has("print-data-log")
    deep = options.has("deep-iteration") or contents
    for path in options.get("files").split(","):
        path = path.strip()
        print(f"Dumping {path}")
        try:
            if path.endswith(".log"):
                lines = dump_segment(path, deep, contents, options.get("max-bytes"))
            elif path.endswith(".timeindex"):
                lines = dump_index(path, True)
            elif path.endswith(".index"):
                lines = dump_index(path, False)
            else:
                raise ArgumentError(f"Ignoring unknown file {path}")
        except OSError as exc:
            raise ArgumentError(f"{path} ({exc.strerror})") from None
        except ValueError:
            raise ArgumentError(f"{path} is not named <base offset>.<log|index|timeindex>") \
                from None
        for line in lines:
            print(line)
    return 0


TOOL = Tool("dump-log", "This tool helps to parse a log file and dump its contents to the "
            "console, useful for debugging a seemingly corrupt log segment.", OPTIONS, run)
