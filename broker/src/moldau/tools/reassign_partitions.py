"""kafka-reassign-partitions: --generate, --execute (with --throttle), --verify (clears
the throttles when done), --cancel and --list, through AlterPartitionReassignments,
ListPartitionReassignments and IncrementalAlterConfigs (Kafka 3.9's
ReassignPartitionsCommand)."""

from __future__ import annotations

from moldau.cluster.assignment import assign_replicas
from moldau.errors import KafkaError
from moldau.protocol.generated.alter_partition_reassignments_request import (
    AlterPartitionReassignmentsRequest as Alter,
)
from moldau.protocol.generated.incremental_alter_configs_request import (
    IncrementalAlterConfigsRequest as Configs,
)
from moldau.protocol.generated.list_partition_reassignments_response import (
    ListPartitionReassignmentsResponse,
)
from moldau.tools.admin import Admin
from moldau.tools.broker_hosts import broker_hosts, warn_shared
from moldau.tools.common import admin_from, bootstrap_opts
from moldau.tools.kafka_errors import ADMIN_FAILED, check, error_text
from moldau.tools.options import (
    LONG,
    Opt,
    Options,
    ToolError,
    UsageError,
    exactly_one,
    require,
)
from moldau.tools.reassignment_json import (
    TP,
    format_plan,
    parse_log_dirs,
    parse_plan,
    parse_topics,
    read_file,
)
from moldau.tools.replica_moves import MoveFailed, execute_moves, move_states
from moldau.tools.runner import ArgumentError, Tool

# a partition's reassignment in progress, as the controller lists it
Moving = ListPartitionReassignmentsResponse.OngoingPartitionReassignment

ACTIONS = ("generate", "execute", "verify", "cancel", "list")
TOPIC, BROKER = 2, 4
SET, DELETE = 0, 1
BROKER_THROTTLES = ("leader.replication.throttled.rate", "follower.replication.throttled.rate",
                    "replica.alter.log.dirs.io.max.bytes.per.second")
TOPIC_THROTTLES = ("leader.replication.throttled.replicas",
                   "follower.replication.throttled.replicas")
VERIFY_WARNING = ("Warning: You must run --verify periodically, until the reassignment "
                  "completes, to ensure the throttle is removed.")
EXISTING = ("Cannot execute because there is an existing partition assignment.  Use "
            "--additional to override this and create a new partition assignment in addition "
            "to the existing one. The --additional flag can also be used to change the "
            "throttle by resubmitting the current reassignment.")

OPTIONS = [
    *bootstrap_opts("Admin Client", "REQUIRED: the server(s) to use for bootstrapping.",
                    "Server(s) to use for bootstrapping", "Admin client property file"),
    Opt("generate", "Generate a candidate partition reassignment configuration. Note that "
        "this only generates a candidate assignment, it does not execute it."),
    Opt("execute", "Kick off the reassignment as specified by the --reassignment-json-file "
        "option."),
    Opt("verify", "Verify if the reassignment completed as specified by the "
        "--reassignment-json-file option. If there is a throttle engaged for the replicas "
        "specified, and the rebalance has completed, the throttle will be removed"),
    Opt("cancel", "Cancel an active reassignment."),
    Opt("list", "List all active partition reassignments."),
    Opt("reassignment-json-file", "The JSON file with the partition reassignment "
        'configurationThe format to use is -\n{"partitions":\n\t[{"topic": "foo",\n\t  '
        '"partition": 1,\n\t  "replicas": [1,2,3],\n\t  "log_dirs": ["dir1","dir2","dir3"] '
        '}],\n"version":1\n}\nNote that "log_dirs" is optional. When it is specified, its length '
        'must equal the length of the replicas list. The value in this list can be either "any" '
        "or the absolution path of the log directory on the broker. If absolute log directory "
        "path is specified, the replica will be moved to the specified log directory on the "
        "broker.", "manual assignment json file path"),
    Opt("topics-to-move-json-file", "Generate a reassignment configuration to move the "
        "partitions of the specified topics to the list of brokers specified by the "
        '--broker-list option. The format to use is -\n{"topics":\n\t[{"topic": "foo"},{"topic": '
        '"foo1"}],\n"version":1\n}', "topics to reassign json file path"),
    Opt("broker-list", "The list of brokers to which the partitions need to be reassigned in "
        "the form \"0,1,2\". This is required if --topics-to-move-json-file is used to "
        "generate reassignment configuration", "brokerlist"),
    Opt("disable-rack-aware", "Disable rack aware replica assignment"),
    Opt("throttle", "The movement of partitions between brokers will be throttled to this value "
        "(bytes/sec). This option can be included with --execute when a reassignment is started, "
        "and it can be altered by resubmitting the current reassignment along with the "
        "--additional flag. The throttle rate should be at least 1 KB/s.", "throttle", LONG, -1),
    Opt("replica-alter-log-dirs-throttle", "The movement of replicas between log directories on "
        "the same broker will be throttled to this value (bytes/sec). This option can be "
        "included with --execute when a reassignment is started, and it can be altered by "
        "resubmitting the current reassignment along with the --additional flag. The throttle "
        "rate should be at least 1 KB/s.", "replicaAlterLogDirsThrottle", LONG, -1),
    Opt("timeout", "The maximum time in ms to wait for log directory replica assignment to "
        "begin.", "timeout", LONG, 10000),
    Opt("additional", "Execute this reassignment in addition to any other ongoing "
        "ones. This option can also be used to change the throttle of an ongoing "
        "reassignment."),
    Opt("preserve-throttles", "Do not modify broker or topic throttles."),
]


UNKNOWN_PARTITION = "org.apache.kafka.common.errors.UnknownTopicOrPartitionException"


class CommandFailure(ToolError):
    """A failure Kafka 3.9's ReassignPartitionsCommand reports on stdout: `Error: ` and the
    message, the Java exception (whose stack frames Moldau has none of), an empty line;
    exit 1. `exception` is its class; a broker's error (`cause`) comes wrapped in the
    AdminClient's ExecutionException."""

    def __init__(self, message: str, exception: str = ADMIN_FAILED,
                 cause: str | None = None) -> None:
        super().__init__(f"{cause}: {message}" if cause else message)
        self.java = (f"java.util.concurrent.ExecutionException: {self}\nCaused by: {self}"
                     if cause else f"{exception}: {self}")


def _print_failure(error: ToolError) -> int:
    java = (error.java if isinstance(error, (CommandFailure, MoveFailed))
            else f"{ADMIN_FAILED}: {error}")
    print(f"Error: {error}\n{java}\n", flush=True)
    return 1


def _tp(tp: TP) -> str:
    return f"{tp[0]}-{tp[1]}"


def current_assignment(admin: Admin, topics: list[str]) -> dict[TP, list[int]]:
    answer = admin.metadata(sorted(set(topics)))
    found = {}
    for t in answer.topics:
        if t.error_code == 3:
            raise CommandFailure(f"Topic {t.name} not found.", cause=UNKNOWN_PARTITION)
        check(t.error_code)
        for p in t.partitions:
            found[(t.name, p.partition_index)] = list(p.replica_nodes)
    return found


def ongoing(admin: Admin) -> dict[TP, Moving]:
    answer = admin.to_controller("ListPartitionReassignments", 0,
                                 timeout_ms=int(admin.timeout * 1000), topics=None)
    check(answer.error_code, answer.error_message)
    return {(t.name, p.partition_index): p for t in answer.topics for p in t.partitions}


def alter(admin: Admin, targets: dict[TP, list[int] | None]) -> dict[TP, str]:
    """AlterPartitionReassignments (None cancels): the errors by partition."""
    topics: dict[str, list[Alter.ReassignablePartition]] = {}
    for (topic, partition), replicas in sorted(targets.items()):
        topics.setdefault(topic, []).append(
            Alter.ReassignablePartition(partition_index=partition, replicas=replicas))
    answer = admin.to_controller("AlterPartitionReassignments", 0,
                                 timeout_ms=int(admin.timeout * 1000),
                                 topics=[Alter.ReassignableTopic(name=t, partitions=ps)
                                         for t, ps in topics.items()])
    check(answer.error_code, answer.error_message)
    return {(t.name, p.partition_index): error_text(p.error_code, p.error_message)
            for t in answer.responses for p in t.partitions if p.error_code}


def alter_configs(admin: Admin,
                  resources: list[tuple[int, str, list[Configs.AlterableConfig]]]) -> None:
    """IncrementalAlterConfigs of each (resource type, name, operations)."""
    for kind, name, ops in resources:
        node = int(name) if kind == BROKER else None
        answer = admin.call("IncrementalAlterConfigs", 1, node, validate_only=False,
                            resources=[Configs.AlterConfigsResource(
                                resource_type=kind, resource_name=name, configs=ops)])
        for result in answer.responses:
            check(result.error_code, result.error_message)


def set_throttles(admin: Admin, moving: dict[TP, tuple[set[int], set[int]]],
                  rate: int) -> None:
    """Kafka's modifyReassignmentThrottle: leader throttles on the sources, follower
    throttles on the new replicas, the rate on every broker involved."""
    leaders: dict[str, set[str]] = {}
    followers: dict[str, set[str]] = {}
    brokers: set[int] = set()
    for (topic, partition), (sources, destinations) in moving.items():
        leaders.setdefault(topic, set()).update(f"{partition}:{b}" for b in sources)
        followers.setdefault(topic, set()).update(
            f"{partition}:{b}" for b in destinations - sources)
        brokers |= sources | destinations
    alter_configs(admin, [(TOPIC, topic, [
        Configs.AlterableConfig(name=TOPIC_THROTTLES[0], config_operation=SET,
                                value=",".join(sorted(leaders[topic]))),
        Configs.AlterableConfig(name=TOPIC_THROTTLES[1], config_operation=SET,
                                value=",".join(sorted(followers.get(topic, set()))))])
        for topic in sorted(leaders)])
    alter_configs(admin, [(BROKER, str(b), [
        Configs.AlterableConfig(name=name, config_operation=SET, value=str(rate))
        for name in BROKER_THROTTLES[:2]]) for b in sorted(brokers)])
    print(f"The inter-broker throttle limit was set to {rate} B/s")


def clear_throttles(admin: Admin, plan: dict[TP, list[int]]) -> None:
    brokers = {b.node_id for b in admin.metadata([]).brokers}
    for replicas in plan.values():
        brokers.update(replicas)
    live = {b.node_id for b in admin.metadata([]).brokers}
    print(f"Clearing broker-level throttles on broker{'' if len(brokers) == 1 else 's'} "
          + ",".join(map(str, sorted(brokers))))
    alter_configs(admin, [(BROKER, str(b), [
        Configs.AlterableConfig(name=name, config_operation=DELETE, value=None)
        for name in BROKER_THROTTLES]) for b in sorted(brokers & live)])
    topics = sorted({t for t, _ in plan})
    print(f"Clearing topic-level throttles on topic{'' if len(topics) == 1 else 's'} "
          + ",".join(topics))
    alter_configs(admin, [(TOPIC, t, [
        Configs.AlterableConfig(name=name, config_operation=DELETE, value=None)
        for name in TOPIC_THROTTLES]) for t in topics])


def generate(admin: Admin, options: Options) -> int:
    require(options, "topics-to-move-json-file", "broker-list")
    topics = parse_topics(read_file(options.get("topics-to-move-json-file")))
    try:
        brokers = [int(b) for b in options.get("broker-list").split(",")]
    except ValueError:
        raise ToolError(f"Invalid broker list: {options.get('broker-list')}") from None
    repeated = sorted({b for b in brokers if brokers.count(b) > 1})
    if repeated:
        raise ToolError(f"Broker list contains duplicate entries: {repeated}")
    current = current_assignment(admin, topics)
    racks = {b.node_id: b.rack for b in admin.metadata([]).brokers}
    # Moldau: the brokers' hosts too (moldau.broker.host), which --disable-rack-aware keeps
    hosts = broker_hosts(admin, [b for b in brokers if b in racks])
    metas = [(b, None if options.has("disable-rack-aware") else racks.get(b), hosts.get(b))
             for b in brokers if b in racks]
    proposed: dict[TP, list[int]] = {}
    for topic in sorted({t for t, _ in current}):
        count = sum(1 for t, _ in current if t == topic)
        factor = len(current[(topic, 0)])
        try:
            placed = assign_replicas(metas, count, factor)
        except (KafkaError, ValueError) as exc:
            raise ToolError(str(exc)) from None
        warn_shared(topic, placed, hosts)  # only when the factor exceeds the hosts
        for partition, replicas in placed.items():
            proposed[(topic, partition)] = replicas
    print(f"Current partition replica assignment\n{format_plan(current)}\n")
    print(f"Proposed partition reassignment configuration\n{format_plan(proposed)}")
    return 0


def execute(admin: Admin, options: Options) -> int:
    plan = parse_plan(read_file(options.get("reassignment-json-file")))
    running = ongoing(admin)
    if running and not options.has("additional"):
        raise ArgumentError(EXISTING)
    live = {b.node_id for b in admin.metadata([]).brokers}
    unknown = sorted({b for rs in plan.values() for b in rs} - live)
    if unknown:
        raise ToolError(f"Unknown broker id {unknown[0]}")
    current = current_assignment(admin, [t for t, _ in plan])
    missing = [tp for tp in plan if tp not in current]
    if missing:
        raise CommandFailure("Unable to find partition: " + ", ".join(map(_tp, missing)),
                             cause=UNKNOWN_PARTITION)
    # Moldau: the plan runs as written, as in Kafka; two replicas on one host get a warning
    hosts = broker_hosts(admin, {b for rs in plan.values() for b in rs})
    for (topic, partition), replicas in sorted(plan.items()):
        warn_shared(topic, {partition: replicas}, hosts)
    print("Current partition replica assignment\n\n"
          + format_plan({tp: current[tp] for tp in plan})
          + "\n\nSave this to use as the --reassignment-json-file option during rollback")
    rate = options.get("throttle")
    if rate >= 0:
        print(VERIFY_WARNING)
        moving = {}
        for tp, replicas in plan.items():
            move = running.get(tp)
            sources = (set(move.replicas) - set(move.adding_replicas) if move
                       else set(current[tp]))
            moving[tp] = (sources, set(replicas) - sources)
        set_throttles(admin, moving, rate)
    errors = alter(admin, dict(plan))
    if errors:
        raise ArgumentError("Error reassigning partition(s):\n" + "\n".join(
            f"{_tp(tp)}: {message}" for tp, message in sorted(errors.items())))
    names = ",".join(_tp(tp) for tp in sorted(plan))
    print(f"Successfully started partition reassignment{'' if len(plan) == 1 else 's'} "
          f"for {names}")
    moves = parse_log_dirs(read_file(options.get("reassignment-json-file")))
    if moves:  # log_dirs other than "any": AlterReplicaLogDirs (replica_moves.py)
        execute_moves(admin, moves, options.get("timeout"))
    return 0


def verify(admin: Admin, options: Options) -> int:
    plan = parse_plan(read_file(options.get("reassignment-json-file")))
    running = ongoing(admin)
    current = current_assignment(admin, [t for t, _ in plan])
    lines = ["Status of partition reassignment:"]
    for tp in sorted(plan):
        if tp in running:
            lines.append(f"Reassignment of partition {_tp(tp)} is still in progress.")
        elif current.get(tp, []) == plan[tp]:
            lines.append(f"Reassignment of partition {_tp(tp)} is completed.")
        else:
            lines.append(f"There is no active reassignment of partition {_tp(tp)}, but "
                         f"replica set is {','.join(map(str, current.get(tp, [])))} rather "
                         f"than {','.join(map(str, plan[tp]))}.")
    print("\n".join(lines))
    moves_text, moving = move_states(
        admin, parse_log_dirs(read_file(options.get("reassignment-json-file"))))
    print(moves_text)  # the log dir moves (an empty line without any)
    if not running and not moving and not options.has("preserve-throttles"):
        clear_throttles(admin, plan)
    return 0


def cancel(admin: Admin, options: Options) -> int:
    plan = parse_plan(read_file(options.get("reassignment-json-file")))
    running = ongoing(admin)
    active = sorted(tp for tp, move in running.items()
                    if tp in plan and (not move.adding_replicas or move.removing_replicas))
    if active:
        errors = alter(admin, dict.fromkeys(active))
        if errors:
            raise ArgumentError(
                f"Error cancelling partition reassignment{'' if len(errors) == 1 else 's'} "
                "for:\n" + "\n".join(f"{_tp(tp)}: {m}" for tp, m in sorted(errors.items())))
        print(f"Successfully cancelled partition reassignment{'' if len(active) == 1 else 's'}"
              f" for: {','.join(map(_tp, active))}")
    else:
        print("None of the specified partition reassignments are active.")
    print("None of the specified partition moves are active.",
          end="" if not options.has("preserve-throttles") else "\n")
    if not options.has("preserve-throttles"):
        clear_throttles(admin, plan)
    return 0


def list_reassignments(admin: Admin, options: Options) -> int:
    running = ongoing(admin)
    if not running:
        print("No partition reassignments found.")
        return 0
    print("Current partition reassignments:")
    for tp in sorted(running):
        move = running[tp]
        line = f"{_tp(tp)}: replicas: {','.join(map(str, move.replicas))}."
        if move.adding_replicas:
            line += f" adding: {','.join(map(str, move.adding_replicas))}."
        if move.removing_replicas:
            line += f" removing: {','.join(map(str, move.removing_replicas))}."
        print(line)
    return 0


def run(options: Options) -> int:
    action = exactly_one(options, ACTIONS, "Command must include exactly one action: "
                         "--generate, --execute, --verify, --cancel, --list")
    require(options, "bootstrap-server")
    if action in ("execute", "verify", "cancel"):
        require(options, "reassignment-json-file")
    with admin_from(options) as admin:  # an unreachable server: one line on stderr
        try:
            return {"generate": generate, "execute": execute, "verify": verify,
                    "cancel": cancel, "list": list_reassignments}[action](admin, options)
        except (UsageError, ArgumentError):
            raise
        except ToolError as exc:
            return _print_failure(exc)


TOOL = Tool("reassign-partitions", "This tool helps to move topic partitions between "
            "replicas.", OPTIONS, run, "Error: ")
