"""One broker process: startup, wiring and shutdown (Kafka's KafkaServer).

Startup, in Kafka's order: connect to ZooKeeper (or exit after
zookeeper.connection.timeout.ms), create the persistent paths and the cluster id, settle
the broker id (meta.properties, or generated from /brokers/seqid), load the logs, open
the listeners, register /brokers/ids/<id>, start the controller election. Shutdown on
SIGTERM: stop accepting, close connections, resign, deregister, flush and checkpoint
the logs and mark the clean shutdown.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable
from typing import Any, TypeVar

from moldau.authorizer.acl_authorizer import AclAuthorizer, AclAuthorizerConfig
from moldau.cluster import zk_acls, zk_data, zk_features, zk_sasl, zk_tls
from moldau.cluster.config_changes import ConfigChangeListener
from moldau.cluster.controller import Controller
from moldau.cluster.controller_events import Elect
from moldau.cluster.zk_async import AsyncZk
from moldau.cluster.zk_client import (
    KafkaZkClient,
    ZkNodeExistsError,
    ZooKeeperUnavailableError,
)
from moldau.coordinator.group.coordinator import CoordinatorConfig, GroupCoordinator
from moldau.coordinator.group.offsets_log import OFFSETS_TOPIC, OffsetsLog
from moldau.coordinator.transaction.config import TransactionConfig
from moldau.coordinator.transaction.coordinator import TransactionCoordinator
from moldau.coordinator.transaction.partitioning import TRANSACTION_STATE_TOPIC
from moldau.coordinator.transaction.txn_log import TransactionLog
from moldau.metrics.http import METRICS_HOST_ENV, METRICS_PORT_ENV, MetricsServer
from moldau.metrics.loop_idle import LoopIdle
from moldau.metrics.registry import TICK_S, MetricsRegistry
from moldau.metrics.runtime import stop_runtime, watch_runtime
from moldau.replication.alter_log_dirs import IO_RATE
from moldau.replication.protocol_versions import at_least, parse, versions_for
from moldau.replication.replica_fetcher import FetcherConfig, ReplicaFetcherManager
from moldau.replication.replica_manager import Partition, ReplicaManager
from moldau.replication.throttle import (
    FOLLOWER,
    LEADER,
    ByteRateQuota,
    ReplicationThrottle,
    rate_reader,
)
from moldau.security.acls import parse_super_users
from moldau.security.ssl_settings import TlsConfigError
from moldau.storage import checkpoints
from moldau.storage.log_manager import LogManager, ManagerConfig

from .broker_metrics import CONTROLLER as CONTROLLER_DOMAIN
from .broker_metrics import SERVER as SERVER_DOMAIN
from .broker_metrics import (
    BrokerTopicStats,
    MetricSources,
    NoTopicStats,
    metrics_enabled,
    register_broker_metrics,
)
from .client_quota_configs import ClientQuotaConfigs
from .config import ACL_AUTHORIZER, BrokerConfig
from .connection_limit_configs import connection_limits, is_connection_limit_key
from .connection_metrics import register_connection_metrics
from .controlled_shutdown import ShutdownServices, controlled_shutdown
from .controller_channel import NetworkControllerChannel
from .delegation_token_manager import DelegationTokenManager, TokenSettings
from .dynamic_config import DynamicBrokerConfig, apply_log_defaults
from .finalized_features import FinalizedFeatures
from .handlers.services import BrokerState, HandlerServices
from .listener_security import ListenerSecurity
from .metadata_cache import MetadataCache
from .network import ConnectionLimits, SocketServer, SocketSettings
from .partition_states import IsrWriter, PartitionStates
from .producer_ids import ProducerIdManager
from .quota_config_handler import QuotaConfigHandler
from .quotas import install_client_quotas
from .rate_sensors import WindowConfig
from .request_metrics import RequestMetrics
from .requests import RequestDispatcher
from .routes import register_handlers
from .sasl_authenticator import authentication_beans
from .startup_error import StartupError
from .topic_admin import TopicAdmin
from .topic_configs import TopicConfigs
from .txn_marker_channel import TxnMarkerChannel
from .txn_metrics import TransactionMetricSources, register_transaction_metrics
from .txn_verification import TxnVerifier, network_verifier
from .user_configs import UserConfigs

log = logging.getLogger("kafka.server.KafkaServer")
T = TypeVar("T")

__all__ = ["Broker", "StartupError"]


class Broker:
    def __init__(self, config: BrokerConfig) -> None:
        self.config = config
        self.broker_id = config.broker_id
        self.cluster_id = ""
        # the registration's broker epoch and the newest controller epoch heard from
        self.state = BrokerState(config.broker_id)
        self.versions = versions_for(config["inter.broker.protocol.version"])
        self.fetchers: ReplicaFetcherManager | None = None
        self.leader_throttle: ReplicationThrottle | None = None
        # partitions whose log was on a failed log dir: never recreated elsewhere
        self.offline_partitions: set[tuple[str, int]] = set()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._background: set[asyncio.Future[Any]] = set()  # held until done
        self._sample_idle: Callable[[], None] = lambda: None
        self.controller_channel: NetworkControllerChannel | None = None
        self.zk: AsyncZk | None = None
        self.metadata = MetadataCache(self.broker_id)
        self.log_manager: LogManager | None = None
        self.replica_manager: ReplicaManager = None  # type: ignore[assignment]
        self.group_coordinator: GroupCoordinator = None  # type: ignore[assignment]
        self.partition_states: PartitionStates = None  # type: ignore[assignment]
        self.transaction_coordinator: TransactionCoordinator | None = None
        self.txn_marker_channel: TxnMarkerChannel | None = None
        self.txn_verifier: TxnVerifier | None = None
        self.dispatcher = RequestDispatcher()
        self.metrics = MetricsRegistry()
        enabled = metrics_enabled()
        self.topic_stats = (BrokerTopicStats if enabled else NoTopicStats)(self.metrics)
        self.dispatcher.metrics = RequestMetrics(self.metrics) if enabled else None
        # TLS and SASL of the listeners; a SASL setting Moldau cannot honour stops here
        self.security = ListenerSecurity(config, os.environ.get("KAFKA_OPTS", ""))
        self.tls_holders = self.security.tls_holders
        self.metrics.add_provider(lambda: authentication_beans(self.security.gates))
        self.metrics_server: MetricsServer | None = None
        self.socket_server: SocketServer | None = None
        self.controller: Controller | None = None
        self.finalized_features = FinalizedFeatures()  # /feature, read by a watch
        # the format of /feature a controller on this IBP writes (V2 from IBP 3.3-IV0)
        self.feature_znode_version = zk_features.znode_version(
            at_least(parse(config["inter.broker.protocol.version"]), "3.3-IV0"))
        self.purgatory = register_broker_metrics(MetricSources(
            self.metrics, self.tls_holders, self.offline_partitions,
            replica_manager=lambda: self.replica_manager,
            log_manager=lambda: self.log_manager, fetchers=lambda: self.fetchers,
            controller=lambda: self.controller, socket_server=lambda: self.socket_server))
        self.txn_load_times = register_transaction_metrics(TransactionMetricSources(
            self.metrics, replica_manager=lambda: self.replica_manager,
            coordinator=lambda: self.transaction_coordinator,
            channel=lambda: self.txn_marker_channel,
            max_transaction_timeout_ms=config["transaction.max.timeout.ms"],
            window=WindowConfig.of(config["metrics.num.samples"],
                                   config["metrics.sample.window.ms"] / 1000)))
        self._runtime: Any = None  # the loop-lag probe and GC timing (metrics.runtime)
        self.topics: TopicAdmin | None = None
        self.topic_configs = TopicConfigs(config)
        self.producer_ids = ProducerIdManager(self._allocate_producer_ids)
        self._maintenance: asyncio.Task[None] | None = None
        self.config_changes: ConfigChangeListener | None = None
        self.dynamic_config: DynamicBrokerConfig | None = None
        self.acl_authorizer: AclAuthorizer | None = None
        self.user_configs: UserConfigs | None = None
        # the live client quota configs (users, client ids, ips): the quota managers and
        # the connection limits read them; quota_config_handler fills them from ZooKeeper
        self.client_quota_configs = ClientQuotaConfigs()
        # the client quotas' enforcement follows them (server/quotas.py)
        self.client_quotas = install_client_quotas(self.dispatcher, self.client_quota_configs,
                                                   config)
        self.metrics.add_provider(self.client_quotas.beans)
        self.quota_config_handler: QuotaConfigHandler | None = None
        self.delegation_tokens: DelegationTokenManager | None = None
        self._stopped = asyncio.Event()
        self.started = False

    # --- startup ----------------------------------------------------------------------

    @property
    def connected_zk(self) -> AsyncZk:
        """The ZooKeeper client, for what runs after start() connected it."""
        return self.started_part(self.zk)

    @staticmethod
    def started_part(part: T | None) -> T:
        """A part start() creates, for code that runs only after it did."""
        if part is None:
            raise RuntimeError("the broker has not started")
        return part

    async def start(self) -> None:
        config = self.config
        log.info("starting")
        for warning in config.warnings:
            log.warning(warning)
        log.info(config.dump())
        await self._connect_zookeeper()
        self.cluster_id = await self.connected_zk.call(
            self.connected_zk.client.get_or_create_cluster_id)
        log.info("Cluster ID = %s", self.cluster_id)
        self.broker_id = await self._settle_broker_id()
        self.state.broker_id = self.broker_id
        # dynamic broker configs (/config/brokers/<id> and <default>) precede the file
        self._loop = asyncio.get_running_loop()
        self._watch_loop_idle(self._loop)
        self._runtime = watch_runtime(self.metrics)
        self.dynamic_config = DynamicBrokerConfig(config, self.broker_id)
        self.dynamic_config.bind(self.connected_zk)
        await self.dynamic_config.load(self.connected_zk)
        self.security.use_dynamic_settings(self.dynamic_config.listener_ssl_settings)
        self.topic_configs.set_broker_defaults(self.dynamic_config.log_config())
        self.metadata = MetadataCache(self.broker_id)
        self.metadata.cluster_id = self.cluster_id
        self.topics = TopicAdmin(config, self.metadata, self.connected_zk)
        await self.topic_configs.load(self.connected_zk)
        self.log_manager = await asyncio.get_running_loop().run_in_executor(
            None, self._open_logs)
        isr_writer = IsrWriter(self.broker_id, self.connected_zk)
        self.replica_manager = ReplicaManager(self.broker_id, self.log_manager,
                                              isr_writer=isr_writer)
        rm = self.replica_manager
        rm.log_dir_mover.quota = ByteRateQuota(rate_reader(self.dynamic_config.effective,
                                                           IO_RATE))
        for attribute, name in (("isr_expands", "IsrExpandsPerSec"),
                                ("isr_shrinks", "IsrShrinksPerSec"),
                                ("failed_isr_updates", "FailedIsrUpdatesPerSec")):
            setattr(rm, attribute, self.metrics.meter(SERVER_DOMAIN, "ReplicaManager", name))
        self.leader_throttle = self._throttle(LEADER)
        self.fetchers = self._replica_fetchers()
        self.group_coordinator = self._group_coordinator()
        self.transaction_coordinator = self._transaction_coordinator()
        self.partition_states = PartitionStates(
            self.broker_id, self.connected_zk, self.metadata, self.replica_manager, self.fetchers,
            self.group_coordinator, self.topic_configs, self.offline_partitions,
            self.transaction_coordinator)
        # the ACLs are in memory before any listener opens (Kafka's authorizer start)
        self.acl_authorizer = await self._start_authorizer()
        if self.acl_authorizer is not None:
            self.dispatcher.authorizer = self.acl_authorizer
        # and the SCRAM credentials (Kafka's UserConfigHandler)
        self.user_configs = UserConfigs(self.connected_zk, self.security.credentials)
        await self.user_configs.load_all()
        # and the client quotas (Kafka's ClientIdConfigHandler, UserConfigHandler, IpConfigHandler)
        self.quota_config_handler = QuotaConfigHandler(self.connected_zk,
                                                       self.client_quota_configs)
        await self.quota_config_handler.load_all()
        # and the delegation tokens (Kafka's DelegationTokenManagerZk.startup)
        self.delegation_tokens = DelegationTokenManager(
            TokenSettings.from_config(config), self.connected_zk, self.security.tokens,
            lambda: self.controller)
        await self.delegation_tokens.start()
        self.txn_verifier = network_verifier(config, self.broker_id, self.metadata,
                                             self.security.inter_broker_client, self.metrics)
        register_handlers(self.dispatcher, self._handler_services())
        self.socket_server = SocketServer(
            self.dispatcher,
            max_request_size=config["socket.request.max.bytes"],
            queued_max_requests=config["queued.max.requests"],
            queued_max_request_bytes=config["queued.max.request.bytes"],
            principal_builder=self.security.principal,
            settings=SocketSettings.from_config(config),
        )
        self.socket_server.limits = self._connection_limits()
        self.socket_server.use_ip_rates(self.client_quota_configs.ip_connection_rates)
        register_connection_metrics(self.metrics, self.socket_server)
        if self.dispatcher.metrics is not None:
            self.socket_server.on_sent = RequestMetrics.sent
        listeners = self.security.listeners(self.dispatcher.serve,
                                            self.dispatcher.advertised_versions)
        self.socket_server.sasl_gates.update(self.security.gates)
        await self.socket_server.start(listeners)
        if os.environ.get(METRICS_PORT_ENV):
            self.metrics_server = MetricsServer(
                self.metrics, os.environ.get(METRICS_HOST_ENV, "127.0.0.1"),
                int(os.environ[METRICS_PORT_ENV]))
            await self.metrics_server.start()
        await self._register()
        self.config_changes = ConfigChangeListener(self.connected_zk)
        self.config_changes.add_handler(self._on_config_change)
        self.config_changes.add_handler(self.dynamic_config.on_change)
        self.config_changes.add_handler(self.user_configs.on_config_change)
        self.config_changes.add_handler(self.quota_config_handler.on_config_change)
        self.dynamic_config.on_log_defaults_change(lambda lc: apply_log_defaults(
            lc, self.topic_configs, self.log_manager, self.replica_manager))
        self.dynamic_config.on_listener_ssl_change(self.security.reload_listener_tls)
        self.dynamic_config.on_config_change(self._on_dynamic_broker_config)
        self.socket_server.limits = self._connection_limits()  # with ZooKeeper's values
        await self.config_changes.start()
        await self.finalized_features.start(self.connected_zk)
        self.controller_channel = NetworkControllerChannel(
            self.broker_id, config, self.versions, self.security.controller_client,
            self.partition_states, self.metadata, lambda: self.controller)
        self.controller = Controller(
            self.broker_id, self.connected_zk, self.controller_channel,
            delete_topic_enable=config["delete.topic.enable"],
            unclean_election=config["unclean.leader.election.enable"],
            leader_rebalance=(config["leader.imbalance.check.interval.seconds"],
                              config["leader.imbalance.per.broker.percentage"])
            if config["auto.leader.rebalance.enable"] else None,
            feature_znode_version=self.feature_znode_version)
        stats = "ControllerStats"
        self.controller.on_election_round = self.metrics.timer(
            CONTROLLER_DOMAIN, stats, "LeaderElectionRateAndTimeMs").update
        self.controller.on_unclean_election = self.metrics.meter(
            CONTROLLER_DOMAIN, stats, "UncleanLeaderElectionsPerSec").mark
        await self.controller.start()
        self._maintenance = asyncio.ensure_future(self._run_maintenance())
        self.started = True
        log.info("[KafkaServer id=%d] started", self.broker_id)

    def _handler_services(self) -> HandlerServices:
        assert self.zk is not None and self.log_manager is not None
        assert self.dynamic_config is not None and self.leader_throttle is not None
        assert self.topics is not None
        return HandlerServices(
            config=self.config, state=self.state, metadata=self.metadata, zk=self.zk,
            log_manager=self.log_manager, replica_manager=self.replica_manager,
            group_coordinator=self.group_coordinator,
            transaction_coordinator=self.started_part(self.transaction_coordinator),
            topics=self.topics,
            topic_configs=self.topic_configs, dynamic_config=self.dynamic_config,
            producer_ids=self.producer_ids, topic_stats=self.topic_stats,
            purgatory=self.purgatory, leader_throttle=self.leader_throttle,
            metrics=self.metrics, partition_states=self.partition_states,
            controller=lambda: self.controller, tls_holders=self.tls_holders,
            advertised_versions=self.dispatcher.advertised_versions,
            acl_authorizer=self.acl_authorizer, delegation_tokens=self.delegation_tokens,
            txn_verifier=self.txn_verifier, finalized_features=self.finalized_features,
            feature_znode_version=self.feature_znode_version)

    async def _start_authorizer(self) -> AclAuthorizer | None:
        """Kafka's AclAuthorizer when authorizer.class.name names it (the config refuses
        any other class), on this broker's ZooKeeper session, its ACLs loaded."""
        config = self.config
        if config["authorizer.class.name"] != ACL_AUTHORIZER:
            return None
        zk = self.connected_zk
        authorizer = AclAuthorizer.from_zk_client(zk.client, AclAuthorizerConfig(
            parse_super_users(config["super.users"]),
            config["allow.everyone.if.no.acl.found"]))
        await zk.call(authorizer.start)
        return authorizer

    def _group_coordinator(self) -> GroupCoordinator:
        c = self.config
        offsets_log = OffsetsLog(lambda: self.replica_manager,
                                 compression=c["offsets.topic.compression.codec"],
                                 commit_timeout_ms=c["offsets.commit.timeout.ms"],
                                 load_buffer_size=c["offsets.load.buffer.size"])
        coordinator = GroupCoordinator(CoordinatorConfig(
            offsets_partitions=c["offsets.topic.num.partitions"],
            min_session_timeout_ms=c["group.min.session.timeout.ms"],
            max_session_timeout_ms=c["group.max.session.timeout.ms"],
            initial_rebalance_delay_ms=c["group.initial.rebalance.delay.ms"],
            max_group_size=c["group.max.size"],
            offset_metadata_max_bytes=c["offset.metadata.max.bytes"],
            offsets_retention_ms=c["offsets.retention.minutes"] * 60 * 1000,
            offsets_retention_check_interval_ms=c["offsets.retention.check.interval.ms"],
        ), offsets_log, asyncio.get_running_loop())
        coordinator.named_leader = self._named_offsets_leader
        return coordinator

    def _transaction_coordinator(self) -> TransactionCoordinator:
        """The transaction coordinator over __transaction_state, with the marker channel
        it writes its markers through; its timers run from here on (Kafka's startup)."""
        c = self.config
        self.txn_marker_channel = TxnMarkerChannel(
            self.broker_id, c.inter_broker_listener_name, self.metadata,
            self.security.inter_broker_client,
            request_timeout_s=c["request.timeout.ms"] / 1000,
            connect_timeout_s=c["socket.connection.setup.timeout.max.ms"] / 1000)
        coordinator = TransactionCoordinator(TransactionConfig(
            transactional_id_expiration_ms=c["transactional.id.expiration.ms"],
            max_timeout_ms=c["transaction.max.timeout.ms"],
            num_partitions=c["transaction.state.log.num.partitions"],
            replication_factor=c["transaction.state.log.replication.factor"],
            segment_bytes=c["transaction.state.log.segment.bytes"],
            load_buffer_size=c["transaction.state.log.load.buffer.size"],
            min_insync_replicas=c["transaction.state.log.min.isr"],
            abort_timed_out_interval_ms=c[
                "transaction.abort.timed.out.transaction.cleanup.interval.ms"],
            remove_expired_interval_ms=c[
                "transaction.remove.expired.transaction.cleanup.interval.ms"],
            request_timeout_ms=c["request.timeout.ms"],
        ), TransactionLog(lambda: self.replica_manager), self.txn_marker_channel,
            self.producer_ids.next_id)
        coordinator.state.on_load_time = self.txn_load_times.record
        coordinator.start()
        return coordinator

    def _named_offsets_leader(self, partition: int) -> bool:
        info = self.metadata.partition(OFFSETS_TOPIC, partition)
        return info is not None and info.leader == self.broker_id

    def _replica_fetchers(self) -> ReplicaFetcherManager:
        c = self.config
        listener = c.inter_broker_listener_name
        return ReplicaFetcherManager(
            FetcherConfig(
                broker_id=self.broker_id,
                num_fetchers=c["num.replica.fetchers"],
                max_wait_ms=c["replica.fetch.wait.max.ms"],
                min_bytes=c["replica.fetch.min.bytes"],
                max_bytes=c["replica.fetch.response.max.bytes"],
                partition_max_bytes=c["replica.fetch.max.bytes"],
                backoff_ms=c["replica.fetch.backoff.ms"],
                socket_timeout_ms=c["replica.socket.timeout.ms"],
                socket_receive_buffer_bytes=c["replica.socket.receive.buffer.bytes"],
                connection_setup_timeout_ms=c["socket.connection.setup.timeout.ms"],
                connection_setup_timeout_max_ms=c["socket.connection.setup.timeout.max.ms"],
            ),
            self.versions,
            lambda broker_id: self.metadata.endpoint(broker_id, listener),
            self.security.inter_broker_client,
            self._follower_appended,
            self._throttle(FOLLOWER),
            lambda partition, exc: self.log_manager.handle_storage_error(  # type: ignore[union-attr]
                partition.log, exc),
        )

    def _count_session_events(self, client: KafkaZkClient) -> None:
        """SessionExpireListener's meters: connects, disconnects and expired sessions."""
        def meter(name: str) -> Callable[[], None]:
            m = self.metrics.meter(SERVER_DOMAIN, "SessionExpireListener", name)

            def mark() -> None:  # kazoo calls it from its thread
                loop.call_soon_threadsafe(m.mark)
            return mark

        loop = asyncio.get_running_loop()
        by_state = {"CONNECTED": meter("ZooKeeperSyncConnectsPerSec"),
                    "SUSPENDED": meter("ZooKeeperDisconnectsPerSec")}
        expired = meter("ZooKeeperExpiresPerSec")
        client.add_state_listener(lambda state: by_state.get(state, lambda: None)())
        client.add_session_listener(lambda _session_id: expired())

    def _watch_loop_idle(self, loop: asyncio.AbstractEventLoop) -> None:
        """NetworkProcessorAvgIdlePercent (a gauge) and RequestHandlerAvgIdlePercent (a
        meter of idle seconds per second, as Kafka's is of idle nanoseconds per ns)."""
        idle = LoopIdle(loop)
        if not idle.supported:
            return
        handler_idle = self.metrics.meter(SERVER_DOMAIN, "KafkaRequestHandlerPool",
                                          "RequestHandlerAvgIdlePercent")
        self.metrics.gauge("kafka.network", "SocketServer", "NetworkProcessorAvgIdlePercent",
                           lambda: idle.ratio)
        self._sample_idle = lambda: handler_idle.mark(idle.sample())

    def _follower_appended(self, partition: Partition, size: int) -> None:
        self.topic_stats.mark_broker("ReplicationBytesInPerSec", size)
        if self.broker_id in partition.state.adding:  # a replica a reassignment adds
            self.topic_stats.mark_broker("ReassignmentBytesInPerSec", size)
        partition.appended()

    def _throttle(self, side: str) -> ReplicationThrottle:
        """The leader or follower replication throttle (rates from the dynamic config)."""
        assert self.dynamic_config is not None
        return ReplicationThrottle(side, self.broker_id, self.topic_configs.log_config,
                                   rate_reader(self.dynamic_config.effective,
                                               f"{side}.replication.throttled.rate"))

    async def _connect_zookeeper(self) -> None:
        zk_config = self.config.zookeeper
        assert zk_config is not None
        try:
            # SASL to ZooKeeper: the JAAS `Client` section of KAFKA_OPTS, as Kafka reads it
            sasl = zk_sasl.settings_from_environment()
            zk_acls.check_secure_acls(self.config.values, sasl)
            tls_context = zk_tls.StoreWatchingContext.of(self.config.values)
        except (TlsConfigError, zk_sasl.ZkSaslConfigError, zk_acls.ZkAclConfigError) as exc:
            raise StartupError(f"ZooKeeper client: {exc}") from exc
        if sasl.login is not None:
            log.info("ZooKeeper client authenticates with %s", sasl.login.describe())
        client = KafkaZkClient(
            zk_config.connect_string, zk_config.chroot,
            session_timeout_ms=self.config["zookeeper.session.timeout.ms"],
            connection_timeout_ms=self.config["zookeeper.connection.timeout.ms"],
            tls_context=tls_context, secure_acls=self.config["zookeeper.set.acl"],
            max_in_flight=self.config["zookeeper.max.in.flight.requests"],
            sasl=sasl.login,
        )
        self.zk = AsyncZk(client, asyncio.get_running_loop())
        self._count_session_events(client)
        self.zk.on_latency = self.metrics.histogram(
            SERVER_DOMAIN, "ZooKeeperClientMetrics", "ZooKeeperRequestLatencyMs").update
        try:
            await self.zk.start()
        except (ZooKeeperUnavailableError, zk_sasl.ZkAuthenticationError) as exc:
            raise StartupError(str(exc)) from exc
        await self.zk.call(self.zk.client.ensure_persistent_paths)

    async def _settle_broker_id(self) -> int:
        configured = self.config.broker_id
        stored: set[int] = set()
        for path in self.config.log_dirs:
            try:
                meta = checkpoints.read_meta_properties(path)
            except (OSError, checkpoints.MetaPropertiesError) as exc:
                raise StartupError(f"cannot read meta.properties in {path}: {exc}") from exc
            if meta is not None and meta.broker_id is not None:
                stored.add(meta.broker_id)
        if len(stored) > 1:
            raise StartupError(f"the log dirs hold different broker ids {sorted(stored)} in "
                               "meta.properties")
        if configured >= 0:
            if stored and configured not in stored:
                raise StartupError(
                    f"Configured broker.id {configured} doesn't match stored broker.id "
                    f"{stored.pop()} in meta.properties. If you moved your data, make sure "
                    "your configured broker.id matches.")
            return configured
        if stored:
            return stored.pop()
        generated = await self.connected_zk.call(self.connected_zk.client.generate_broker_id,
                                                 self.config["reserved.broker.max.id"])
        log.info("Generated broker id %d from /brokers/seqid", generated)
        return generated

    def _open_logs(self) -> LogManager:
        c = self.config
        manager_config = ManagerConfig(
            log_dirs=c.log_dirs,
            broker_id=self.broker_id,
            cluster_id=self.cluster_id,
            retention_check_interval_ms=c["log.retention.check.interval.ms"],
            initial_task_delay_ms=c["log.initial.task.delay.ms"],
            flush_offset_checkpoint_interval_ms=c["log.flush.offset.checkpoint.interval.ms"],
            flush_start_offset_checkpoint_interval_ms=c[
                "log.flush.start.offset.checkpoint.interval.ms"],
            high_watermark_checkpoint_interval_ms=c[
                "replica.high.watermark.checkpoint.interval.ms"],
            producer_id_expiration_ms=c["producer.id.expiration.ms"],
            producer_id_expiration_check_interval_ms=c[
                "producer.id.expiration.check.interval.ms"],
            flush_scheduler_interval_ms=c["log.flush.scheduler.interval.ms"],
            log_cleaner_enable=c["log.cleaner.enable"],
            log_cleaner_backoff_ms=c["log.cleaner.backoff.ms"],
            log_cleaner_threads=c["log.cleaner.threads"],
            log_cleaner_io_max_bytes_per_second=c["log.cleaner.io.max.bytes.per.second"],
            log_cleaner_dedupe_buffer_size=c["log.cleaner.dedupe.buffer.size"],
            log_cleaner_io_buffer_load_factor=c["log.cleaner.io.buffer.load.factor"],
            file_worker_thread=True,  # fsyncs and file deletions would stall the loop
        )
        try:
            return LogManager(manager_config, self.topic_configs.default,
                              topic_configs=self.topic_configs.log_config,
                              on_dir_failure=self._on_dir_failure)
        except Exception as exc:
            raise StartupError(f"cannot open the log dirs {c.log_dirs}: {exc}") from exc

    def registration(self) -> zk_data.BrokerRegistration:
        """Our /brokers/ids/<id> payload: advertised endpoints with the bound ports (a
        listener on port 0 gets one from the kernel, which tests use)."""
        assert self.socket_server is not None
        bound = {lst.name: lst.bound_port for lst in self.socket_server.listeners}
        endpoints = []
        for ep in self.config.advertised_listeners:
            port = ep.port or bound.get(ep.listener, ep.port)
            host = ep.host or _canonical_host()
            endpoints.append(zk_data.EndPoint(ep.listener, host, port, ep.security_protocol))
        return zk_data.BrokerRegistration(
            id=self.broker_id, endpoints=endpoints, rack=self.config["broker.rack"],
            moldau_host=self.config["moldau.broker.host"])

    async def _register(self) -> None:
        """Register in /brokers/ids. After a crash or a power loss the previous run's
        registration lives until its ZooKeeper session expires: Kafka fails at once (and
        systemd restarts it until the session is gone); this broker waits that long,
        then fails with Kafka's message if the id is still taken."""
        reg = self.registration()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.config["zookeeper.session.timeout.ms"] / 1000 + 5
        while True:
            try:
                self.state.broker_epoch = await self.connected_zk.call(
                    self.connected_zk.client.register_broker, reg)
                break
            except ZkNodeExistsError as exc:
                if loop.time() > deadline:
                    raise StartupError(str(exc)) from exc
                log.warning("%s; waiting for that session to expire", exc)
                await asyncio.sleep(1.0)
        self.connected_zk.set_registration_listener(self._on_reregistered)
        log.info("Registered broker %d at path %s with addresses: %s, czxid (broker epoch): "
                 "%d", self.broker_id, zk_data.broker_path(self.broker_id),
                 ",".join(e.connection_string() for e in reg.endpoints), self.state.broker_epoch)

    def _on_reregistered(self, epoch: int) -> None:
        self.state.broker_epoch = epoch
        log.info("Re-registered broker %d after a ZooKeeper session expiry (broker epoch %d)",
                 self.broker_id, epoch)
        if self.controller is not None:
            self.controller.post(Elect())

    # --- controller requests applied locally ---------------------------------------------

    # --- background work -----------------------------------------------------------------

    async def _allocate_producer_ids(self) -> tuple[int, int]:
        return await self.connected_zk.call(self.connected_zk.client.allocate_producer_id_block,
                                            self.broker_id)

    def _on_dynamic_broker_config(self, changed: set[str]) -> None:
        """Dynamic broker keys read outside the log and socket layers' own callbacks."""
        if "producer.id.expiration.ms" in changed:  # DynamicProducerStateManagerConfig
            self.started_part(self.log_manager).config.producer_id_expiration_ms = (
                self.started_part(self.dynamic_config).effective("producer.id.expiration.ms"))
        if any(map(is_connection_limit_key, changed)):  # SocketServer's, listeners'
            self.started_part(self.socket_server).limits = self._connection_limits()

    def _connection_limits(self) -> ConnectionLimits:
        dynamic = getattr(self, "dynamic_config", None)
        effective = dynamic.effective if dynamic is not None else self.config.get

        def lookup(name: str) -> object:
            value = effective(name)
            return value if value is not None else self.config.listener_overrides.get(name)

        return connection_limits(lookup, (e.listener for e in self.config.listeners),
                                 self.config.inter_broker_listener_name)

    async def _on_config_change(self, entity_type: str, name: str) -> None:
        if entity_type == "topics":
            overrides = await self.connected_zk.call(self.connected_zk.client.get_entity_config,
                                                     "topics", name)
            logging.getLogger("kafka.server.ConfigHandler").info(
                "Processing override for entityPath: topics/%s with config: %s", name,
                overrides)
            self.topic_configs.set_overrides(name, overrides)
            self._apply_topic_config(name)

    def _apply_topic_config(self, topic: str) -> None:
        config = self.topic_configs.log_config(topic)
        for (name, _index), partition in self.replica_manager.partitions.items():
            if name == topic:
                partition.log.config = config

    def _on_dir_failure(self, path: str) -> None:
        """A log dir went offline (an I/O error, a full disk); may run on a worker
        thread, so the handling hops onto the event loop."""
        log.error("Log dir %s failed; its partitions are offline on this broker", path)
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._handle_dir_failure, path)

    def _handle_dir_failure(self, path: str) -> None:
        """Kafka's handleLogDirFailure: the partitions of the dir stop here (no fetching,
        no serving, never recreated in another dir) and the controller hears of it through
        /log_dir_event_notification; with no dir left the broker halts."""
        if self.log_manager is None or self.replica_manager is None:
            return  # during startup: the log manager reports it
        if not self.log_manager.dirs:
            log.error("Shutdown broker because all log dirs in %s have failed",
                      ", ".join(sorted(self.log_manager.offline_dirs)))
            logging.shutdown()
            os._exit(1)  # as Kafka's Exit.halt: nothing left to serve or to flush
        lost = [tp for tp in self.replica_manager.partitions if tp not in self.log_manager.logs]
        self.offline_partitions.update(lost)
        if self.fetchers is not None:
            self.fetchers.remove_partitions(lost)
        for topic, index in lost:
            if topic == OFFSETS_TOPIC:
                self.group_coordinator.on_resigned(index)
            elif topic == TRANSACTION_STATE_TOPIC and self.transaction_coordinator:
                self.transaction_coordinator.on_resigned(index, None)
            self.replica_manager.stop_replica(topic, index, delete=False)
        log.error("Partitions %s are offline due to the failure on log dir %s",
                  ", ".join(f"{t}-{p}" for t, p in sorted(lost)), path)
        task = asyncio.ensure_future(self.connected_zk.call(
            self.connected_zk.client.create_log_dir_event_notification, self.broker_id))
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def _run_maintenance(self) -> None:
        """Retention, flushes and checkpoints (the log manager keeps its own timers), and
        the metrics' moving averages."""
        seconds = 0
        while True:
            await asyncio.sleep(1.0)
            seconds += 1
            if seconds % int(TICK_S) == 0:
                self._sample_idle()
                self.metrics.tick()
            try:
                self.log_manager.run_maintenance()  # type: ignore[union-attr]
                self.replica_manager.shrink_lagging_isrs(self.config["replica.lag.time.max.ms"])
            except Exception:
                log.exception("Log maintenance failed")

    # --- shutdown ------------------------------------------------------------------------

    async def shutdown(self) -> None:
        log.info("[KafkaServer id=%d] shutting down", self.broker_id)
        if self.started and self.config["controlled.shutdown.enable"]:
            await controlled_shutdown(ShutdownServices(
                self.config, self.state, self.zk, self.metadata, self.controller,
                self.versions, self.security.inter_broker_client))
        if self._maintenance is not None:
            self._maintenance.cancel()
        if self._runtime is not None:
            stop_runtime(*self._runtime)
        if self.fetchers is not None:
            self.fetchers.shutdown()
        if self.socket_server is not None:
            await self.socket_server.stop()
        if self.metrics_server is not None:
            await self.metrics_server.stop()
        if self.controller is not None:
            await self.controller.stop()
        if self.delegation_tokens is not None:
            await self.delegation_tokens.stop()
        self.finalized_features.stop()
        if self.controller_channel is not None:
            self.controller_channel.close()
        if self.txn_verifier is not None:
            self.txn_verifier.close()
        if self.group_coordinator is not None:
            self.group_coordinator.shutdown()
        if self.transaction_coordinator is not None:
            self.transaction_coordinator.shutdown()
        if self.txn_marker_channel is not None:
            self.txn_marker_channel.close()
        if self.replica_manager is not None:
            self.replica_manager.shutdown()
        if self.log_manager is not None:
            self.log_manager.shutdown()
        if self.zk is not None:
            if self.acl_authorizer is not None:
                await self.zk.call(self.acl_authorizer.close)
            await self.zk.close()
        self._stopped.set()
        log.info("[KafkaServer id=%d] shut down completed", self.broker_id)


def _canonical_host() -> str:
    import socket

    return socket.getfqdn()


