"""DescribeCluster (60) and DescribeLogDirs (35) (Kafka's KafkaApis, AuthHelper and
ReplicaManager.describeLogDirs)."""

from __future__ import annotations

import logging
import os
from typing import TYPE_CHECKING

from moldau.errors import (
    ClusterAuthorizationFailedError,
    InvalidRequestError,
    KafkaError,
    KafkaStorageError,
    MismatchedEndpointTypeError,
    UnsupportedEndpointTypeError,
)
from moldau.protocol.generated.describe_cluster_response import DescribeClusterResponse
from moldau.protocol.generated.describe_log_dirs_response import DescribeLogDirsResponse
from moldau.security.acls import AclOperation, ResourceType

if TYPE_CHECKING:
    from moldau.protocol.generated.describe_cluster_request import DescribeClusterRequest
    from moldau.protocol.generated.describe_log_dirs_request import DescribeLogDirsRequest
    from moldau.storage.log_manager import LogManager

    from ..config import BrokerConfig
    from ..metadata_cache import MetadataCache
    from ..requests import RequestContext

log = logging.getLogger("kafka.server.ReplicaManager")

CLUSTER_NAME = "kafka-cluster"
ENDPOINT_BROKER, ENDPOINT_CONTROLLER = 1, 2
INT_MIN = -(2**31)
LONG_MAX = 2**63 - 1

Broker_ = DescribeClusterResponse.DescribeClusterBroker
Result_ = DescribeLogDirsResponse.DescribeLogDirsResult
Topic_ = DescribeLogDirsResponse.DescribeLogDirsTopic
Partition_ = DescribeLogDirsResponse.DescribeLogDirsPartition


class DescribeClusterHandler:
    MIN_VERSION, MAX_VERSION = 0, 1

    def __init__(self, metadata: MetadataCache) -> None:
        self.metadata = metadata

    def __call__(self, ctx: RequestContext,
                 request: DescribeClusterRequest) -> DescribeClusterResponse:
        version = ctx.api_version
        endpoint_type = request.endpoint_type if version >= 1 else ENDPOINT_BROKER
        if endpoint_type not in (ENDPOINT_BROKER, ENDPOINT_CONTROLLER):
            error: type[KafkaError] = (InvalidRequestError if version == 0
                                      else UnsupportedEndpointTypeError)
            return DescribeClusterResponse(
                error_code=error.code, error_message=f"Unsupported endpoint type "
                f"{endpoint_type}")
        if endpoint_type != ENDPOINT_BROKER:
            error = InvalidRequestError if version == 0 else MismatchedEndpointTypeError
            return DescribeClusterResponse(
                error_code=error.code,
                error_message="The request was sent to an endpoint of type BROKER, but we "
                              "wanted an endpoint of type CONTROLLER")
        operations = INT_MIN
        if request.include_cluster_authorized_operations:
            if ctx.authorize(AclOperation.DESCRIBE, ResourceType.CLUSTER, CLUSTER_NAME):
                operations = ctx.authorized_operations(ResourceType.CLUSTER, CLUSTER_NAME)
            else:
                operations = 0
        metadata = self.metadata
        brokers = []
        for broker_id in metadata.alive_broker_ids():
            endpoint = metadata.endpoint(broker_id, ctx.listener)
            if endpoint is not None:
                brokers.append(Broker_(broker_id=broker_id, host=endpoint[0], port=endpoint[1],
                                       rack=metadata.brokers[broker_id].rack))
        controller = metadata.controller_id
        if controller not in {b.broker_id for b in brokers}:
            controller = -1  # as Kafka: never name a controller the client cannot reach
        return DescribeClusterResponse(
            error_code=0, error_message=None, endpoint_type=ENDPOINT_BROKER,
            cluster_id=metadata.cluster_id, controller_id=controller, brokers=brokers,
            cluster_authorized_operations=operations)


def _space(path: str) -> tuple[int, int]:
    """(total, usable) bytes of the file system holding path (Java's FileStore values)."""
    st = os.statvfs(path)
    total = st.f_blocks * st.f_frsize
    usable = st.f_bavail * st.f_frsize
    return (total if total >= 0 else LONG_MAX), (usable if usable >= 0 else LONG_MAX)


class DescribeLogDirsHandler:
    MIN_VERSION, MAX_VERSION = 0, 4

    def __init__(self, config: BrokerConfig, log_manager: LogManager) -> None:
        self.config = config
        self.log_manager = log_manager

    def __call__(self, ctx: RequestContext,
                 request: DescribeLogDirsRequest) -> DescribeLogDirsResponse:
        if not ctx.authorize(AclOperation.DESCRIBE, ResourceType.CLUSTER, CLUSTER_NAME):
            return DescribeLogDirsResponse(error_code=ClusterAuthorizationFailedError.code,
                                           results=[])
        manager = self.log_manager
        if request.topics is None:
            wanted = None
        else:
            wanted = {(t.topic, p) for t in request.topics for p in t.partitions}
        results = []
        for configured in self.config.log_dirs:
            path = os.path.abspath(configured)
            log_dir = manager.dirs.get(path) if manager is not None else None
            try:
                if log_dir is None:
                    raise KafkaStorageError(f"Log directory {path} is offline")
                total, usable = _space(path)
            except (KafkaStorageError, OSError) as exc:
                log.warning("Unable to describe replica dirs for %s: %s", path, exc)
                results.append(Result_(error_code=KafkaStorageError.code, log_dir=path,
                                       topics=[], total_bytes=-1, usable_bytes=-1))
                continue
            by_topic: dict[str, list[Partition_]] = {}
            # a replica move's future log is listed in its dir too (is_future_key), its
            # lag the distance to the current log's end (Kafka's getLogEndOffsetLag)
            futures = manager.futures.in_dir(path)
            logs = [(tp, plog, False) for tp, plog in log_dir.logs.items()]
            logs += [(tp, plog, True) for tp, plog in futures.items()]
            for (topic, index), plog, future in sorted(logs, key=lambda e: (e[0], e[2])):
                partitions = by_topic.setdefault(topic, [])
                if wanted is not None and (topic, index) not in wanted:
                    continue  # Kafka still lists the topic, with no partitions
                if future:
                    current = manager.logs.get((topic, index))
                    lag = (current.log_end_offset - plog.log_end_offset
                           if current is not None else -1)
                else:
                    lag = max(plog.high_watermark - plog.log_end_offset, 0)
                partitions.append(Partition_(
                    partition_index=index, partition_size=plog.size_in_bytes(),
                    offset_lag=lag, is_future_key=future))
            results.append(Result_(
                error_code=0, log_dir=path,
                topics=[Topic_(name=t, partitions=p) for t, p in by_topic.items()],
                total_bytes=total, usable_bytes=usable))
        return DescribeLogDirsResponse(error_code=0, results=results)
