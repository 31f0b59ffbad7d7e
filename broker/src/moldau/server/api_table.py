"""The API table: for every API key Moldau serves, its handler class (which declares its
versions), what it authorizes, its quota class, and whether it may come before the
connection has authenticated. Data, not code: server/routes.py registers each handler
with its quota class and authentication setting, which the dispatcher's stages apply
(server/requests.py); a test (broker/tests/server/test_api_table.py) fails when an
advertised key has no complete entry, so an API added later cannot forget one.

The authorization rules are Kafka 3.9's (its KafkaApis, and the "Operations and Resources
on Protocols" table of Kafka's security documentation): the resource and operation each
handler checks through the request context, in the order it asks, and the error a denial
costs. broker/tests/broker/test_acl_per_api.py proves them on a broker with the
AclAuthorizer, API by API.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import TYPE_CHECKING

from moldau.errors import (
    ClusterAuthorizationFailedError,
    DelegationTokenAuthorizationFailedError,
    GroupAuthorizationFailedError,
    TopicAuthorizationFailedError,
    TransactionalIdAuthorizationFailedError,
)
from moldau.protocol.generated.api import ApiKey

from . import handlers as h
from .handlers.services import Served
from .quotas import Quota

if TYPE_CHECKING:
    pass

TOPIC_DENIED = TopicAuthorizationFailedError.code  # 29
GROUP_DENIED = GroupAuthorizationFailedError.code  # 30
CLUSTER_DENIED = ClusterAuthorizationFailedError.code  # 31
TRANSACTIONAL_ID_DENIED = TransactionalIdAuthorizationFailedError.code  # 53
DELEGATION_TOKEN_DENIED = DelegationTokenAuthorizationFailedError.code  # 65


class Scope(enum.Enum):
    """What a denial covers."""

    REQUEST = "the whole request"
    EACH = "each resource or partition named; the rest proceeds"
    FILTER = "resources the principal may not see are left out, without an error"
    FALLBACK = "no error by itself: the check after it decides"


@dataclass(frozen=True)
class Check:
    """One authorization a handler makes: operation on a resource type."""

    resource: str  # Kafka's ResourceType: TOPIC, GROUP, CLUSTER, TRANSACTIONAL_ID, ...
    operation: str  # Kafka's AclOperation: READ, WRITE, CREATE, CLUSTER_ACTION, ...
    denied: int  # the error code a denial answers (0: none, a FILTER or FALLBACK)
    scope: Scope
    when: str = ""  # the condition, where the check does not always apply


@dataclass(frozen=True)
class ApiEntry:
    handler: type[Served]
    checks: tuple[Check, ...]
    quota: Quota = Quota.NORMAL
    before_authentication: bool = False  # only ApiVersions and the SASL handshake

    @property
    def versions(self) -> tuple[int, int]:
        return self.handler.MIN_VERSION, self.handler.MAX_VERSION


def _topic(operation: str, scope: Scope = Scope.EACH, when: str = "") -> Check:
    return Check("TOPIC", operation, TOPIC_DENIED, scope, when)


def _group(operation: str, scope: Scope = Scope.REQUEST, when: str = "") -> Check:
    return Check("GROUP", operation, GROUP_DENIED, scope, when)


def _cluster(operation: str, scope: Scope = Scope.REQUEST, when: str = "") -> Check:
    return Check("CLUSTER", operation, CLUSTER_DENIED, scope, when)


def _fallback(resource: str, operation: str, when: str) -> Check:
    """A check whose denial is no error: the next check is asked instead."""
    return Check(resource, operation, 0, Scope.FALLBACK, when)


def _filter(resource: str, operation: str, when: str) -> Check:
    """A check whose denial leaves something out of the answer, without an error."""
    return Check(resource, operation, 0, Scope.FILTER, when)


_CLUSTER_ACTION = (_cluster("CLUSTER_ACTION"),)
_GROUP_MEMBER = (_group("READ"),)

API_TABLE: dict[ApiKey, ApiEntry] = {
    ApiKey.PRODUCE: ApiEntry(h.ProduceHandler, (
        Check("TRANSACTIONAL_ID", "WRITE", TRANSACTIONAL_ID_DENIED, Scope.REQUEST,
              "a partition's first batch is transactional (a null id is denied too)"),
        _topic("WRITE"))),
    ApiKey.FETCH: ApiEntry(h.FetchHandler, (
        # Kafka answers a follower without CLUSTER_ACTION 29 in every partition, not 31
        Check("CLUSTER", "CLUSTER_ACTION", TOPIC_DENIED, Scope.REQUEST,
              "a follower's fetch (replica id >= 0)"),
        _topic("READ", when="a consumer's fetch"))),
    ApiKey.LIST_OFFSETS: ApiEntry(h.ListOffsetsHandler, (_topic("DESCRIBE"),)),
    ApiKey.METADATA: ApiEntry(h.MetadataHandler, (
        _topic("DESCRIBE", when="named topics"),
        _filter("TOPIC", "DESCRIBE", "the all-topics request"),
        _fallback("CLUSTER", "CREATE", "auto-creation of a missing topic"),
        _topic("CREATE", when="auto-creation, without CREATE on the cluster"),
        _filter("CLUSTER", "DESCRIBE", "the cluster's authorized operations, v8-10 (0 when "
                "denied)"))),
    ApiKey.LEADER_AND_ISR: ApiEntry(h.LeaderAndIsrHandler, _CLUSTER_ACTION, Quota.EXEMPT),
    ApiKey.STOP_REPLICA: ApiEntry(h.StopReplicaHandler, _CLUSTER_ACTION, Quota.EXEMPT),
    ApiKey.UPDATE_METADATA: ApiEntry(h.UpdateMetadataHandler, _CLUSTER_ACTION, Quota.EXEMPT),
    ApiKey.CONTROLLED_SHUTDOWN: ApiEntry(h.ControlledShutdownHandler, _CLUSTER_ACTION,
                                         Quota.EXEMPT),
    # a Kafka broker's requests to the controller (IBP 2.7+ and 3.0+): NOT_CONTROLLER
    # elsewhere, after the authorization; cluster actions, so never throttled
    ApiKey.ALTER_PARTITION: ApiEntry(h.AlterPartitionHandler, _CLUSTER_ACTION, Quota.EXEMPT),
    ApiKey.ALLOCATE_PRODUCER_IDS: ApiEntry(h.AllocateProducerIdsHandler, _CLUSTER_ACTION,
                                           Quota.EXEMPT),
    ApiKey.OFFSET_COMMIT: ApiEntry(h.OffsetCommitHandler, (_group("READ"), _topic("READ"))),
    ApiKey.OFFSET_FETCH: ApiEntry(h.OffsetFetchHandler, (
        _group("DESCRIBE", Scope.EACH, "each group (v8+ names several)"),
        _topic("DESCRIBE", when="named topics"),
        _filter("TOPIC", "DESCRIBE", "all the group's offsets"))),
    ApiKey.FIND_COORDINATOR: ApiEntry(h.FindCoordinatorHandler, (
        _group("DESCRIBE", Scope.EACH, "key type 0"),
        Check("TRANSACTIONAL_ID", "DESCRIBE", TRANSACTIONAL_ID_DENIED, Scope.EACH,
              "key type 1"),
        _cluster("CLUSTER_ACTION", Scope.EACH, "key type 2 (share, v6)"))),
    ApiKey.JOIN_GROUP: ApiEntry(h.JoinGroupHandler, _GROUP_MEMBER),
    ApiKey.HEARTBEAT: ApiEntry(h.HeartbeatHandler, _GROUP_MEMBER),
    ApiKey.LEAVE_GROUP: ApiEntry(h.LeaveGroupHandler, _GROUP_MEMBER),
    ApiKey.SYNC_GROUP: ApiEntry(h.SyncGroupHandler, _GROUP_MEMBER),
    ApiKey.DESCRIBE_GROUPS: ApiEntry(h.DescribeGroupsHandler, (_group("DESCRIBE", Scope.EACH),)),
    ApiKey.LIST_GROUPS: ApiEntry(h.ListGroupsHandler, (
        _fallback("CLUSTER", "DESCRIBE", "every group is listed"),
        _filter("GROUP", "DESCRIBE", "without DESCRIBE on the cluster"))),
    ApiKey.API_VERSIONS: ApiEntry(h.ApiVersionsHandler, (), before_authentication=True),
    ApiKey.CREATE_TOPICS: ApiEntry(h.CreateTopicsHandler, (
        _fallback("CLUSTER", "CREATE", "every topic may be created"),
        _topic("CREATE", when="without CREATE on the cluster"),
        _topic("DESCRIBE_CONFIGS", when="the configs in the answer (else its config error)")),
        Quota.CONTROLLER_MUTATION),
    ApiKey.DELETE_TOPICS: ApiEntry(h.DeleteTopicsHandler, (
        _topic("DESCRIBE", when="topics named by id"),
        _topic("DELETE")),
        Quota.CONTROLLER_MUTATION),
    ApiKey.DELETE_RECORDS: ApiEntry(h.DeleteRecordsHandler, (_topic("DELETE"),)),
    ApiKey.INIT_PRODUCER_ID: ApiEntry(h.InitProducerIdHandler, (
        Check("TRANSACTIONAL_ID", "WRITE", TRANSACTIONAL_ID_DENIED, Scope.REQUEST,
              "a transactional producer"),
        _fallback("CLUSTER", "IDEMPOTENT_WRITE", "an idempotent producer"),
        # authorizeByResourceType: WRITE allowed on some topic; a denial costs 31
        Check("TOPIC", "WRITE", CLUSTER_DENIED, Scope.REQUEST,
              "an idempotent producer without IDEMPOTENT_WRITE: WRITE on any topic"))),
    ApiKey.ADD_PARTITIONS_TO_TXN: ApiEntry(h.AddPartitionsToTxnHandler, (
        _cluster("CLUSTER_ACTION", when="v4+ (a partition leader's batch, KIP-890)"),
        Check("TRANSACTIONAL_ID", "WRITE", TRANSACTIONAL_ID_DENIED, Scope.EACH,
              "v0-3, each transaction"),
        # a denied or missing partition fails the rest with OPERATION_NOT_ATTEMPTED (55)
        _topic("WRITE", when="v0-3, each partition (internal topics are always denied)"))),
    ApiKey.ADD_OFFSETS_TO_TXN: ApiEntry(h.AddOffsetsToTxnHandler, (
        Check("TRANSACTIONAL_ID", "WRITE", TRANSACTIONAL_ID_DENIED, Scope.REQUEST),
        _group("READ"))),
    ApiKey.END_TXN: ApiEntry(h.EndTxnHandler, (
        Check("TRANSACTIONAL_ID", "WRITE", TRANSACTIONAL_ID_DENIED, Scope.REQUEST),)),
    ApiKey.DESCRIBE_TRANSACTIONS: ApiEntry(h.DescribeTransactionsHandler, (
        Check("TRANSACTIONAL_ID", "DESCRIBE", TRANSACTIONAL_ID_DENIED, Scope.EACH),
        _filter("TOPIC", "DESCRIBE", "the partitions of a described transaction"))),
    ApiKey.LIST_TRANSACTIONS: ApiEntry(h.ListTransactionsHandler, (
        _filter("TRANSACTIONAL_ID", "DESCRIBE", "every listed transaction"),)),
    ApiKey.OFFSET_FOR_LEADER_EPOCH: ApiEntry(h.OffsetForLeaderEpochHandler, (
        _fallback("CLUSTER", "CLUSTER_ACTION", "every topic (a follower)"),
        _topic("DESCRIBE", when="without CLUSTER_ACTION (a consumer, KIP-320)"))),
    ApiKey.DESCRIBE_CONFIGS: ApiEntry(h.DescribeConfigsHandler, (
        _cluster("DESCRIBE_CONFIGS", Scope.EACH, "BROKER and BROKER_LOGGER resources"),
        _topic("DESCRIBE_CONFIGS", when="TOPIC resources"))),
    ApiKey.ALTER_CONFIGS: ApiEntry(h.AlterConfigsHandler, (
        _cluster("ALTER_CONFIGS", Scope.EACH, "BROKER resources"),
        _topic("ALTER_CONFIGS", when="TOPIC resources"))),
    ApiKey.ALTER_REPLICA_LOG_DIRS: ApiEntry(h.AlterReplicaLogDirsHandler, (
        _cluster("ALTER", when="a denial answers 31 in every partition"),)),
    ApiKey.DESCRIBE_LOG_DIRS: ApiEntry(h.DescribeLogDirsHandler, (_cluster("DESCRIBE"),)),
    ApiKey.CREATE_PARTITIONS: ApiEntry(h.CreatePartitionsHandler, (_topic("ALTER"),),
                                       Quota.CONTROLLER_MUTATION),
    ApiKey.DELETE_GROUPS: ApiEntry(h.DeleteGroupsHandler, (_group("DELETE", Scope.EACH),)),
    ApiKey.ELECT_LEADERS: ApiEntry(h.ElectLeadersHandler, (_cluster("ALTER"),)),
    ApiKey.INCREMENTAL_ALTER_CONFIGS: ApiEntry(h.IncrementalAlterConfigsHandler, (
        _cluster("ALTER_CONFIGS", Scope.EACH, "BROKER and BROKER_LOGGER resources"),
        _topic("ALTER_CONFIGS", when="TOPIC resources"))),
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: ApiEntry(h.AlterPartitionReassignmentsHandler,
                                                   (_cluster("ALTER"),)),
    ApiKey.LIST_PARTITION_REASSIGNMENTS: ApiEntry(h.ListPartitionReassignmentsHandler,
                                                  (_cluster("DESCRIBE"),)),
    ApiKey.OFFSET_DELETE: ApiEntry(h.OffsetDeleteHandler, (_group("DELETE"), _topic("READ"))),
    ApiKey.TXN_OFFSET_COMMIT: ApiEntry(h.TxnOffsetCommitHandler, (
        Check("TRANSACTIONAL_ID", "WRITE", TRANSACTIONAL_ID_DENIED, Scope.REQUEST),
        _group("READ"), _topic("READ"))),
    # ALTER on the cluster lets kafka-transactions.sh abort a hanging transaction
    ApiKey.WRITE_TXN_MARKERS: ApiEntry(h.WriteTxnMarkersHandler, (
        _fallback("CLUSTER", "ALTER", "an operator's abort (the denial is not logged)"),
        _cluster("CLUSTER_ACTION", when="without ALTER on the cluster (a broker)")),
        Quota.EXEMPT),
    ApiKey.DESCRIBE_PRODUCERS: ApiEntry(h.DescribeProducersHandler, (_topic("READ"),)),
    ApiKey.DESCRIBE_CLUSTER: ApiEntry(h.DescribeClusterHandler, (
        _filter("CLUSTER", "DESCRIBE", "the cluster's authorized operations (0 when denied)"),
    )),
    ApiKey.DESCRIBE_ACLS: ApiEntry(h.DescribeAclsHandler, (_cluster("DESCRIBE"),)),
    ApiKey.CREATE_ACLS: ApiEntry(h.CreateAclsHandler, (_cluster("ALTER"),)),
    ApiKey.DELETE_ACLS: ApiEntry(h.DeleteAclsHandler, (_cluster("ALTER"),)),
    # before authentication the connection's authenticator answers these two; after it,
    # the handlers: a re-authentication's handshake, or ILLEGAL_SASL_STATE
    ApiKey.SASL_HANDSHAKE: ApiEntry(h.SaslHandshakeHandler, (), before_authentication=True),
    ApiKey.SASL_AUTHENTICATE: ApiEntry(h.SaslAuthenticateHandler, (),
                                       before_authentication=True),
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: ApiEntry(h.DescribeUserScramCredentialsHandler,
                                                     (_cluster("DESCRIBE"),)),
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: ApiEntry(h.AlterUserScramCredentialsHandler, (
        _cluster("ALTER", when="on the active controller (another broker answers 41 for "
                 "every user, before authorizing)"),)),
    ApiKey.DESCRIBE_CLIENT_QUOTAS: ApiEntry(h.DescribeClientQuotasHandler,
                                            (_cluster("DESCRIBE_CONFIGS"),)),
    ApiKey.ALTER_CLIENT_QUOTAS: ApiEntry(h.AlterClientQuotasHandler, (
        _cluster("ALTER_CONFIGS", when="a denial answers 31 in every entry"),)),
    # the four token APIs first refuse PLAINTEXT, anonymous SSL and token logins (64)
    ApiKey.CREATE_DELEGATION_TOKEN: ApiEntry(h.CreateDelegationTokenHandler, (
        Check("USER", "CREATE_TOKENS", DELEGATION_TOKEN_DENIED, Scope.REQUEST,
              "a token for another owner (on User:<owner>)"),)),
    # who may renew or expire is the token's own list (owner and renewers, else 63)
    ApiKey.RENEW_DELEGATION_TOKEN: ApiEntry(h.RenewDelegationTokenHandler, ()),
    ApiKey.EXPIRE_DELEGATION_TOKEN: ApiEntry(h.ExpireDelegationTokenHandler, ()),
    ApiKey.DESCRIBE_DELEGATION_TOKEN: ApiEntry(h.DescribeDelegationTokenHandler, (
        _fallback("DELEGATION_TOKEN", "DESCRIBE",
                  "a token the requester neither owns, asked for nor renews"),
        _filter("USER", "DESCRIBE_TOKENS", "such a token, on User:<its owner>"))),
    # ALTER first, then NOT_CONTROLLER on any broker but the active controller
    ApiKey.UPDATE_FEATURES: ApiEntry(h.UpdateFeaturesHandler, (
        _cluster("ALTER", when="a denial is the top-level error"),)),
    # forwarding is not enabled (no KRaft migration): the connection is closed before
    # any authorization (Kafka's CLUSTER_ACTION check comes only after forwarding's)
    ApiKey.ENVELOPE: ApiEntry(h.EnvelopeHandler, (), Quota.EXEMPT),
    # without the new group coordinator (KRaft only) Kafka answers UNSUPPORTED_VERSION
    # before it authorizes (READ, DESCRIBE on the group)
    ApiKey.CONSUMER_GROUP_HEARTBEAT: ApiEntry(h.ConsumerGroupHeartbeatHandler, ()),
    ApiKey.CONSUMER_GROUP_DESCRIBE: ApiEntry(h.ConsumerGroupDescribeHandler, ()),
}

# Allowed before a SASL connection has authenticated (Kafka's SaslServerAuthenticator):
# ApiVersions, SaslHandshake and SaslAuthenticate.
BEFORE_AUTHENTICATION = frozenset({ApiKey.API_VERSIONS, ApiKey.SASL_HANDSHAKE,
                                   ApiKey.SASL_AUTHENTICATE})
