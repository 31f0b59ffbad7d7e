"""kafka-topics: create, delete, list, describe and alter topics (Kafka 3.9's
TopicCommand flags, checks and output)."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Sized
from dataclasses import dataclass

from moldau.protocol.generated.create_partitions_request import CreatePartitionsRequest
from moldau.protocol.generated.create_topics_request import CreateTopicsRequest
from moldau.protocol.generated.delete_topics_request import DeleteTopicsRequest
from moldau.protocol.generated.describe_configs_request import DescribeConfigsRequest
from moldau.protocol.generated.describe_configs_response import DescribeConfigsResponse
from moldau.protocol.generated.list_partition_reassignments_request import (
    ListPartitionReassignmentsRequest,
)
from moldau.protocol.generated.list_partition_reassignments_response import (
    ListPartitionReassignmentsResponse,
)
from moldau.protocol.generated.metadata_response import MetadataResponse
from moldau.tools import config_names
from moldau.tools.admin import Admin, topic_id_text
from moldau.tools.common import admin_from, bootstrap_opts
from moldau.tools.kafka_errors import KafkaToolError, check
from moldau.tools.options import Opt, Options, UsageError, forbid, require
from moldau.tools.runner import ArgumentError, Tool

INTERNAL_TOPICS = {"__consumer_offsets", "__transaction_state"}
TOPIC_RESOURCE = 2
DEFAULT_SOURCE = 5  # ConfigSource.DEFAULT_CONFIG: the only source Kafka calls "default"
ACTIONS = ("create", "list", "alter", "describe", "delete")
REPORTS = ("under-replicated-partitions", "unavailable-partitions",
           "under-min-isr-partitions", "at-min-isr-partitions")
CONFIGS_TOOL_HINT = " (To alter topic configurations, the kafka-configs tool can be used.)"
COLLISION_WARNING = ("WARNING: Due to limitations in metric names, topics with a period ('.') "
                     "or underscore ('_') could collide. To avoid issues it is best to use "
                     "either, but not both.")

OPTIONS = [
    *bootstrap_opts("Admin Client. This is used only with --bootstrap-server option for "
                    "describing and altering broker configs"),
    Opt("list", "List all available topics."),
    Opt("create", "Create a new topic."),
    Opt("delete", 'Delete a topic'),
    Opt("alter", "Alter the number of partitions and replica assignment. Update the "
        "configuration of an existing topic via --alter is no longer supported here "
        "(the kafka-configs CLI supports altering topic configs with a --bootstrap-server "
        "option)."),
    Opt("describe", "List details for the given topics."),
    Opt("topic", "The topic to create, alter, describe or delete. It also accepts a regular "
        "expression, except for --create option. Put topic name in double quotes and use the "
        '\'\\\' prefix to escape regular expression symbols; e.g. "test\\.topic".', "topic"),
    Opt("topic-id", "The topic-id to describe.This is used only with --bootstrap-server option "
        "for describing topics.", "topic-id"),
    Opt("config", "A topic configuration override for the topic being created. The "
        "following is a list of valid configurations:\n"
        + config_names.listed(config_names.TOPICS)
        + "See the Kafka documentation for full details on the topic configs. It is "
        "supported only in combination with --create if --bootstrap-server option is used "
        "(the kafka-configs CLI supports altering topic configs with a --bootstrap-server "
        "option).", "name=value"),
    Opt("delete-config", "A topic configuration override to be removed for an existing topic "
        "(see the list of configurations under the --config option). Not supported with the "
        "--bootstrap-server option.", "name"),
    Opt("partitions", "The number of partitions for the topic being created or altered (WARNING: "
        "If partitions are increased for a topic that has a key, the partition logic or ordering "
        "of the messages will be affected). If not supplied for create, defaults to the cluster "
        "default.", "# of partitions", int),
    Opt("replication-factor", "The replication factor for each partition in the topic being "
        "created. If not supplied, defaults to the cluster default.", "replication factor", int),
    Opt("replica-assignment", "A list of manual partition-to-broker assignments for the "
        "topic being created or altered.", "broker_id_for_part1_replica1 : "
        "broker_id_for_part1_replica2 , broker_id_for_part2_replica1 : "
        "broker_id_for_part2_replica2 , ..."),
    Opt("under-replicated-partitions",
        'if set when describing topics, only show under replicated partitions'),
    Opt("unavailable-partitions", "if set when describing topics, only show partitions whose "
        "leader is not available"),
    Opt("under-min-isr-partitions", "if set when describing topics, only show partitions whose "
        "isr count is less than the configured minimum."),
    Opt("at-min-isr-partitions", "if set when describing topics, only show partitions whose isr "
        "count is equal to the configured minimum."),
    Opt("topics-with-overrides",
        'if set when describing topics, only show topics that have overridden configs'),
    Opt("if-exists", "if set when altering or deleting or describing topics, the action will "
        "only execute if the topic exists."),
    Opt("if-not-exists", "if set when creating topics, the action will only execute if the topic "
        "does not already exist."),
    Opt("exclude-internal", "exclude internal topics when running list or describe command. The "
        "internal topics will be listed by default"),
    Opt("partition-size-limit-per-response", "the maximum partition size to be included in one "
        "DescribeTopicPartitions response.", "maximum number of partitions in one response.", int),
]


def _others(*keep: str) -> list[str]:
    return [a for a in ACTIONS if a not in keep]


def check_args(options: Options) -> str:
    """Kafka's TopicCommandOptions.checkArgs: the one action, required and invalid flags."""
    actions = [a for a in ACTIONS if options.has(a)]
    if len(actions) != 1:
        raise UsageError("Command must include exactly one action: --list, --describe, "
                         "--create, --alter or --delete")
    if not options.has("bootstrap-server"):
        raise ArgumentError("--bootstrap-server must be specified")
    if options.has("describe") and options.has("if-exists") and not (
            options.has("topic") or options.has("topic-id")):
        raise UsageError("--topic or --topic-id is required to describe a topic")
    if not options.has("list") and not options.has("describe"):
        require(options, "topic")
    if options.has("alter"):
        if options.has("config"):
            raise UsageError('Option combination "[bootstrap-server, config]" can\'t be used '
                             'with option "[alter]"' + CONFIGS_TOOL_HINT)
        require(options, "partitions")
    forbid(options, "config", *_others("alter", "create"))
    # 3.9.1 still lists --delete-config (from its ZooKeeper days) but refuses it beside
    # --bootstrap-server, which every command needs
    forbid(options, "delete-config", *_others("alter"))
    forbid(options, "delete-config", "bootstrap-server")
    forbid(options, "partitions", *_others("alter", "create"))
    forbid(options, "replication-factor", *_others("create"))
    forbid(options, "replica-assignment", *_others("alter", "create"))
    if options.has("create"):
        forbid(options, "replica-assignment", "partitions", "replication-factor")
    for report in REPORTS:
        forbid(options, report, "topics-with-overrides", *_others("describe"))
    forbid(options, "topics-with-overrides", *REPORTS, *_others("describe"))
    forbid(options, "if-exists", *_others("alter", "delete", "describe"))
    forbid(options, "if-not-exists", *_others("create"))
    forbid(options, "exclude-internal", *_others("list", "describe"))
    return actions[0]


def parse_replica_assignment(text: str) -> dict[int, list[int]]:
    result: dict[int, list[int]] = {}
    for index, part in enumerate(text.split(",")):
        try:
            brokers = [int(b.strip()) for b in part.split(":")]
        except ValueError:
            raise ArgumentError(f'For input string: "{part.strip()}"') from None
        duplicates = sorted({b for b in brokers if brokers.count(b) > 1})
        if duplicates:
            raise KafkaToolError(39, "Partition replica lists may not contain duplicate "
                                     "entries: " + ",".join(map(str, duplicates)))
        result[index] = brokers
        if len(brokers) != len(result[0]):
            raise KafkaToolError(39, f"Partition {index} has different replication factor: "
                                     f"[{', '.join(map(str, brokers))}]")
    return result


def parse_configs(values: list[str]) -> dict[str, str]:
    pairs = [re.split(r"\s*=\s*", v) for v in values]
    if not all(len(p) == 2 for p in pairs):
        raise ArgumentError('requirement failed: Invalid topic config: all configs to be '
                            'added must be in the format "key=val".')
    return {k.strip(): v.strip() for k, v in pairs}


def topic_filter(pattern: str | None, exclude_internal: bool) -> Callable[[str, bool], bool]:
    """Kafka's IncludeList: the --topic value is a whole-name regular expression."""
    regex = None
    if pattern is not None:
        cleaned = re.sub(r"[\"']+$", "", re.sub(r"^[\"']+", "",
                                                pattern.strip().replace(",", "|")
                                                .replace(" ", "")))
        try:
            regex = re.compile(cleaned)
        except re.error as exc:
            raise ArgumentError(f"{exc} near index {exc.pos}\n{cleaned}") from None

    def allowed(name: str, internal: bool) -> bool:
        if exclude_internal and internal:
            return False
        return regex is None or regex.fullmatch(name) is not None
    return allowed


Partition = MetadataResponse.MetadataResponsePartition
ConfigEntry = DescribeConfigsResponse.DescribeConfigsResourceResult
# an ongoing reassignment of a partition
Moving = ListPartitionReassignmentsResponse.OngoingPartitionReassignment


@dataclass
class TopicInfo:
    name: str
    topic_id: str
    internal: bool
    partitions: list[Partition]  # sorted by index


def matching_topics(admin: Admin, options: Options) -> list[TopicInfo]:
    allowed = topic_filter(options.get("topic"), options.has("exclude-internal"))
    answer = admin.metadata(None)
    found = []
    for t in sorted(answer.topics, key=lambda t: t.name or ""):
        internal = t.is_internal or t.name in INTERNAL_TOPICS
        if t.error_code == 0 and allowed(t.name, internal):
            found.append(TopicInfo(t.name, topic_id_text(t.topic_id), internal,
                                   sorted(t.partitions, key=lambda p: p.partition_index)))
    return found


def ensure_found(found: Sized, options: Options) -> None:
    topic = options.get("topic")
    if topic and not options.has("if-exists") and not found:
        # Kafka 3.9 formats the Optional that holds the name, not the name
        raise ArgumentError(f"Topic 'Optional[{topic}]' does not exist as expected")


def create(admin: Admin, options: Options) -> int:
    name = options.get("topic")
    assignment = (parse_replica_assignment(options.get("replica-assignment"))
                  if options.get("replica-assignment") else {})
    configs = parse_configs(options.all("config"))
    if "." in name or "_" in name:
        print(COLLISION_WARNING)
    rf = options.get("replication-factor")
    partitions = options.get("partitions")
    if rf is not None and not 1 <= rf <= 32767:
        raise ArgumentError("The replication factor must be between 1 and 32767 inclusive")
    if partitions is not None and partitions < 1:
        raise ArgumentError("The partitions must be greater than 0")
    topic = CreateTopicsRequest.CreatableTopic(
        name=name, num_partitions=-1 if assignment or partitions is None else partitions,
        replication_factor=-1 if assignment or rf is None else rf,
        assignments=[CreateTopicsRequest.CreatableReplicaAssignment(
            partition_index=p, broker_ids=b) for p, b in assignment.items()],
        configs=[CreateTopicsRequest.CreatableTopicConfig(name=k, value=v)
                 for k, v in configs.items()])
    answer = admin.to_controller("CreateTopics", 7, topics=[topic],
                                 timeout_ms=int(admin.timeout * 1000), validate_only=False)
    result = answer.topics[0]
    if result.error_code == 36 and options.has("if-not-exists"):
        return 0
    check(result.error_code, result.error_message)
    print(f"Created topic {name}.")
    return 0


def alter(admin: Admin, options: Options) -> int:
    found = matching_topics(admin, options)
    ensure_found(found, options)
    count = options.get("partitions")
    assignment = (parse_replica_assignment(options.get("replica-assignment"))
                  if options.get("replica-assignment") else {})
    if not found:
        return 0
    requests = []
    for info in found:
        added = [b for p, b in assignment.items() if p >= len(info.partitions)]
        requests.append(CreatePartitionsRequest.CreatePartitionsTopic(
            name=info.name, count=count,
            assignments=[CreatePartitionsRequest.CreatePartitionsAssignment(broker_ids=b)
                         for b in added] if assignment else None))
    answer = admin.to_controller("CreatePartitions", 3, topics=requests,
                                 timeout_ms=int(admin.timeout * 1000), validate_only=False)
    for result in answer.results:
        check(result.error_code, result.error_message)
    return 0  # Kafka 3.9 prints nothing (the warning and "succeeded" line are pre-3.0)


def delete(admin: Admin, options: Options) -> int:
    found = matching_topics(admin, options)
    ensure_found(found, options)
    if not found:
        return 0
    answer = admin.to_controller(
        "DeleteTopics", 6, topic_names=None,
        topics=[DeleteTopicsRequest.DeleteTopicState(name=t.name) for t in found],
        timeout_ms=int(admin.timeout * 1000))
    for result in answer.responses:
        check(result.error_code, result.error_message)
    return 0


def list_topics(admin: Admin, options: Options) -> int:
    print("\n".join(t.name for t in matching_topics(admin, options)))
    return 0


# describe ----------------------------------------------------------------------------


def topic_configs(admin: Admin, names: list[str]) -> dict[str, list[ConfigEntry]]:
    """DescribeConfigs of the topics: {name: entries}."""
    if not names:
        return {}
    answer = admin.call("DescribeConfigs", 4, resources=[
        DescribeConfigsRequest.DescribeConfigsResource(
            resource_type=TOPIC_RESOURCE, resource_name=n, configuration_keys=None)
        for n in names], include_synonyms=False, include_documentation=False)
    out = {}
    for result in answer.results:
        check(result.error_code, result.error_message)
        out[result.resource_name] = sorted(result.configs, key=lambda c: c.name)
    return out


def reassignments(admin: Admin, topics: list[TopicInfo]) -> dict[tuple[str, int], Moving]:
    """Ongoing reassignments by partition (none when the cluster cannot list them)."""
    if not topics or not admin.supports("ListPartitionReassignments"):
        return {}
    answer = admin.to_controller("ListPartitionReassignments", 0,
                                 timeout_ms=int(admin.timeout * 1000), topics=[
        ListPartitionReassignmentsRequest.ListPartitionReassignmentsTopics(
            name=t.name, partition_indexes=[p.partition_index for p in t.partitions])
        for t in topics])
    if answer.error_code:
        return {}
    return {(t.name, p.partition_index): p for t in answer.topics for p in t.partitions}


def _ids(values: list[int]) -> str:
    return ",".join(map(str, values))


def replication_factor(partition: Partition, moving: Moving | None) -> int:
    if moving is not None:
        changing = set(moving.adding_replicas) | set(moving.removing_replicas)
        if changing & set(partition.replica_nodes):
            return len(moving.replicas) - len(moving.adding_replicas)
    return len(partition.replica_nodes)


def partition_line(topic: str, p: Partition, moving: Moving | None) -> str:
    leader = p.leader_id if p.leader_id >= 0 else "none"
    line = (f"\tTopic: {topic}\tPartition: {p.partition_index}\tLeader: {leader}"
            f"\tReplicas: {_ids(p.replica_nodes)}\tIsr: {_ids(p.isr_nodes)}")
    if moving is not None:
        line += (f"\tAdding Replicas: {_ids(moving.adding_replicas)}"
                 f"\tRemoving Replicas: {_ids(moving.removing_replicas)}")
    return line + "\tElr: N/A\tLastKnownElr: N/A"  # ELR is KRaft-only (KIP-966)


def _selected(options: Options, p: Partition, moving: Moving | None, min_isr: int,
              live: set[int]) -> bool:
    reports = [r for r in REPORTS if options.has(r)]
    if not reports:
        return True
    has_leader = p.leader_id >= 0
    tests = {
        "under-replicated-partitions": replication_factor(p, moving) > len(p.isr_nodes),
        "unavailable-partitions": not has_leader or p.leader_id not in live,
        "under-min-isr-partitions": not has_leader or len(p.isr_nodes) < min_isr,
        "at-min-isr-partitions": len(p.isr_nodes) == min_isr,
    }
    return any(tests[r] for r in reports)


def describe_lines(admin: Admin, options: Options) -> Iterator[str]:
    found = matching_topics(admin, options)
    wanted_id = options.get("topic-id")
    if wanted_id and wanted_id != "AAAAAAAAAAAAAAAAAAAAAA":
        found = [t for t in found if t.topic_id == wanted_id]
        if not found and not options.has("if-exists"):
            raise ArgumentError(f"TopicId '{wanted_id}' does not exist as expected")
    else:
        ensure_found(found, options)
    configs = topic_configs(admin, [t.name for t in found])
    live = {b.node_id for b in admin.metadata([]).brokers}
    moving = reassignments(admin, found)
    report = any(options.has(r) for r in REPORTS)
    overrides_only = options.has("topics-with-overrides")
    for info in found:
        entries = configs.get(info.name, [])
        overridden = [c for c in entries if c.config_source != DEFAULT_SOURCE]
        if not info.partitions:
            continue
        if not report and (not overrides_only or overridden):
            first = info.partitions[0]
            rf = replication_factor(first, moving.get((info.name, first.partition_index)))
            head = f"Topic: {info.name}"
            if info.topic_id != "AAAAAAAAAAAAAAAAAAAAAA":
                head += f"\tTopicId: {info.topic_id}"
            yield (head + f"\tPartitionCount: {len(info.partitions)}\tReplicationFactor: {rf}"
                   "\tConfigs: " + ",".join(f"{c.name}={c.value}" for c in overridden))
        if overrides_only:
            continue
        min_isr = int(next((c.value for c in entries if c.name == "min.insync.replicas"), 1))
        for p in info.partitions:
            move = moving.get((info.name, p.partition_index))
            if _selected(options, p, move, min_isr, live):
                yield partition_line(info.name, p, move)


def describe(admin: Admin, options: Options) -> int:
    for line in describe_lines(admin, options):
        print(line)
    return 0


def run(options: Options) -> int:
    action = next(a for a in ACTIONS if options.has(a))  # check_args left exactly one
    with admin_from(options) as admin:
        return {"create": create, "alter": alter, "delete": delete, "list": list_topics,
                "describe": describe}[action](admin, options)


# As Kafka 3.9's TopicCommand: a command line it refuses gets the message on stderr (and the
# usage table where Kafka prints it); any failure after that, "Error while executing topic
# command : <message>" on stdout and the exception logged at ERROR on stderr.
TOOL = Tool("topics", "This tool helps to create, delete, describe, or change a topic.",
            OPTIONS, run,
            "Error while executing topic command : ", plain_parse_errors=True,
            check=check_args, error_logger="org.apache.kafka.tools.TopicCommand")
