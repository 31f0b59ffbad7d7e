"""Metadata (API key 3): brokers on the requester's listener, topics, partitions, leaders.

A request naming a topic that does not exist creates it when auto.create.topics.enable is
on and the request allows it (v4+); the answer for that topic is LEADER_NOT_AVAILABLE
until its leaders are elected, and the client asks again.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from moldau.errors import (
    KafkaError,
    LeaderNotAvailableError,
    ReplicaNotAvailableError,
    TopicAuthorizationFailedError,
    UnknownTopicIdError,
    UnknownTopicOrPartitionError,
)
from moldau.protocol.generated.metadata_response import MetadataResponse
from moldau.security.acls import AclOperation, ResourceType

from ..metadata_cache import INTERNAL_TOPICS, TopicInfo
from ..quota_managers import UNBOUNDED_MUTATION_QUOTA
from ..topic_names import validate_topic_name
from .cluster_info import CLUSTER_NAME

if TYPE_CHECKING:
    from moldau.protocol.generated.metadata_request import MetadataRequest

    from ..config import BrokerConfig
    from ..metadata_cache import MetadataCache
    from ..requests import RequestContext
    from ..topic_admin import TopicAdmin

log = logging.getLogger("kafka.server.KafkaApis")
Broker_ = MetadataResponse.MetadataResponseBroker
Topic_ = MetadataResponse.MetadataResponseTopic
Partition_ = MetadataResponse.MetadataResponsePartition
ZERO_UUID_INT = 0
REPLICA_NOT_AVAILABLE = ReplicaNotAvailableError.code
TOPIC_DENIED = TopicAuthorizationFailedError.code


class MetadataHandler:
    MIN_VERSION, MAX_VERSION = 0, 12

    def __init__(self, broker_id: int, config: BrokerConfig, metadata: MetadataCache,
                 topics: TopicAdmin) -> None:
        self.broker_id = broker_id
        self.config = config
        self.metadata = metadata
        self.topics = topics  # auto-creation

    def __call__(self, ctx: RequestContext, request: MetadataRequest) -> MetadataResponse:
        metadata = self.metadata
        version = ctx.api_version
        listener = ctx.listener
        brokers = []
        for broker_id in metadata.alive_broker_ids():
            endpoint = metadata.endpoint(broker_id, listener)
            if endpoint is not None:
                entry = Broker_(node_id=broker_id, host=endpoint[0], port=endpoint[1])
                if version >= 1:
                    entry.rack = metadata.brokers[broker_id].rack
                brokers.append(entry)
        all_topics = request.topics is None or (version == 0 and not request.topics)
        allow_create = request.allow_auto_topic_creation if version >= 4 else True
        topics = []
        if all_topics:
            # topics the requester may not describe are left out, and not logged as denied
            infos = list(metadata.topics.values())
            visible = ctx.authorized(AclOperation.DESCRIBE, ResourceType.TOPIC,
                                     (info.name for info in infos), log_if_denied=False)
            topics = [self._describe(info, version, listener) for info in infos
                      if info.name in visible]
        else:
            for wanted in request.topics:
                topics.append(self._one(ctx, wanted, version, listener, allow_create))
        if version >= 8 and request.include_topic_authorized_operations:
            # as Kafka: every topic the requester may describe gets the bit field, unknown or
            # leaderless ones too; the denied ones keep the default
            for topic in topics:
                if topic.error_code != TOPIC_DENIED and topic.name is not None:
                    topic.topic_authorized_operations = ctx.authorized_operations(
                        ResourceType.TOPIC, topic.name)
        response = MetadataResponse(brokers=brokers, topics=topics)
        if 8 <= version <= 10 and request.include_cluster_authorized_operations:
            # as Kafka: the bit field only for a requester that may describe the cluster
            response.cluster_authorized_operations = (
                ctx.authorized_operations(ResourceType.CLUSTER, CLUSTER_NAME)
                if ctx.authorize(AclOperation.DESCRIBE, ResourceType.CLUSTER, CLUSTER_NAME)
                else 0)
        if version >= 1:
            response.controller_id = metadata.controller_id
        if version >= 2:
            response.cluster_id = metadata.cluster_id
        return response

    def _one(self, ctx: RequestContext, wanted: MetadataRequest.MetadataRequestTopic,
             version: int, listener: str, allow_create: bool) -> Topic_:
        metadata = self.metadata
        name = wanted.name
        # v10+: asked by id. Kafka's Java client leaves the name at its default, "", beside
        # the id (not null), so the id decides, as in Kafka's broker.
        if version >= 10 and wanted.topic_id.int != ZERO_UUID_INT:
            name = metadata.topic_names.get(wanted.topic_id)
            if name is None:
                return Topic_(error_code=UnknownTopicIdError.code, name=None,
                              topic_id=wanted.topic_id, partitions=[])
            if not ctx.authorize(AclOperation.DESCRIBE, ResourceType.TOPIC, name):
                # an id is not secret, a name is: the id comes back, the name does not
                return Topic_(error_code=TOPIC_DENIED, name=None, topic_id=wanted.topic_id,
                              partitions=[])
        elif not ctx.authorize(AclOperation.DESCRIBE, ResourceType.TOPIC, name):
            # authorization before existence: not even whether it exists
            return Topic_(error_code=TOPIC_DENIED, name=name, partitions=[])
        try:
            info = metadata.topics.get(name)
            if info is not None:
                return self._describe(info, version, listener)
            if not metadata.initialized:
                # A broker that just started answers before the controller's first
                # UpdateMetadata. UNKNOWN_TOPIC_OR_PARTITION would be a lie librdkafka
                # acts on (it drops the topic's partitions and fails the queued
                # records); this error is retriable in every client.
                raise LeaderNotAvailableError(
                    f"broker {self.broker_id} has no metadata from the controller yet")
            auto_create = allow_create and self.config["auto.create.topics.enable"]
            # CREATE on the cluster, else on the topic, is asked before the name is checked
            if auto_create and not (
                    ctx.authorize(AclOperation.CREATE, ResourceType.CLUSTER, CLUSTER_NAME,
                                  log_if_denied=False)
                    or ctx.authorize(AclOperation.CREATE, ResourceType.TOPIC, name)):
                raise TopicAuthorizationFailedError(name)
            validate_topic_name(name)
            if auto_create:
                # counted against the controller mutation quota, never refused (Kafka's
                # permissive quota for auto-creation)
                quota = ctx.quotas.mutation_quota(ctx, strict=False)
                if quota is not UNBOUNDED_MUTATION_QUOTA:
                    quota.record(self.config["num.partitions"])
                self.topics.auto_create(name)
                raise LeaderNotAvailableError(f"topic {name} is being created")
            raise UnknownTopicOrPartitionError(f"unknown topic {name}")
        except KafkaError as exc:
            # Kafka flags an internal topic as such even in an error answer
            return Topic_(error_code=exc.code, name=name, partitions=[],
                          is_internal=version >= 1 and name in INTERNAL_TOPICS)

    def _describe(self, info: TopicInfo, version: int, listener: str) -> Topic_:
        metadata = self.metadata
        alive = metadata.brokers
        partitions = []
        for index in sorted(info.partitions):
            p = info.partitions[index]
            error = 0
            if p.leader < 0 or metadata.endpoint(p.leader, listener) is None:
                error = LeaderNotAvailableError.code
            elif version <= 5 and any(r not in alive for r in p.replicas):
                error = REPLICA_NOT_AVAILABLE  # as Kafka, before offline_replicas existed
            out = Partition_(error_code=error, partition_index=index, leader_id=p.leader,
                             replica_nodes=list(p.replicas), isr_nodes=list(p.isr))
            if version >= 5:
                out.offline_replicas = [r for r in p.replicas
                                        if r not in alive or r in p.offline_replicas]
            if version >= 7:
                out.leader_epoch = p.leader_epoch
            partitions.append(out)
        topic = Topic_(error_code=0, name=info.name, partitions=partitions)
        if version >= 1:
            topic.is_internal = info.internal
        if version >= 10:
            topic.topic_id = info.topic_id
        return topic
