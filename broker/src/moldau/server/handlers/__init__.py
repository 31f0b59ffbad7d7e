"""The request handlers, one module per API family, and their composition."""

from __future__ import annotations

from typing import Any

from moldau.protocol.generated.api import ApiKey

from .acls import CreateAclsHandler, DeleteAclsHandler, DescribeAclsHandler
from .alter_replica_log_dirs import AlterReplicaLogDirsHandler
from .api_versions import ApiVersionsHandler
from .broker_to_controller import AllocateProducerIdsHandler, AlterPartitionHandler
from .client_quotas import AlterClientQuotasHandler, DescribeClientQuotasHandler
from .cluster_info import DescribeClusterHandler, DescribeLogDirsHandler
from .configs import AlterConfigsHandler, DescribeConfigsHandler, IncrementalAlterConfigsHandler
from .consumer_group_protocol import ConsumerGroupDescribeHandler, ConsumerGroupHeartbeatHandler
from .controller_requests import (
    ControlledShutdownHandler,
    LeaderAndIsrHandler,
    StopReplicaHandler,
    UpdateMetadataHandler,
)
from .delegation_tokens import (
    CreateDelegationTokenHandler,
    DescribeDelegationTokenHandler,
    ExpireDelegationTokenHandler,
    RenewDelegationTokenHandler,
)
from .describe_producers import DescribeProducersHandler
from .elect_leaders import ElectLeadersHandler
from .envelope import EnvelopeHandler
from .fetch import FetchHandler
from .groups import (
    DeleteGroupsHandler,
    DescribeGroupsHandler,
    FindCoordinatorHandler,
    HeartbeatHandler,
    JoinGroupHandler,
    LeaveGroupHandler,
    ListGroupsHandler,
    OffsetCommitHandler,
    OffsetDeleteHandler,
    OffsetFetchHandler,
    SyncGroupHandler,
)
from .init_producer_id import InitProducerIdHandler
from .list_offsets import ListOffsetsHandler
from .metadata import MetadataHandler
from .produce import ProduceAppends, ProduceHandler
from .reassignments import AlterPartitionReassignmentsHandler, ListPartitionReassignmentsHandler
from .records import DeleteRecordsHandler, OffsetForLeaderEpochHandler
from .sasl import SaslAuthenticateHandler, SaslHandshakeHandler
from .scram_credentials import (
    AlterUserScramCredentialsHandler,
    DescribeUserScramCredentialsHandler,
)
from .services import HandlerServices, Served
from .topics import CreatePartitionsHandler, CreateTopicsHandler, DeleteTopicsHandler
from .transactions import (
    AddOffsetsToTxnHandler,
    AddPartitionsToTxnHandler,
    DescribeTransactionsHandler,
    EndTxnHandler,
    ListTransactionsHandler,
)
from .txn_markers import WriteTxnMarkersHandler
from .txn_offset_commit import TxnOffsetCommitHandler
from .update_features import UpdateFeaturesHandler


def build_handlers(s: HandlerServices) -> tuple[dict[ApiKey, Served], ProduceAppends]:
    """The composition of the request layer: every handler with only the services it
    names (handlers/services.py), by API key (each handler's class declares the versions
    it serves); and the Produce appends both Produce paths share."""
    broker_id = s.state.broker_id
    appends = ProduceAppends(s.metadata, s.replica_manager, s.log_manager, s.topic_stats,
                             s.purgatory)
    control = (s.state, s.metadata, s.partition_states)
    groups = (s.group_coordinator, s.metadata)
    alter_configs = (broker_id, s.metadata, s.zk, s.dynamic_config, s.tls_holders)
    # without a delegation token manager the token APIs answer DELEGATION_TOKEN_AUTH_DISABLED
    tokens = s.delegation_tokens
    built: dict[ApiKey, Any] = {
        ApiKey.PRODUCE: ProduceHandler(appends, s.txn_verifier),
        ApiKey.FETCH: FetchHandler(s.config, s.metadata, s.replica_manager, s.topic_stats,
                                   s.purgatory, s.leader_throttle),
        ApiKey.LIST_OFFSETS: ListOffsetsHandler(s.metadata, s.replica_manager),
        ApiKey.METADATA: MetadataHandler(broker_id, s.config, s.metadata, s.topics),
        ApiKey.LEADER_AND_ISR: LeaderAndIsrHandler(*control),
        ApiKey.STOP_REPLICA: StopReplicaHandler(*control),
        ApiKey.UPDATE_METADATA: UpdateMetadataHandler(*control),
        ApiKey.CONTROLLED_SHUTDOWN: ControlledShutdownHandler(s.controller),
        ApiKey.ALTER_PARTITION: AlterPartitionHandler(s.controller),
        ApiKey.ALLOCATE_PRODUCER_IDS: AllocateProducerIdsHandler(s.controller),
        ApiKey.OFFSET_COMMIT: OffsetCommitHandler(*groups, s.zk),
        ApiKey.OFFSET_FETCH: OffsetFetchHandler(*groups, s.zk),
        ApiKey.FIND_COORDINATOR: FindCoordinatorHandler(*groups, s.topics,
                                                        s.transaction_coordinator),
        ApiKey.JOIN_GROUP: JoinGroupHandler(*groups),
        ApiKey.HEARTBEAT: HeartbeatHandler(*groups),
        ApiKey.LEAVE_GROUP: LeaveGroupHandler(*groups),
        ApiKey.SYNC_GROUP: SyncGroupHandler(*groups),
        ApiKey.DESCRIBE_GROUPS: DescribeGroupsHandler(*groups),
        ApiKey.LIST_GROUPS: ListGroupsHandler(*groups),
        ApiKey.API_VERSIONS: ApiVersionsHandler(s.advertised_versions, s.finalized_features),
        ApiKey.UPDATE_FEATURES: UpdateFeaturesHandler(s.controller, s.zk,
                                                      s.feature_znode_version),
        ApiKey.CREATE_TOPICS: CreateTopicsHandler(s.config, s.metadata, s.zk, s.topics,
                                                  s.dynamic_config, s.controller),
        ApiKey.DELETE_TOPICS: DeleteTopicsHandler(s.config, s.metadata, s.zk, s.controller),
        ApiKey.DELETE_RECORDS: DeleteRecordsHandler(s.metadata, s.replica_manager, s.log_manager),
        ApiKey.INIT_PRODUCER_ID: InitProducerIdHandler(s.producer_ids,
                                                       s.transaction_coordinator),
        ApiKey.ADD_PARTITIONS_TO_TXN: AddPartitionsToTxnHandler(s.transaction_coordinator,
                                                                s.metadata),
        ApiKey.ADD_OFFSETS_TO_TXN: AddOffsetsToTxnHandler(s.transaction_coordinator,
                                                          s.group_coordinator),
        ApiKey.END_TXN: EndTxnHandler(s.transaction_coordinator),
        ApiKey.DESCRIBE_TRANSACTIONS: DescribeTransactionsHandler(s.transaction_coordinator),
        ApiKey.LIST_TRANSACTIONS: ListTransactionsHandler(s.transaction_coordinator),
        ApiKey.OFFSET_FOR_LEADER_EPOCH: OffsetForLeaderEpochHandler(s.metadata, s.replica_manager),
        ApiKey.DESCRIBE_CONFIGS: DescribeConfigsHandler(broker_id, s.metadata, s.zk,
                                                        s.topic_configs, s.dynamic_config),
        ApiKey.ALTER_CONFIGS: AlterConfigsHandler(*alter_configs),
        ApiKey.ALTER_REPLICA_LOG_DIRS: AlterReplicaLogDirsHandler(s.replica_manager),
        ApiKey.DESCRIBE_LOG_DIRS: DescribeLogDirsHandler(s.config, s.log_manager),
        ApiKey.CREATE_PARTITIONS: CreatePartitionsHandler(s.metadata, s.zk, s.topics, s.controller),
        ApiKey.DELETE_GROUPS: DeleteGroupsHandler(*groups),
        ApiKey.ELECT_LEADERS: ElectLeadersHandler(s.controller),
        ApiKey.INCREMENTAL_ALTER_CONFIGS: IncrementalAlterConfigsHandler(*alter_configs),
        ApiKey.ALTER_PARTITION_REASSIGNMENTS: AlterPartitionReassignmentsHandler(s.controller),
        ApiKey.LIST_PARTITION_REASSIGNMENTS: ListPartitionReassignmentsHandler(s.controller),
        ApiKey.OFFSET_DELETE: OffsetDeleteHandler(*groups),
        ApiKey.TXN_OFFSET_COMMIT: TxnOffsetCommitHandler(*groups, s.txn_verifier),
        ApiKey.WRITE_TXN_MARKERS: WriteTxnMarkersHandler(s.config, appends, s.group_coordinator,
                                                         s.txn_verifier),
        ApiKey.DESCRIBE_PRODUCERS: DescribeProducersHandler(s.metadata, s.replica_manager),
        ApiKey.DESCRIBE_CLUSTER: DescribeClusterHandler(s.metadata),
        ApiKey.DESCRIBE_ACLS: DescribeAclsHandler(s.acl_authorizer),
        ApiKey.CREATE_ACLS: CreateAclsHandler(s.acl_authorizer, s.zk),
        ApiKey.DELETE_ACLS: DeleteAclsHandler(s.acl_authorizer, s.zk),
        ApiKey.SASL_HANDSHAKE: SaslHandshakeHandler(),
        ApiKey.SASL_AUTHENTICATE: SaslAuthenticateHandler(),
        ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: DescribeUserScramCredentialsHandler(s.zk),
        ApiKey.ALTER_USER_SCRAM_CREDENTIALS: AlterUserScramCredentialsHandler(s.zk,
                                                                              s.controller),
        ApiKey.DESCRIBE_CLIENT_QUOTAS: DescribeClientQuotasHandler(s.zk),
        ApiKey.ALTER_CLIENT_QUOTAS: AlterClientQuotasHandler(s.zk),
        ApiKey.CREATE_DELEGATION_TOKEN: CreateDelegationTokenHandler(tokens),
        ApiKey.RENEW_DELEGATION_TOKEN: RenewDelegationTokenHandler(tokens),
        ApiKey.EXPIRE_DELEGATION_TOKEN: ExpireDelegationTokenHandler(tokens),
        ApiKey.DESCRIBE_DELEGATION_TOKEN: DescribeDelegationTokenHandler(tokens),
        ApiKey.ENVELOPE: EnvelopeHandler(),
        ApiKey.CONSUMER_GROUP_HEARTBEAT: ConsumerGroupHeartbeatHandler(),
        ApiKey.CONSUMER_GROUP_DESCRIBE: ConsumerGroupDescribeHandler(),
    }
    return built, appends
