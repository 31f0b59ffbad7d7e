"""kafka-consumer-groups --reset-offsets and --delete-offsets (Kafka 3.9's
GroupOffsetsResetter and deleteOffsets: the scenarios, the scopes, the CSV format)."""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from datetime import datetime

from moldau.protocol.generated.offset_commit_request import OffsetCommitRequest
from moldau.protocol.generated.offset_delete_request import OffsetDeleteRequest
from moldau.tools.admin import Admin, list_offsets, partition_leaders
from moldau.tools.group_queries import Group, committed_offsets, group_ids
from moldau.tools.kafka_errors import check, error_text
from moldau.tools.options import Options
from moldau.tools.runner import ArgumentError

SCENARIOS = ("to-offset", "to-datetime", "by-duration", "to-earliest", "to-latest",
             "shift-by", "from-file", "to-current")
LATEST, EARLIEST = -1, -2
TP = tuple[str, int]
_DURATION = re.compile(r"P(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+(?:\.\d+)?)S)?)?")


def parse_topics(specs: list[str]) -> list[tuple[str, list[int] | None]]:
    """--topic values: "t" (every partition) or "t:0,1,2"."""
    out = []
    for spec in specs:
        topic, sep, parts = spec.partition(":")
        try:
            out.append((topic, [int(p) for p in parts.split(",")] if sep else None))
        except ValueError:
            raise ArgumentError(f"Invalid partition list in --topic {spec}") from None
    return out


def scope(admin: Admin, options: Options, committed: dict[TP, int]) -> list[TP]:
    if options.has("all-topics"):
        return sorted(committed)
    wanted = parse_topics(options.all("topic"))
    leaders = partition_leaders(admin, [t for t, _ in wanted])
    result = []
    for topic, partitions in wanted:
        known = sorted(p for t, p in leaders if t == topic)
        if not known:
            raise ArgumentError(f"Error: Topic {topic} does not exist.")
        result += [(topic, p) for p in (known if partitions is None else partitions)]
    return sorted(set(result))


def parse_datetime(text: str) -> int:
    """'YYYY-MM-DDTHH:mm:SS.sss' with an optional zone (local time without one), in ms."""
    try:
        value = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise ArgumentError(f"Error parsing timestamp. It does not match the expected "
                            f"format: yyyy-MM-dd'T'HH:mm:ss.SSS ({text})") from None
    return int(value.timestamp() * 1000)


def parse_duration(text: str) -> int:
    match = _DURATION.fullmatch(text.strip().upper())
    if not match or text.strip().upper() in ("P", "PT"):
        raise ArgumentError(f"Text cannot be parsed to a Duration: {text}")
    days, hours, minutes, seconds = (float(g) if g else 0.0 for g in match.groups())
    return int(((days * 24 + hours) * 60 + minutes) * 60_000 + seconds * 1000)


def read_csv(path: str) -> dict[str, dict[TP, int]]:
    """--from-file: "topic,partition,offset" or "group,topic,partition,offset" lines."""
    try:
        with open(path, encoding="utf-8") as fh:
            lines = [line.strip() for line in fh if line.strip()]
    except OSError as exc:
        raise ArgumentError(f"{path} ({exc.strerror})") from None
    result: dict[str, dict[TP, int]] = {}
    for line in lines:
        cells = [c.strip() for c in line.split(",")]
        try:
            if len(cells) == 3:
                result.setdefault("", {})[(cells[0], int(cells[1]))] = int(cells[2])
            elif len(cells) == 4:
                result.setdefault(cells[0], {})[(cells[1], int(cells[2]))] = int(cells[3])
            else:
                raise ValueError
        except ValueError:
            raise ArgumentError(f"Error: Bad line in {path}: {line}") from None
    return result


def _clamped(admin: Admin, wanted: dict[TP, int]) -> dict[TP, int]:
    """Offsets kept inside [earliest, latest], as Kafka's checkOffsetsRange does."""
    if not wanted:
        return {}
    low = list_offsets(admin, list(wanted), EARLIEST)
    high = list_offsets(admin, list(wanted), LATEST)
    return {tp: min(max(offset, low[tp]), high[tp]) for tp, offset in wanted.items()}


def new_offsets(admin: Admin, options: Options, partitions: list[TP],
                committed: dict[TP, int], from_file: dict[TP, int] | None) -> dict[TP, int]:
    if from_file is not None:
        return _clamped(admin, from_file)
    if options.has("to-earliest"):
        return list_offsets(admin, partitions, EARLIEST)
    if options.has("to-latest"):
        return list_offsets(admin, partitions, LATEST)
    if options.has("to-offset"):
        return _clamped(admin, {tp: options.get("to-offset") for tp in partitions})
    if options.has("shift-by"):
        missing = [tp for tp in partitions if tp not in committed]
        if missing:
            tp = missing[0]
            raise ArgumentError(f"Cannot shift offset for partition {tp[0]}-{tp[1]} since "
                                "there is no current committed offset")
        return _clamped(admin, {tp: committed[tp] + options.get("shift-by")
                                for tp in partitions})
    if options.has("to-current"):
        latest = list_offsets(admin, [tp for tp in partitions if tp not in committed], LATEST)
        return {tp: committed.get(tp, latest.get(tp, 0)) for tp in partitions}
    if options.has("to-datetime"):
        stamp = parse_datetime(options.get("to-datetime"))
    else:
        stamp = int(time.time() * 1000) - parse_duration(options.get("by-duration"))
    found = list_offsets(admin, partitions, stamp)
    latest = list_offsets(admin, partitions, LATEST)
    return {tp: found[tp] if found[tp] >= 0 else latest[tp] for tp in partitions}


def commit(admin: Admin, group: str, coordinator: int, offsets: dict[TP, int]) -> None:
    topics: dict[str, list[OffsetCommitRequest.OffsetCommitRequestPartition]] = {}
    for (topic, partition), offset in sorted(offsets.items()):
        topics.setdefault(topic, []).append(OffsetCommitRequest.OffsetCommitRequestPartition(
            partition_index=partition, committed_offset=offset, committed_leader_epoch=-1,
            committed_metadata=""))
    answer = admin.call("OffsetCommit", 8, coordinator, group_id=group,
                        generation_id_or_member_epoch=-1, member_id="", group_instance_id=None,
                        topics=[OffsetCommitRequest.OffsetCommitRequestTopic(name=t, partitions=ps)
                                for t, ps in topics.items()])
    for t in answer.topics:
        for p in t.partitions:
            check(p.error_code)


def reset_offsets(admin: Admin, options: Options,
                  describe_group: Callable[[Admin, str], Group]) -> int:
    if not options.has("dry-run") and not options.has("execute"):
        import sys

        print("WARN: No action will be performed as the --execute option is missing.In a "
              "future major release, the default behavior of this command will be to prompt "
              "the user before executing the reset rather than doing a dry run. You should "
              "add the --dry-run option explicitly if you are scripting this command and want "
              "to keep the current default behavior without prompting.", file=sys.stderr)
    files = read_csv(options.get("from-file")) if options.has("from-file") else None
    results: dict[str, dict[TP, int]] = {}
    for group_id in group_ids(admin, options):
        group = describe_group(admin, group_id)
        if group.state not in ("Empty", "Dead"):
            raise ArgumentError(f"Error: Assignments can only be reset if the group "
                                f"'{group_id}' is inactive, but the current state is "
                                f"{group.state}.")
        committed = committed_offsets(admin, group_id, group.coordinator)
        from_file = None
        if files is not None:
            from_file = files.get(group_id, files.get("", {}))
        partitions = sorted(from_file) if from_file is not None else scope(
            admin, options, committed)
        offsets = new_offsets(admin, options, partitions, committed, from_file)
        if options.has("execute"):
            commit(admin, group_id, group.coordinator, offsets)
        results[group_id] = offsets
    if options.has("export"):
        several = len(results) > 1
        for group_id, offsets in results.items():
            for (topic, partition), offset in sorted(offsets.items()):
                print(",".join(([group_id] if several else [])
                               + [topic, str(partition), str(offset)]))
        return 0
    fmt = "{:<30} {:<30} {:<10} {:<15}"
    if results:
        print("\n" + fmt.format("GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"))
    for group_id, offsets in results.items():
        for (topic, partition), offset in sorted(offsets.items()):
            print(fmt.format(group_id, topic, partition, offset))
    print()
    return 0


def delete_offsets(admin: Admin, options: Options) -> int:
    group = options.get("group")
    wanted = parse_topics(options.all("topic"))
    leaders = partition_leaders(admin, [t for t, _ in wanted])
    requested: list[TP] = []
    for topic, partitions in wanted:
        known = sorted(p for t, p in leaders if t == topic)
        requested += [(topic, p) for p in (partitions if partitions is not None else known)]
    coordinator = admin.find_coordinator(group)
    topics: dict[str, list[OffsetDeleteRequest.OffsetDeleteRequestPartition]] = {}
    for topic, partition in requested:
        topics.setdefault(topic, []).append(
            OffsetDeleteRequest.OffsetDeleteRequestPartition(partition_index=partition))
    answer = admin.call("OffsetDelete", 0, coordinator, group_id=group, topics=[
        OffsetDeleteRequest.OffsetDeleteRequestTopic(name=t, partitions=ps)
        for t, ps in topics.items()])
    code = answer.error_code
    results = {(t.name, p.partition_index): p.error_code
               for t in answer.topics for p in t.partitions}
    unknown = [(t, -1) for t, _ in wanted if not any(k[0] == t for k in leaders)]
    partition_error = any(results.values()) or unknown
    top = {0: None, 24: f"'{group}' is not valid.", 69: f"'{group}' does not exist.",
           30: f"Access to '{group}' is not authorized.",
           68: f"Deleting offsets of a consumer group '{group}' is forbidden if the group "
               "is not empty."}
    if top.get(code):
        raise ArgumentError(f"Error: {top[code]}")
    if code or partition_error:
        print("\nError: Encounter some partition level error, see the follow-up details:")
    else:
        print(f"Request succeed for deleting offsets with topic "
              f"{', '.join(t for t, _ in wanted)} group {group}")
    fmt = "\n{:<30} {:<15} {:<15}"
    out = fmt.format("TOPIC", "PARTITION", "STATUS")
    for (topic, partition), error in [*sorted(results.items()), *((u, 3) for u in unknown)]:
        status = f"Error: :{error_text(error)}" if error else "Successful"
        out += fmt.format(topic, partition if partition >= 0 else "Not Provided", status)
    print(out)
    return 1 if code or partition_error else 0
