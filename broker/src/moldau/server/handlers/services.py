"""What the request handlers are built from: the broker's services, never the broker.

The broker (the composition root, server/broker.py) fills in `HandlerServices` once its
services exist, and `build_handlers` (handlers/__init__.py) gives each handler only the
ones it names in its constructor, as Kafka's KafkaApis takes its collaborators. A test
builds every handler from fakes of these ports (broker/tests/server/test_handler_ports.py).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from moldau.authorizer.acl_authorizer import AclAuthorizer
    from moldau.cluster.controller import Controller
    from moldau.cluster.zk_async import AsyncZk
    from moldau.coordinator.group.coordinator import GroupCoordinator
    from moldau.coordinator.transaction.coordinator import TransactionCoordinator
    from moldau.metrics.registry import MetricsRegistry
    from moldau.replication.replica_manager import ReplicaManager
    from moldau.replication.throttle import ReplicationThrottle
    from moldau.security.tls import TlsContextHolder
    from moldau.storage.log_manager import LogManager

    from ..broker_metrics import BrokerTopicStats, DelayedOperations, NoTopicStats
    from ..config import BrokerConfig
    from ..delegation_token_manager import DelegationTokenManager
    from ..dynamic_config import DynamicBrokerConfig
    from ..finalized_features import FinalizedFeatures
    from ..metadata_cache import MetadataCache
    from ..partition_states import PartitionStates
    from ..producer_ids import ProducerIdManager
    from ..request_context import RequestContext
    from ..topic_admin import TopicAdmin
    from ..topic_configs import TopicConfigs
    from ..txn_verification import TxnVerifier


@dataclass
class BrokerState:
    """This broker's identity and the epochs a controller's requests are checked against:
    broker_epoch is its registration's (the czxid of /brokers/ids/<id>, -1 before it
    registers), controller_epoch_seen the newest controller epoch it has heard from."""

    broker_id: int
    broker_epoch: int = -1
    controller_epoch_seen: int = 0


@dataclass(frozen=True)
class HandlerServices:
    """Everything a handler may be built with (build_handlers picks per handler)."""

    config: BrokerConfig
    state: BrokerState
    metadata: MetadataCache
    zk: AsyncZk
    log_manager: LogManager
    replica_manager: ReplicaManager
    group_coordinator: GroupCoordinator
    transaction_coordinator: TransactionCoordinator
    topics: TopicAdmin
    topic_configs: TopicConfigs
    dynamic_config: DynamicBrokerConfig
    producer_ids: ProducerIdManager
    topic_stats: BrokerTopicStats | NoTopicStats
    purgatory: Mapping[str, DelayedOperations]
    leader_throttle: ReplicationThrottle
    metrics: MetricsRegistry
    partition_states: PartitionStates
    # the controller starts after the handlers exist; None until then and when stopped
    controller: Callable[[], Controller | None]
    tls_holders: Mapping[str, TlsContextHolder]
    # what ApiVersions announces: the dispatcher's registrations, known once all are in
    advertised_versions: Callable[[], dict[int, tuple[int, int]]]
    # Kafka's AclAuthorizer when authorizer.class.name names it; None: no authorizer
    acl_authorizer: AclAuthorizer | None = None
    # the delegation tokens (server/delegation_token_manager.py); None: answered 61
    delegation_tokens: DelegationTokenManager | None = None
    # KIP-890 part 1's leader-side verification (server/txn_verification.py); None: off
    txn_verifier: TxnVerifier | None = None
    # /feature as this broker last read it (ApiVersions v3+); None: never read
    finalized_features: FinalizedFeatures | None = None
    # the format of /feature the controller writes for this IBP (zk_features.V1 or V2)
    feature_znode_version: int = 2


class Served(Protocol):
    """A handler: it declares the versions it serves, and answers a request."""

    MIN_VERSION: int
    MAX_VERSION: int

    def __call__(self, ctx: RequestContext,  # Any: each its own request and response class
                 request: Any) -> Any: ...


def active_controller(controller: Callable[[], Controller | None]) -> Controller | None:
    """The controller when this broker is the active one, else None."""
    current = controller()
    return current if current is not None and current.active else None

