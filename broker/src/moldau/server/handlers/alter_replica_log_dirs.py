"""AlterReplicaLogDirs (34): move replicas of this broker to other dirs of its
`log.dirs` (kafka-reassign-partitions.sh with log_dirs, AdminClient.alterReplicaLogDirs),
as Kafka's KafkaApis and ReplicaManager.alterReplicaLogDirs: ALTER on the cluster, else
CLUSTER_AUTHORIZATION_FAILED for every partition; the moves themselves are
replication/alter_log_dirs.py's and storage/future_logs.py's."""

from __future__ import annotations

from typing import TYPE_CHECKING

from moldau.errors import ClusterAuthorizationFailedError
from moldau.protocol.generated.alter_replica_log_dirs_response import (
    AlterReplicaLogDirsResponse,
)
from moldau.security.acls import AclOperation, ResourceType

from .cluster_info import CLUSTER_NAME

if TYPE_CHECKING:
    from moldau.protocol.generated.alter_replica_log_dirs_request import (
        AlterReplicaLogDirsRequest,
    )
    from moldau.replication.replica_manager import ReplicaManager

    from ..requests import RequestContext

Topic_ = AlterReplicaLogDirsResponse.AlterReplicaLogDirTopicResult
Partition_ = AlterReplicaLogDirsResponse.AlterReplicaLogDirPartitionResult


class AlterReplicaLogDirsHandler:
    MIN_VERSION, MAX_VERSION = 0, 2

    def __init__(self, replica_manager: ReplicaManager) -> None:
        self.replica_manager = replica_manager

    def __call__(self, ctx: RequestContext,
                 request: AlterReplicaLogDirsRequest) -> AlterReplicaLogDirsResponse:
        # Kafka reads the request into a map: a partition named under two dirs goes to
        # the last one
        wanted: dict[tuple[str, int], str] = {}
        for entry in request.dirs:
            for topic in entry.topics:
                for index in topic.partitions:
                    wanted.pop((topic.name, index), None)
                    wanted[(topic.name, index)] = entry.path
        if ctx.authorize(AclOperation.ALTER, ResourceType.CLUSTER, CLUSTER_NAME):
            mover = self.replica_manager.log_dir_mover
            errors = {tp: mover.alter(tp, path) for tp, path in wanted.items()}
        else:
            errors = dict.fromkeys(wanted, ClusterAuthorizationFailedError.code)
        by_topic: dict[str, list[Partition_]] = {}
        for (topic, index), code in errors.items():
            by_topic.setdefault(topic, []).append(
                Partition_(partition_index=index, error_code=code))
        return AlterReplicaLogDirsResponse(
            results=[Topic_(topic_name=t, partitions=ps) for t, ps in by_topic.items()])
