"""How the controller reaches the brokers (Kafka's ControllerChannelManager).

Requests to this broker are applied in place; each other live broker gets a queue and a
sender task (Kafka's RequestSendThread) that connects to its control-plane listener
(`control.plane.listener.name`) or, without one, its inter-broker listener, and sends the
queued requests in order, retrying on connection errors until the request goes through
or the broker leaves /brokers/ids. The controller never waits for the brokers: it queues
and moves on, as Kafka's does.

A registration without an endpoint for that listener (a broker rolled with other
listeners) cannot be reached: as in Kafka, whose channel manager fails to add such a
broker (BrokerEndPointNotAvailableException) before the controller counts it as live,
the broker is left out of the live brokers until it registers with that listener.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING
from uuid import UUID

from moldau.client.broker_connection import BrokerConnection
from moldau.client.security import ClientSecurity
from moldau.cluster import zk_data
from moldau.cluster.controller import PartitionDecision
from moldau.cluster.controller_events import OfflineReplicas
from moldau.errors import KafkaStorageError
from moldau.protocol._runtime import ZERO_UUID
from moldau.protocol.fit import fit_to_version
from moldau.protocol.generated.api import ApiKey
from moldau.protocol.generated.leader_and_isr_request import LeaderAndIsrRequest
from moldau.protocol.generated.leader_and_isr_response import LeaderAndIsrResponse
from moldau.protocol.generated.stop_replica_request import StopReplicaRequest
from moldau.protocol.generated.update_metadata_request import UpdateMetadataRequest
from moldau.replication.protocol_versions import InterBrokerVersions

if TYPE_CHECKING:
    from moldau.cluster.controller import Controller

    from .config import BrokerConfig
    from .metadata_cache import MetadataCache
    from .partition_states import PartitionStates

log = logging.getLogger("kafka.controller.RequestSendThread")
channel_log = logging.getLogger("kafka.controller.ControllerChannelManager")

LEADER_DURING_DELETE = -2  # UpdateMetadata's mark of a topic being deleted
RETRY_BACKOFF_S = 0.1
KAFKA_STORAGE_ERROR = KafkaStorageError.code
ControllerRequest = LeaderAndIsrRequest | UpdateMetadataRequest | StopReplicaRequest
# only LeaderAndIsr's answer is read back (the replicas on a failed log dir)
OnResponse = Callable[[LeaderAndIsrResponse], None]


class BrokerSender:
    """The queue of requests to one broker and the task that sends them."""

    def __init__(self, broker_id: int, registration: zk_data.BrokerRegistration,
                 listener: str, client_id: str,
                 security_for: Callable[[], ClientSecurity],
                 timeout_s: float) -> None:
        self.broker_id = broker_id
        self.registration = registration
        self.listener = listener
        self.client_id = client_id
        # asked at each connection (TLS and SASL): the store files may have changed since
        # (a certificate renewal or CA rotation reloads the listeners)
        self.security_for = security_for
        self.timeout_s = timeout_s
        # (api key, version, request, what to do with the answer)
        self.queue: asyncio.Queue[tuple[int, int, ControllerRequest, OnResponse | None]] = (
            asyncio.Queue())
        self.connection: BrokerConnection | None = None
        self.closed = False  # see ReplicaFetcher: a cancellation can be swallowed
        self.task = asyncio.ensure_future(self._run())

    async def _run(self) -> None:
        while not self.closed:
            api_key, version, body, on_response = await self.queue.get()
            while not self.closed:
                try:
                    connection = await self._connect()
                    response = await connection.request(api_key, version, body, self.timeout_s)
                    if response.error_code:
                        log.warning("Broker %d answered API %d with error %d",
                                    self.broker_id, api_key, response.error_code)
                    if on_response is not None:
                        on_response(response)
                    break
                except (OSError, ConnectionError, TimeoutError) as exc:
                    log.warning("Controller's connection to broker %d failed: %s; retrying",
                                self.broker_id, exc)
                    if self.connection is not None:
                        self.connection.close()
                        self.connection = None
                    await asyncio.sleep(RETRY_BACKOFF_S)

    async def _connect(self) -> BrokerConnection:
        if self.connection is not None and not self.connection.closed:
            return self.connection
        endpoint = self.registration.endpoint(self.listener)
        if endpoint is None:
            raise ConnectionError(f"broker {self.broker_id} has no {self.listener} listener")
        security = self.security_for()
        self.connection = await BrokerConnection.connect(
            endpoint.host or "localhost", endpoint.port, client_id=self.client_id,
            ssl_context=security.ssl_context, sasl=security.sasl, timeout_s=self.timeout_s)
        return self.connection

    def close(self) -> None:
        self.closed = True
        self.task.cancel()
        if self.connection is not None:
            self.connection.close()


class NetworkControllerChannel:
    """The requests to this broker (local_id) go to its partition states and metadata in
    place. The controller is built with this channel, so it comes as a function (None
    before it exists)."""

    def __init__(self, local_id: int, config: BrokerConfig, versions: InterBrokerVersions,
                 security_for: Callable[[], ClientSecurity],
                 partition_states: PartitionStates, metadata: MetadataCache,
                 controller: Callable[[], Controller | None]) -> None:
        self.local_id = local_id
        self.config = config
        self.versions = versions
        self.security_for = security_for
        self.partition_states = partition_states
        self.metadata = metadata
        self.controller = controller
        self.senders: dict[int, BrokerSender] = {}
        self.epochs: dict[int, int] = {}  # broker id -> broker epoch (czxid of its znode)
        # the controller's listener towards the brokers (Kafka's controllerToBrokerListenerName)
        self.listener = config.controller_listener_name
        self._unreachable: set[tuple[int, int]] = set()  # (broker, epoch) already logged

    def set_live_brokers(self, live: Iterable[zk_data.BrokerRegistration]
                         ) -> list[zk_data.BrokerRegistration]:
        """Keep one sender per other live broker; a re-registered one gets a fresh one.
        Returns the brokers the controller can reach (this one always)."""
        live = list(live)
        self._unreachable &= {(b.id, b.epoch) for b in live}  # forget the gone ones
        reachable = [b for b in live if self._reachable(b)]
        self._keep_senders(reachable)
        return reachable

    def _keep_senders(self, reachable: list[zk_data.BrokerRegistration]) -> None:
        live_by_id = {b.id: b for b in reachable}
        for broker_id in list(self.senders):
            registration = live_by_id.get(broker_id)
            if registration is None or registration.epoch != self.epochs.get(broker_id):
                self.senders.pop(broker_id).close()
        for broker_id, registration in live_by_id.items():
            self.epochs[broker_id] = registration.epoch
            if broker_id != self.local_id and broker_id not in self.senders:
                self.senders[broker_id] = BrokerSender(
                    broker_id, registration, self.listener,
                    f"controller-{self.local_id}", self.security_for,
                    self.config["controller.socket.timeout.ms"] / 1000)

    def _reachable(self, registration: zk_data.BrokerRegistration) -> bool:
        if (registration.id == self.local_id
                or registration.endpoint(self.listener) is not None):
            return True
        key = (registration.id, registration.epoch)
        if key not in self._unreachable:  # once per registration, not per broker change
            self._unreachable.add(key)
            listeners = ",".join(e.listener_name for e in registration.endpoints)
            channel_log.error(
                "[Controller id=%d] End point with listener name %s not found for broker %d "
                "(it registered %s): the controller cannot send it LeaderAndIsr, "
                "UpdateMetadata or StopReplica and counts it as not live until it "
                "registers with a %s listener; give every broker that listener in "
                "listeners and advertised.listeners before setting "
                "control.plane.listener.name", self.local_id, self.listener,
                registration.id, listeners or "no endpoints", self.listener)
        return False

    def _send(self, broker_id: int, api_key: int, version: int, body: ControllerRequest,
              on_response: OnResponse | None = None) -> None:
        sender = self.senders.get(broker_id)
        if sender is not None:
            sender.queue.put_nowait((api_key, version, fit_to_version(body, version),
                                     on_response))

    # --- the ControllerChannel protocol ---------------------------------------------------

    async def leader_and_isr(self, broker_id: int, decisions: list[PartitionDecision]) -> None:
        if broker_id == self.local_id:
            await self.partition_states.load_topic_overrides({d.topic for d in decisions})
            errors = await self.partition_states.apply_leader_and_isr(
                _as_carried(decisions, self.versions.leader_and_isr >= 5))
            self._report_offline(broker_id, [tp for tp, code in errors.items()
                                             if code == KAFKA_STORAGE_ERROR])
            return
        version = self.versions.leader_and_isr
        names = {d.topic_id: d.topic for d in decisions}
        self._send(broker_id, ApiKey.LEADER_AND_ISR, version,
                   leader_and_isr_request(decisions, self.local_id, self.epochs.get(broker_id, -1),
                                          self._leaders(decisions),
                                          self._controller_epoch(decisions)),
                   lambda response: self._report_offline(
                       broker_id, offline_partitions(response, version, names)))

    def _report_offline(self, broker_id: int, partitions: list[tuple[str, int]]) -> None:
        """Replicas on a failed log dir (KAFKA_STORAGE_ERROR in the LeaderAndIsr answer):
        the controller moves leadership off them."""
        controller = self.controller()
        if partitions and controller is not None and controller.active:
            controller.post(OfflineReplicas(broker_id, tuple(partitions)))

    async def update_metadata(self, broker_ids: Iterable[int],
                              live_brokers: list[zk_data.BrokerRegistration],
                              decisions: list[PartitionDecision],
                              deleted_topics: list[str]) -> None:
        self._keep_senders(live_brokers)  # the controller's live brokers: all reachable
        for broker_id in broker_ids:
            if broker_id == self.local_id:
                self.partition_states.apply_update_metadata(
                    live_brokers, _as_carried(decisions, self.versions.update_metadata >= 7),
                    deleted_topics)
                continue
            self._send(broker_id, ApiKey.UPDATE_METADATA, self.versions.update_metadata,
                       update_metadata_request(decisions, deleted_topics, live_brokers,
                                               self.local_id, self.epochs.get(broker_id, -1),
                                               self._controller_epoch(decisions)))

    async def stop_replica(self, broker_id: int, partitions: list[tuple[str, int]],
                           delete: bool) -> None:
        if broker_id == self.local_id:
            await self.partition_states.apply_stop_replica(partitions, delete)
            return
        controller = self.controller()
        self._send(broker_id, ApiKey.STOP_REPLICA, self.versions.stop_replica, stop_replica_request(
            partitions, delete, self.local_id, self.epochs.get(broker_id, -1),
            controller.epoch if controller else 0))

    def controller_moved(self, controller_id: int) -> None:
        # Metadata must not name this broker as controller while it answers NOT_CONTROLLER
        self.metadata.controller_id = controller_id
        if controller_id != self.local_id:
            self.close()

    def _leaders(self, decisions: list[PartitionDecision]
                 ) -> list[LeaderAndIsrRequest.LeaderAndIsrLiveLeader]:
        listener = self.config.inter_broker_listener_name
        leaders = []
        for leader in sorted({d.leader for d in decisions if d.leader >= 0}):
            sender = self.senders.get(leader)
            registration = sender.registration if sender else None
            endpoint = registration.endpoint(listener) if registration else None
            if endpoint is not None:
                leaders.append(LeaderAndIsrRequest.LeaderAndIsrLiveLeader(
                    broker_id=leader, host_name=endpoint.host or "", port=endpoint.port))
        return leaders

    def _controller_epoch(self, decisions: list[PartitionDecision]) -> int:
        controller = self.controller()
        if controller is not None:
            return controller.epoch
        return max((d.controller_epoch for d in decisions), default=0)

    def close(self) -> None:
        for sender in self.senders.values():
            sender.close()
        self.senders.clear()


# --- request building (and reading back, for the receiving broker) -------------------------

def leader_and_isr_request(decisions: list[PartitionDecision], controller_id: int,
                           broker_epoch: int,
                           live_leaders: list[LeaderAndIsrRequest.LeaderAndIsrLiveLeader],
                           controller_epoch: int) -> LeaderAndIsrRequest:
    """The request carries the sending controller's epoch, each partition the epoch of the
    controller that wrote its state: a new controller announcing states its predecessor
    wrote must not look stale to a broker that has already heard from it."""
    by_topic: dict[str, list[PartitionDecision]] = {}
    for d in decisions:
        by_topic.setdefault(d.topic, []).append(d)
    return LeaderAndIsrRequest(
        controller_id=controller_id, controller_epoch=controller_epoch,
        broker_epoch=broker_epoch, type=0, live_leaders=live_leaders,
        ungrouped_partition_states=[e for t in by_topic.values() for e in _states(t, True)],
        topic_states=[LeaderAndIsrRequest.LeaderAndIsrTopicState(
            topic_name=name, topic_id=ds[0].topic_id, partition_states=_states(ds, False))
            for name, ds in by_topic.items()])


def _states(decisions: list[PartitionDecision], with_topic: bool
            ) -> list[LeaderAndIsrRequest.LeaderAndIsrPartitionState]:
    return [LeaderAndIsrRequest.LeaderAndIsrPartitionState(
        topic_name=d.topic if with_topic else "", partition_index=d.partition,
        controller_epoch=d.controller_epoch, leader=d.leader, leader_epoch=d.leader_epoch,
        isr=list(d.isr), partition_epoch=d.zk_version, replicas=list(d.replicas),
        adding_replicas=list(d.adding), removing_replicas=[], is_new=False) for d in decisions]


def offline_partitions(response: LeaderAndIsrResponse, version: int, names: dict[UUID, str]
                       ) -> list[tuple[str, int]]:
    """The partitions a LeaderAndIsr answer reports KAFKA_STORAGE_ERROR for."""
    if version < 5:
        return [(e.topic_name, e.partition_index) for e in response.partition_errors
                if e.error_code == KAFKA_STORAGE_ERROR]
    return [(names[t.topic_id], e.partition_index) for t in response.topics
            if t.topic_id in names for e in t.partition_errors
            if e.error_code == KAFKA_STORAGE_ERROR]


def _as_carried(decisions: list[PartitionDecision], with_ids: bool
                ) -> list[PartitionDecision]:
    """The decisions as the request's version carries them to a remote broker, so that
    the controller's own broker sees the same: below IBP 2.8-IV1 LeaderAndIsr and
    UpdateMetadata have no topic ids, and every broker answers Kafka's zero id."""
    if with_ids:
        return decisions
    return [dataclasses.replace(d, topic_id=ZERO_UUID) for d in decisions]


def decisions_from_leader_and_isr(request: LeaderAndIsrRequest, version: int,
                                  topic_ids: Callable[[str], UUID | None]
                                  ) -> list[PartitionDecision]:
    if version >= 2:
        pairs = [(t.topic_name, t.topic_id if version >= 5 else topic_ids(t.topic_name), p)
                 for t in request.topic_states for p in t.partition_states]
    else:
        pairs = [(p.topic_name, topic_ids(p.topic_name), p)
                 for p in request.ungrouped_partition_states]
    # before v5 (IBP below 2.8-IV1) the request has no ids: this broker's metadata may
    # know one; a topic it has not seen gets Kafka's zero id ("none")
    return [PartitionDecision(name, topic_id or ZERO_UUID, p.partition_index, p.leader,
                              p.leader_epoch, list(p.isr), list(p.replicas),
                              p.partition_epoch, p.controller_epoch, list(p.adding_replicas))
            for name, topic_id, p in pairs]


def update_metadata_request(decisions: list[PartitionDecision], deleted: list[str],
                            live: list[zk_data.BrokerRegistration], controller_id: int,
                            broker_epoch: int, controller_epoch: int) -> UpdateMetadataRequest:
    U = UpdateMetadataRequest
    by_topic: dict[str, list[UpdateMetadataRequest.UpdateMetadataPartitionState]] = {}
    ids: dict[str, UUID] = {}
    alive = {b.id for b in live}
    for d in decisions:
        ids[d.topic] = d.topic_id
        by_topic.setdefault(d.topic, []).append(U.UpdateMetadataPartitionState(
            topic_name=d.topic, partition_index=d.partition, controller_epoch=d.controller_epoch,
            leader=d.leader, leader_epoch=d.leader_epoch, isr=list(d.isr),
            zk_version=d.zk_version, replicas=list(d.replicas),
            offline_replicas=[r for r in d.replicas if r not in alive]))
    for name in deleted:
        by_topic.setdefault(name, []).append(U.UpdateMetadataPartitionState(
            topic_name=name, partition_index=0, controller_epoch=controller_epoch,
            leader=LEADER_DURING_DELETE, leader_epoch=0, isr=[], zk_version=0, replicas=[],
            offline_replicas=[]))
    brokers = [U.UpdateMetadataBroker(id=b.id, endpoints=[
        U.UpdateMetadataEndpoint(port=e.port, host=e.host or "", listener=e.listener_name,
                                 security_protocol=_PROTOCOL_IDS[e.security_protocol])
        for e in b.endpoints], rack=b.rack) for b in live]
    return U(controller_id=controller_id, controller_epoch=controller_epoch,
             broker_epoch=broker_epoch, live_brokers=brokers,
             ungrouped_partition_states=[s for ss in by_topic.values() for s in ss],
             topic_states=[U.UpdateMetadataTopicState(
                 topic_name=name, topic_id=ids.get(name, ZERO_UUID), partition_states=states)
                 for name, states in by_topic.items()])


_PROTOCOL_IDS = {"PLAINTEXT": 0, "SSL": 1, "SASL_PLAINTEXT": 2, "SASL_SSL": 3}
_PROTOCOL_NAMES = {v: k for k, v in _PROTOCOL_IDS.items()}


def read_update_metadata(request: UpdateMetadataRequest, version: int,
                         topic_ids: Callable[[str], UUID | None]) -> tuple[
        list[zk_data.BrokerRegistration], list[PartitionDecision], list[str]]:
    live = [zk_data.BrokerRegistration(
        id=b.id, rack=b.rack, endpoints=[zk_data.EndPoint(
            e.listener, e.host, e.port, _PROTOCOL_NAMES.get(e.security_protocol, "PLAINTEXT"))
            for e in b.endpoints]) for b in request.live_brokers]
    if version >= 5:
        pairs = [(t.topic_name, t.topic_id if version >= 7 else None, p)
                 for t in request.topic_states for p in t.partition_states]
    else:
        pairs = [(p.topic_name, None, p) for p in request.ungrouped_partition_states]
    decisions, deleted = [], []
    for name, topic_id, p in pairs:
        if p.leader == LEADER_DURING_DELETE:
            if name not in deleted:
                deleted.append(name)
            continue
        # before v7 the request has no ids, as in decisions_from_leader_and_isr
        decisions.append(PartitionDecision(
            name, topic_id or topic_ids(name) or ZERO_UUID, p.partition_index,
            p.leader, p.leader_epoch, list(p.isr), list(p.replicas), p.zk_version,
            p.controller_epoch))
    return live, decisions, deleted


def stop_replica_request(partitions: list[tuple[str, int]], delete: bool, controller_id: int,
                         broker_epoch: int, controller_epoch: int) -> StopReplicaRequest:
    S = StopReplicaRequest
    by_topic: dict[str, list[int]] = {}
    for topic, index in partitions:
        by_topic.setdefault(topic, []).append(index)
    return S(controller_id=controller_id, controller_epoch=controller_epoch,
             broker_epoch=broker_epoch, delete_partitions=delete,
             ungrouped_partitions=[S.StopReplicaPartitionV0(topic_name=t, partition_index=i)
                                   for t, i in partitions],
             topics=[S.StopReplicaTopicV1(name=t, partition_indexes=ix)
                     for t, ix in by_topic.items()],
             topic_states=[S.StopReplicaTopicState(topic_name=t, partition_states=[
                 S.StopReplicaPartitionState(partition_index=i, leader_epoch=-1,
                                             delete_partition=delete) for i in ix])
                 for t, ix in by_topic.items()])


def read_stop_replica(request: StopReplicaRequest, version: int
                      ) -> dict[bool, list[tuple[str, int]]]:
    """The partitions to stop, grouped by whether their logs are deleted."""
    out: dict[bool, list[tuple[str, int]]] = {True: [], False: []}
    if version >= 3:
        for t in request.topic_states:
            for p in t.partition_states:
                out[p.delete_partition].append((t.topic_name, p.partition_index))
    elif version >= 1:
        for t in request.topics:
            out[request.delete_partitions].extend((t.name, i) for i in t.partition_indexes)
    else:
        out[request.delete_partitions].extend(
            (p.topic_name, p.partition_index) for p in request.ungrouped_partitions)
    return out

