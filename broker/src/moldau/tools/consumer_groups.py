"""kafka-consumer-groups: list, describe (offsets with LAG, members, state), delete,
delete-offsets and reset-offsets of classic consumer groups (Kafka 3.9's
ConsumerGroupCommand flags and table formats)."""

from __future__ import annotations

import sys

from moldau.tools import group_offsets
from moldau.tools.admin import Admin, list_offsets
from moldau.tools.common import admin_from, bootstrap_opts
from moldau.tools.group_queries import (
    Group,
    Member,
    committed_offsets,
    describe_group,
    group_ids,
    list_group_ids,
)
from moldau.tools.kafka_errors import error_text, exception_class
from moldau.tools.options import (
    LONG,
    Opt,
    Options,
    UsageError,
    exactly_one,
    forbid,
    require,
)
from moldau.tools.runner import ArgumentError, Tool

MISSING = "-"
LATEST, EARLIEST = -1, -2
ACTIONS = ("list", "describe", "delete", "reset-offsets", "delete-offsets")

OPTIONS = [
    *bootstrap_opts("Admin Client and Consumer", "REQUIRED: The server(s) to connect to."),
    Opt("group", "The consumer group we wish to act on.", "consumer group"),
    Opt("topic", "The topic whose consumer group information should be deleted or topic "
        "whose should be included in the reset offset process. In `reset-offsets` case, "
        "partitions can be specified using this format: `topic1:0,1,2`, where 0,1,2 are the "
        "partition to be included in the process. Reset-offsets also supports multiple topic "
        "inputs.", "topic"),
    Opt("all-topics", "Consider all topics assigned to a group in the `reset-offsets` "
        "process."),
    Opt("list", "List all consumer groups."),
    Opt("describe", "Describe consumer group and list offset lag (number of messages not "
        "yet processed) related to given group."),
    Opt("all-groups", "Apply to all consumer groups."),
    Opt("delete", "Pass in groups to delete topic partition offsets and ownership "
        "information over the entire consumer group. For instance --group g1 --group g2"),
    Opt("timeout", "The timeout that can be set for some use cases. For example, it can be "
        "used when describing the group to specify the maximum amount of time in "
        "milliseconds to wait before the group stabilizes (when the group is just created, "
        "or is going through some changes).", "timeout (ms)", LONG, 5000),
    Opt("reset-offsets", "Reset offsets of consumer group. Supports one consumer group at the "
        "time, and instances should be inactive\nHas 2 execution options: --dry-run (the "
        "default) to plan which offsets to reset, and --execute to update the offsets. "
        "Additionally, the --export option is used to export the results to a CSV format.\nYou "
        "must choose one of the following reset specifications: --to-datetime, --by-duration, "
        "--to-earliest, --to-latest, --shift-by, --from-file, --to-current, --to-offset.\nTo "
        "define the scope use --all-topics or --topic. One scope must be specified unless you "
        "use '--from-file'."),
    Opt("dry-run", "Only show results without executing changes on Consumer Groups. "
        "Supported operations: reset-offsets."),
    Opt("execute", "Execute operation. Supported operations: reset-offsets."),
    Opt("export", "Export operation execution to a CSV file. Supported operations: "
        "reset-offsets."),
    Opt("to-offset", "Reset offsets to a specific offset.", "offset", LONG),
    Opt("from-file", "Reset offsets to values defined in CSV file.", "path to CSV file"),
    Opt("to-datetime", "Reset offsets to offset from datetime. Format: "
        "'YYYY-MM-DDTHH:mm:SS.sss'", "datetime"),
    Opt("by-duration", "Reset offsets to offset by duration from current timestamp. Format: "
        "'PnDTnHnMnS'", "duration"),
    Opt("to-earliest", "Reset offsets to earliest offset."),
    Opt("to-latest", "Reset offsets to latest offset."),
    Opt("to-current", "Reset offsets to current offset."),
    Opt("shift-by", "Reset offsets shifting current offset by 'n', where 'n' can be "
        "positive or negative.", "number-of-offsets", LONG),
    Opt("members", "Describe members of the group. This option may be used with '--describe' and "
        "'--bootstrap-server' options only.\nExample: --bootstrap-server localhost:9092 "
        "--describe --group group1 --members"),
    Opt("verbose", "Provide additional information, if any, when describing the group. This "
        "option may be used with '--offsets'/'--members'/'--state' and '--bootstrap-server' "
        "options only.\nExample: --bootstrap-server localhost:9092 --describe --group group1 "
        "--members --verbose"),
    Opt("offsets", "Describe the group and list all topic partitions in the group along with "
        "their offset lag. This is the default sub-action of and may be used with '--describe' "
        "and '--bootstrap-server' options only.\nExample: --bootstrap-server localhost:9092 "
        "--describe --group group1 --offsets"),
    Opt("state", "When specified with '--describe', includes the state of the group.\nExample: "
        "--bootstrap-server localhost:9092 --describe --group group1 --state\nWhen specified "
        "with '--list', it displays the state of all groups. It can also be used to list groups "
        "with specific states.\nExample: --bootstrap-server localhost:9092 --list --state "
        "stable,empty\nThis option may be used with '--describe', '--list' and "
        "'--bootstrap-server' options only.", "", optional=True),
    Opt("delete-offsets", "Delete offsets of consumer group. Supports one consumer group at "
        "the time, and multiple topics."),
]


def check_args(options: Options) -> str:
    action = [exactly_one(options, ACTIONS, "Command must include exactly one action: "
                          "--list, --describe, --delete, --reset-offsets, --delete-offsets")]
    require(options, "bootstrap-server")
    groups = options.has("group") or options.has("all-groups")
    if action[0] in ("describe", "delete", "reset-offsets") and not groups:
        raise UsageError(f"Option [{action[0]}] takes one of these options: [all-groups], "
                         "[group]")
    if action[0] == "delete-offsets":
        require(options, "group")
        if not options.has("topic"):
            raise UsageError("Option [delete-offsets] takes the following options: "
                             "[topic], [group]")
    forbid(options, "members", "offsets", "state")
    if action[0] == "reset-offsets":
        if options.has("dry-run") and options.has("execute"):
            raise UsageError("Option [reset-offsets] only accepts one of [execute] and "
                             "[dry-run]")
        scenarios = [s for s in group_offsets.SCENARIOS if options.has(s)]
        if len(scenarios) != 1:
            raise UsageError("Option [reset-offsets] takes exactly one of these options: "
                             + ", ".join(f"[{s}]" for s in group_offsets.SCENARIOS))
        if not options.has("from-file") and not (
                options.has("topic") or options.has("all-topics")):
            raise UsageError("Option [reset-offsets] takes one of these options: "
                             "[all-topics], [topic]")
    return action[0]


# describe ------------------------------------------------------------------------------


def _table(rows: list[list[str]], widths: list[int]) -> list[str]:
    """Java's printf "%-Ns" columns: every column but the last padded to its width."""
    return [" ".join(f"{v:<{w}}" for v, w in zip(row[:-1], widths, strict=True)) + " " + row[-1]
            for row in rows]


def offset_rows(admin: Admin, group: Group) -> list[list[str]]:
    committed = committed_offsets(admin, group.group_id, group.coordinator)
    assigned: list[tuple[tuple[str, int], Member | None]] = []
    members = sorted(group.members, key=lambda m: -len(m.assignment))
    for member in members:
        assigned += [(tp, member) for tp in sorted(member.assignment)]
    owned = {tp for tp, _ in assigned}
    assigned += [(tp, None) for tp in sorted(committed) if tp not in owned]
    ends = list_offsets(admin, [tp for tp, _ in assigned], LATEST) if assigned else {}
    rows = []
    for tp, owner in assigned:
        offset = committed.get(tp)
        end = ends.get(tp)
        lag = str(end - offset) if offset is not None and end is not None else MISSING
        rows.append([group.group_id, tp[0], str(tp[1]), _or(offset), _or(end), lag,
                     owner.member_id if owner else MISSING,
                     owner.host if owner else MISSING,
                     owner.client_id if owner else MISSING])
    for member in members:  # members without partitions still show up
        if not member.assignment:
            rows.append([group.group_id, MISSING, MISSING, MISSING, MISSING, MISSING,
                         member.member_id, member.host, member.client_id])
    return rows


def _or(value: int | None) -> str:
    return MISSING if value is None else str(value)


def _state_ok(group: Group, rows: int) -> bool:
    """Kafka's shouldPrintMemberState: False when there is nothing to print. A group that
    does not exist (Dead) is Kafka's printError, on stdout, and the command still exits 0;
    the notices of an empty or rebalancing group go to stderr."""
    if group.state == "Dead":
        print(f"\nError: Consumer group '{group.group_id}' does not exist.")
        return False
    if group.state == "Empty":
        _err(f"\nConsumer group '{group.group_id}' has no active members.")
    elif group.state in ("PreparingRebalance", "CompletingRebalance"):
        _err(f"\nWarning: Consumer group '{group.group_id}' is rebalancing.")
    return bool(rows)


def _err(text: str) -> None:
    print(text, file=sys.stderr)


def print_offsets(admin: Admin, group: Group) -> None:
    rows = offset_rows(admin, group)
    if not _state_ok(group, len(rows)):
        return
    head = ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG",
            "CONSUMER-ID", "HOST", "CLIENT-ID"]
    widths = [max([15] + [len(r[0]) for r in rows]), max([15] + [len(r[1]) for r in rows]),
              10, 15, 15, 15, max([15] + [len(r[6]) for r in rows]),
              max([15] + [len(r[7]) for r in rows])]
    print("\n" + "\n".join(_table([head, *rows], widths)))


def _assignment_text(assignment: list[tuple[str, int]]) -> str:
    if not assignment:
        return MISSING
    topics: dict[str, list[int]] = {}
    for topic, partition in assignment:
        topics.setdefault(topic, []).append(partition)
    return ", ".join(sorted(f"{t}({','.join(map(str, sorted(ps)))})"
                            for t, ps in topics.items()))


def print_members(group: Group, verbose: bool) -> None:
    # Kafka prints the header even when there is no member to list (or no group)
    _state_ok(group, len(group.members))
    with_instance = any(m.instance_id for m in group.members)
    head = ["GROUP", "CONSUMER-ID", *(["GROUP-INSTANCE-ID"] if with_instance else []),
            "HOST", "CLIENT-ID", "#PARTITIONS"]
    rows = [[group.group_id, m.member_id, *([m.instance_id] if with_instance else []),
             m.host, m.client_id, str(len(m.assignment))] for m in group.members]
    widths = [max([15] + [len(r[i]) for r in rows]) for i in range(len(head) - 1)]
    if with_instance:
        widths[2] = max(17, widths[2])
    lines = []
    for row in [head, *rows]:
        line = " ".join(f"{v:<{w}}" for v, w in zip(row, [*widths, 15], strict=True)) + " "
        lines.append(line)
    if verbose:
        lines[0] += "ASSIGNMENT"
        for n, m in enumerate(group.members, 1):
            lines[n] += _assignment_text(m.assignment)
    print("\n" + "\n".join(lines))


def print_state(admin: Admin, group: Group) -> None:
    if not _state_ok(group, 1):
        return
    host, port = admin.node_address(group.coordinator)
    coordinator = f"{host}:{port}  ({group.coordinator})"
    # Kafka 3.9's widths: the first column takes the coordinator's (at least 25), the
    # coordinator 25, the strategy 20, the state 15; an empty strategy stays empty
    fmt = f"{{:<{max(25, len(coordinator))}}} {{:<25}} {{:<20}} {{:<15}} {{}}"
    print("\n" + fmt.format("GROUP", "COORDINATOR (ID)", "ASSIGNMENT-STRATEGY", "STATE",
                            "#MEMBERS"))
    print(fmt.format(group.group_id, coordinator, group.protocol, group.state,
                     len(group.members)))


def describe(admin: Admin, options: Options) -> int:
    # Kafka collects the groups in a TreeMap: each once, in order of their ids
    for group_id in sorted(set(group_ids(admin, options))):
        group = describe_group(admin, group_id)
        if options.has("members"):
            print_members(group, options.has("verbose"))
        elif options.has("state"):
            print_state(admin, group)
        else:
            print_offsets(admin, group)
    return 0


def list_groups(admin: Admin, options: Options) -> int:
    groups = list_group_ids(admin)
    if not options.has("state"):
        for group_id, _ in groups:
            print(group_id)
        return 0
    wanted = {s.strip().lower() for s in options.get("state").split(",") if s.strip()}
    groups = [(g, s) for g, s in groups if not wanted or s.lower() in wanted]
    width = max([15] + [len(g) for g, _ in groups]) + 10
    print(f"{'GROUP':<{width}} {'STATE':<20}".rstrip())
    for group_id, state in groups:
        print(f"{group_id:<{width}} {state:<20}".rstrip())
    return 0


# delete --------------------------------------------------------------------------------


def delete(admin: Admin, options: Options) -> int:
    failed: dict[str, int] = {}
    done: list[str] = []
    for group_id in group_ids(admin, options):
        coordinator = admin.find_coordinator(group_id)
        answer = admin.call("DeleteGroups", 2, coordinator, groups_names=[group_id])
        code = answer.results[0].error_code
        if code:
            failed[group_id] = code
        else:
            done.append(group_id)
    if not failed:
        print("Deletion of requested consumer groups ('" + "', '".join(done)
              + "') was successful.")
        return 0
    lines = ["Error: Deletion of some consumer groups failed:"]
    for group_id, code in failed.items():
        lines.append(f"* Group '{group_id}' could not be deleted due to: "
                     f"{exception_class(code)}: {error_text(code)}")
    if done:
        lines.append("These consumer groups were deleted successfully: '"
                     + "', '".join(done) + "'")
    raise ArgumentError("\n".join(lines))


def run(options: Options) -> int:
    action = check_args(options)
    with admin_from(options) as admin:
        if action == "list":
            return list_groups(admin, options)
        if action == "describe":
            return describe(admin, options)
        if action == "delete":
            return delete(admin, options)
        if action == "delete-offsets":
            return group_offsets.delete_offsets(admin, options)
        return group_offsets.reset_offsets(admin, options, describe_group)


TOOL = Tool("consumer-groups", "This tool helps to list all consumer groups, describe a "
            "consumer group, delete consumer group info, or reset consumer group offsets.",
            OPTIONS, run, "Error: Executing consumer group command failed due to ")
