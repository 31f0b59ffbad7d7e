"""CreateTopics (19), DeleteTopics (20) and CreatePartitions (37): the controller's topic
administration in ZooKeeper mode (Kafka's KafkaApis with ZkAdminManager and
AdminZkClient).

The handlers write znodes (/config/topics/<t> and /brokers/topics/<t>, or
/admin/delete_topics/<t>) and then wait, up to the request's timeout_ms, until the
controller has acted and the metadata cache shows it: every partition with a leader, or
the topic gone. What is not there at the timeout is answered REQUEST_TIMED_OUT, the
znodes stay written, as in Kafka. Only the active controller serves them (NOT_CONTROLLER
otherwise; the client retries on the controller named by Metadata).
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from typing import TYPE_CHECKING

from moldau.cluster import host_domains, zk_data
from moldau.errors import (
    InvalidConfigurationError,
    InvalidPartitionsError,
    InvalidReplicaAssignmentError,
    InvalidRequestError,
    InvalidTopicError,
    KafkaError,
    NotControllerError,
    ReassignmentInProgressError,
    RequestTimedOutError,
    ThrottlingQuotaExceededError,
    TopicAlreadyExistsError,
    TopicAuthorizationFailedError,
    TopicDeletionDisabledError,
    UnknownTopicIdError,
    UnknownTopicOrPartitionError,
)
from moldau.protocol._runtime import ZERO_UUID
from moldau.protocol.generated.create_partitions_response import CreatePartitionsResponse
from moldau.protocol.generated.create_topics_response import CreateTopicsResponse
from moldau.protocol.generated.delete_topics_response import DeleteTopicsResponse
from moldau.security.acls import AclOperation, ResourceType

from ..metadata_cache import MetadataCache
from ..topic_admin import assign_replicas
from ..topic_names import validate_topic_name
from .configs import TOPIC_CONFIG_NAMES, topic_entry, validate_topic_configs
from .services import active_controller

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from moldau.cluster.controller import Controller
    from moldau.cluster.zk_async import AsyncZk
    from moldau.protocol.generated.create_partitions_request import CreatePartitionsRequest
    from moldau.protocol.generated.create_topics_request import CreateTopicsRequest
    from moldau.protocol.generated.delete_topics_request import DeleteTopicsRequest
    from moldau.storage.config import LogConfig

    from ..config import BrokerConfig
    from ..dynamic_config import DynamicBrokerConfig
    from ..quota_managers import MutationQuota
    from ..requests import RequestContext
    from ..topic_admin import TopicAdmin

log = logging.getLogger("kafka.server.ZkAdminManager")

CLUSTER_NAME = "kafka-cluster"
NO_NUM_PARTITIONS = -1
NO_REPLICATION_FACTOR = -1

TopicResult = CreateTopicsResponse.CreatableTopicResult
TopicConfigs_ = CreateTopicsResponse.CreatableTopicConfigs
DeleteResult = DeleteTopicsResponse.DeletableTopicResult
PartitionsResult = CreatePartitionsResponse.CreatePartitionsTopicResult


def _partitions_ready(metadata: MetadataCache, topic: str, partitions: set[int]) -> bool:
    info = metadata.topics.get(topic)
    if info is None:
        return False
    return all(p in info.partitions and info.partitions[p].leader >= 0 for p in partitions)


async def wait_for_partitions(metadata: MetadataCache, wanted: dict[str, set[int]],
                              timeout_ms: int) -> set[str]:
    """Wait until every wanted partition has a leader in the metadata cache (Kafka's
    DelayedCreatePartitions); returns the topics still without, at the timeout."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + max(timeout_ms, 0) / 1000
    while True:
        pending = {t for t, parts in wanted.items()
                   if not _partitions_ready(metadata, t, parts)}
        if not pending or loop.time() >= deadline:
            return pending
        await asyncio.sleep(0.01)


async def wait_for_deletion(metadata: MetadataCache, names: set[str],
                            timeout_ms: int) -> set[str]:
    """Wait until the topics left the metadata cache (DelayedDeleteTopics)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + max(timeout_ms, 0) / 1000
    while True:
        pending = {n for n in names if n in metadata.topics}
        if not pending or loop.time() >= deadline:
            return pending
        await asyncio.sleep(0.01)


# --------------------------------------------------------------------------- CreateTopics


class _ControllerTopicHandler:
    """Served by the active controller: it writes znodes, then waits for the metadata."""

    def __init__(self, metadata: MetadataCache, zk: AsyncZk,
                 controller: Callable[[], Controller | None]) -> None:
        self.metadata = metadata
        self.zk = zk
        self.controller = controller


class CreateTopicsHandler(_ControllerTopicHandler):
    MIN_VERSION, MAX_VERSION = 0, 7

    def __init__(self, config: BrokerConfig, metadata: MetadataCache, zk: AsyncZk,
                 topics: TopicAdmin, dynamic_config: DynamicBrokerConfig,
                 controller: Callable[[], Controller | None]) -> None:
        super().__init__(metadata, zk, controller)
        self.config = config
        self.topics = topics
        self.dynamic_config = dynamic_config

    async def __call__(self, ctx: RequestContext,
                       request: CreateTopicsRequest) -> CreateTopicsResponse:
        version = ctx.api_version
        results = [TopicResult(name=t.name, error_message=None) for t in request.topics]
        response = CreateTopicsResponse(topics=results)
        if active_controller(self.controller) is None:
            for result in results:
                result.error_code = NotControllerError.code
            return response
        validate_only = request.validate_only if version >= 1 else False
        # v6+ is refused with 89 once the client's bucket is empty; older versions are
        # accepted and throttled (Kafka's strictSinceVersion)
        quota = ctx.quotas.mutation_quota(ctx, strict=version >= 6)
        dynamic = self.dynamic_config
        counts = Counter(t.name for t in request.topics)
        # neither the cluster's CREATE (the topic's may still allow it) nor DESCRIBE_CONFIGS
        # (only hides the configs) is logged as a denial
        cluster_create = ctx.authorize(AclOperation.CREATE, ResourceType.CLUSTER, CLUSTER_NAME,
                                       log_if_denied=False)
        created: dict[str, set[int]] = {}
        # moldau.broker.host of the brokers, read once for the request's topics
        hosts = await self.topics.broker_hosts() if request.topics else {}
        succeeded: list[TopicResult] = []
        for topic, result in zip(request.topics, results, strict=True):
            name = topic.name
            # Kafka marks the hidden configs on every entry, refused ones too; a failed
            # creation clears the mark (_fail)
            describe_configs = ctx.authorize(AclOperation.DESCRIBE_CONFIGS, ResourceType.TOPIC,
                                             name, log_if_denied=False)
            if not describe_configs:
                result.topic_config_error_code = TopicAuthorizationFailedError.code
            if counts[name] > 1:
                result.error_code = InvalidRequestError.code
                result.error_message = "Found multiple entries for this topic."
                continue
            if not (cluster_create or ctx.authorize(AclOperation.CREATE, ResourceType.TOPIC, name)):
                result.error_code = TopicAuthorizationFailedError.code
                result.error_message = "Authorization failed."
                continue
            try:
                assignment, configs, log_config = await self._prepare(topic, hosts)
                if version >= 5 and describe_configs:
                    result.configs = [
                        TopicConfigs_(name=e.name, value=e.value, read_only=e.read_only,
                                      config_source=e.config_source,
                                      is_sensitive=e.is_sensitive)
                        for e in (topic_entry(dynamic, log_config, configs, key, False)
                                  for key in TOPIC_CONFIG_NAMES)]
                    result.num_partitions = len(assignment)
                    result.replication_factor = len(assignment[0])
                if not validate_only:
                    quota.record(len(assignment))
                    await self.topics.create(name, assignment, configs)
                    created[name] = set(assignment)
                succeeded.append(result)
            except KafkaError as exc:
                level = logging.DEBUG if isinstance(exc, TopicAlreadyExistsError) else logging.INFO
                log.log(level, "Error processing create topic request %s: %s", name, exc)
                self._fail(result, exc.code, str(exc) or None)
        if validate_only or not succeeded:
            return response
        if request.timeout_ms <= 0:
            for result in succeeded:
                self._fail(result, RequestTimedOutError.code, None)
                await self._set_topic_id(result, version)
            return response
        pending = await wait_for_partitions(self.metadata, created, request.timeout_ms)
        for result in succeeded:
            await self._set_topic_id(result, version)
            if result.name in pending:
                # the topic exists; its leaders were not elected in time
                result.error_code = RequestTimedOutError.code
                result.error_message = None
        return response

    @staticmethod
    def _fail(result: TopicResult, code: int, message: str | None) -> None:
        result.error_code = code
        result.error_message = message
        result.configs = []
        result.num_partitions = -1
        result.replication_factor = -1
        result.topic_config_error_code = 0

    async def _set_topic_id(self, result: TopicResult, version: int) -> None:
        if version < 7:
            return
        topic_id = self.metadata.topic_id(result.name)
        if topic_id is None:
            assignment = await self.zk.call(self.zk.client.get_topic_assignment, result.name)
            topic_id = assignment.topic_id if assignment is not None else None
        result.topic_id = topic_id or ZERO_UUID

    async def _prepare(self, topic: CreateTopicsRequest.CreatableTopic,
                       hosts: Mapping[int, str]
                       ) -> tuple[dict[int, list[int]], dict[str, str], LogConfig]:
        """ZkAdminManager.createTopics' checks, in Kafka's order; returns the assignment
        (placed on the brokers' `hosts` too), the overrides and the topic's LogConfig."""
        name = topic.name
        if name in self.metadata.topics:
            raise TopicAlreadyExistsError(f"Topic '{name}' already exists.")
        nulls = [c.name for c in topic.configs if c.value is None]
        if nulls:
            raise InvalidConfigurationError("Null value not supported for topic configs: "
                                            + ",".join(nulls))
        if topic.assignments and (topic.num_partitions != NO_NUM_PARTITIONS
                                  or topic.replication_factor != NO_REPLICATION_FACTOR):
            raise InvalidRequestError("Both numPartitions or replicationFactor and "
                                      "replicasAssignments were set. Both cannot be used at "
                                      "the same time.")
        partitions = topic.num_partitions
        if partitions == NO_NUM_PARTITIONS:
            partitions = self.config["num.partitions"]
        factor = topic.replication_factor
        if factor == NO_REPLICATION_FACTOR:
            factor = self.config["default.replication.factor"]
        explicit = None
        if topic.assignments:
            explicit = {}
            for a in topic.assignments:
                if a.partition_index in explicit:
                    raise InvalidReplicaAssignmentError(
                        "partitions should be a consecutive 0-based integer sequence")
                explicit[a.partition_index] = list(a.broker_ids)
            if any(not replicas for replicas in explicit.values()):
                raise InvalidReplicaAssignmentError(
                    "All partitions should have the same number of replicas")
            validate_topic_name(name)
        assignment = self.topics.plan(name, partitions, factor, explicit, hosts)
        self.topics.validate_new_topic(name)
        if await self.zk.call(self.zk.client.exists, zk_data.delete_topic_path(name)):
            raise TopicAlreadyExistsError(f"Topic '{name}' is marked for deletion.")
        configs = {c.name: c.value for c in topic.configs}
        log_config = validate_topic_configs(configs, self.dynamic_config.log_config())
        return assignment, configs, log_config


# --------------------------------------------------------------------------- DeleteTopics


class DeleteTopicsHandler(_ControllerTopicHandler):
    MIN_VERSION, MAX_VERSION = 0, 6

    def __init__(self, config: BrokerConfig, metadata: MetadataCache, zk: AsyncZk,
                 controller: Callable[[], Controller | None]) -> None:
        super().__init__(metadata, zk, controller)
        self.config = config  # delete.topic.enable

    async def __call__(self, ctx: RequestContext,
                       request: DeleteTopicsRequest) -> DeleteTopicsResponse:
        version = ctx.api_version
        if version >= 6:
            wanted = [(t.name, t.topic_id) for t in request.topics]
        else:
            wanted = [(n, ZERO_UUID) for n in request.topic_names]
        results = [DeleteResult(name=n, topic_id=i, error_message=None) for n, i in wanted]
        response = DeleteTopicsResponse(responses=results)
        error: KafkaError | None = None
        if active_controller(self.controller) is None:
            error = NotControllerError()
        elif not self.config["delete.topic.enable"]:
            error = (InvalidRequestError("Topic deletion is disabled.") if version < 3
                     else TopicDeletionDisabledError("Topic deletion is disabled."))
        elif any(n is not None and i != ZERO_UUID for n, i in wanted):
            error = InvalidRequestError("Topic name and topic ID can not both be specified.")
        if error is not None:
            for result in results:
                result.error_code = error.code
                result.error_message = (str(error) or None) if version >= 5 else None
            return response
        metadata = self.metadata
        to_delete: dict[str, list[DeleteResult]] = {}
        for (name, topic_id), result in zip(wanted, results, strict=True):
            by_id = topic_id != ZERO_UUID
            if by_id:
                name = metadata.topic_names.get(topic_id)
                result.name = name
                if name is None:
                    result.error_code = UnknownTopicIdError.code
                    continue
                if not ctx.authorize(AclOperation.DESCRIBE, ResourceType.TOPIC, name):
                    result.name = None
                    result.error_code = TopicAuthorizationFailedError.code
                    continue
            if name is None or not ctx.authorize(AclOperation.DELETE, ResourceType.TOPIC, name):
                result.error_code = TopicAuthorizationFailedError.code
            elif name not in metadata.topics:
                result.error_code = UnknownTopicOrPartitionError.code
            else:
                to_delete.setdefault(name, []).append(result)
        if not to_delete:
            return response
        marked: set[str] = set()
        quota = ctx.quotas.mutation_quota(ctx, strict=version >= 5)
        for name, entries in to_delete.items():
            try:
                info = metadata.topics.get(name)
                quota.record(len(info.partitions) if info is not None else 0)
                await self.zk.call(self.zk.client.mark_topic_for_deletion, name)
                marked.add(name)
                log.info("Marked topic %s for deletion", name)
            except KafkaError as exc:
                log.error("Error processing delete topic request for topic %s: %s", name, exc)
                for result in entries:
                    result.error_code = exc.code
                    if isinstance(exc, ThrottlingQuotaExceededError) and version >= 5:
                        result.error_message = str(exc)
        if not marked:
            return response
        if request.timeout_ms <= 0:
            pending = marked
        else:
            pending = await wait_for_deletion(metadata, marked, request.timeout_ms)
        for name in pending:
            for result in to_delete[name]:
                result.error_code = RequestTimedOutError.code
        return response


# --------------------------------------------------------------------------- CreatePartitions


class CreatePartitionsHandler(_ControllerTopicHandler):
    MIN_VERSION, MAX_VERSION = 0, 3

    def __init__(self, metadata: MetadataCache, zk: AsyncZk, topics: TopicAdmin,
                 controller: Callable[[], Controller | None]) -> None:
        super().__init__(metadata, zk, controller)
        self.topics = topics

    async def __call__(self, ctx: RequestContext,
                       request: CreatePartitionsRequest) -> CreatePartitionsResponse:
        results = [PartitionsResult(name=t.name, error_message=None) for t in request.topics]
        response = CreatePartitionsResponse(results=results)
        if active_controller(self.controller) is None:
            for result in results:
                result.error_code = NotControllerError.code
            return response
        counts = Counter(t.name for t in request.topics)
        quota = ctx.quotas.mutation_quota(ctx, strict=ctx.api_version >= 3)
        waiting: dict[str, set[int]] = {}
        succeeded: list[PartitionsResult] = []
        for topic, result in zip(request.topics, results, strict=True):
            name = topic.name
            try:
                if counts[name] > 1:
                    raise InvalidRequestError("Duplicate topic in request.")
                if not ctx.authorize(AclOperation.ALTER, ResourceType.TOPIC, name):
                    raise TopicAuthorizationFailedError("The topic authorization is failed.")
                if await self.zk.call(self.zk.client.exists, zk_data.delete_topic_path(name)):
                    raise InvalidTopicError("The topic is queued for deletion.")
                partitions = await self._add(topic, request.validate_only, quota)
                waiting[name] = partitions
                succeeded.append(result)
            except KafkaError as exc:
                log.info("Error processing create partitions request for topic %s: %s", name,
                         exc)
                result.error_code = exc.code
                result.error_message = str(exc) or None
        if request.validate_only or not succeeded:
            return response
        if request.timeout_ms <= 0:
            pending = set(waiting)
        else:
            pending = await wait_for_partitions(self.metadata, waiting,
                                                request.timeout_ms)
        for result in succeeded:
            if result.name in pending:
                result.error_code = RequestTimedOutError.code
        return response

    async def _add(self, topic: CreatePartitionsRequest.CreatePartitionsTopic,
                   validate_only: bool, quota: MutationQuota) -> set[int]:
        """ZkAdminManager.createPartitions + AdminZkClient.createNewPartitionsAssignment:
        returns every partition of the topic once the new assignment is written."""
        name = topic.name
        zk = self.zk
        current = await zk.call(zk.client.get_topic_assignment, name)
        if current is None or not current.partitions:
            raise UnknownTopicOrPartitionError(f"The topic '{name}' does not exist.")
        if any(current.adding_replicas.values()) or any(current.removing_replicas.values()):
            raise ReassignmentInProgressError(
                f"A partition reassignment is in progress for the topic '{name}'.")
        existing = dict(current.partitions)
        old, new = len(existing), topic.count
        increment = new - old
        if increment < 0:
            raise InvalidPartitionsError(f"Topic currently has {old} partitions, which is "
                                         f"higher than the requested {new}.")
        if increment == 0:
            raise InvalidPartitionsError(f"Topic already has {old} partitions.")
        brokers = self.metadata.alive_broker_ids()
        factor = len(existing[0]) if 0 in existing else len(next(iter(existing.values())))
        hosts = await self.topics.broker_hosts()
        if topic.assignments is not None:
            proposed = [list(a.broker_ids) for a in topic.assignments]
            unknown = sorted({b for replicas in proposed for b in replicas} - set(brokers))
            if unknown:
                raise InvalidReplicaAssignmentError(
                    f"Unknown broker(s) in replica assignment: "
                    f"{', '.join(str(b) for b in unknown)}.")
            if len(proposed) != increment:
                raise InvalidReplicaAssignmentError(
                    f"Increasing the number of partitions by {increment} but "
                    f"{len(proposed)} assignments provided.")
            added = {old + i: replicas for i, replicas in enumerate(proposed)}
            for index, replicas in added.items():
                if not replicas:
                    raise InvalidReplicaAssignmentError(
                        f"Cannot have replication factor of 0 for partition id {index}.")
                if len(set(replicas)) != len(replicas):
                    raise InvalidReplicaAssignmentError(
                        "Duplicate brokers not allowed in replica assignment: "
                        f"{', '.join(str(b) for b in replicas)} for partition id {index}.")
                if len(replicas) != factor:
                    raise InvalidReplicaAssignmentError(
                        "Inconsistent replication factor between partitions, partition 0 has "
                        f"{factor} while partition {index} has {len(replicas)}.")
            host_domains.warn_explicit(log, name, added, hosts)
        else:
            first_leader = existing[min(existing)][0]
            # Kafka's AdminZkClient: brokers sorted by id, with their racks (and hosts)
            placed = self.topics.partition_brokers(hosts)
            start = next((i for i, b in enumerate(placed) if b.id >= first_leader), -1)
            start = max(0, start)
            added = assign_replicas(placed, increment, factor, start_index=start,
                                    next_replica_shift=start, first_partition=old)
            host_domains.warn_placed(log, name, added, hosts, [b.id for b in placed])
        if not validate_only:
            quota.record(increment)
            combined = dict(existing)
            combined.update(added)
            log.info("Creating %d partitions for '%s' with the following replica assignment: "
                     "%s.", increment, name, added)
            await zk.call(zk.client.set_topic_assignment, name, zk_data.TopicAssignment(
                combined, current.topic_id, dict(current.adding_replicas),
                dict(current.removing_replicas)))
            return set(combined)
        return set(existing) | set(added)
