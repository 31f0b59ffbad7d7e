"""The transaction coordinator's marker channel (Kafka's TransactionMarkerChannelManager,
the sending half): the markers of each decided transaction go, per partition, to the
partition's leader as WriteTxnMarkers, retried as Kafka's
TransactionMarkerRequestCompletionHandler retries them, and every partition's end is
reported back to the coordinator (`MarkerJob.on_partition_done`).

Per destination broker a queue and a sender task batch what is queued for it into one
request. This broker's own partitions take the same path, over its own inter-broker
listener, as Kafka's coordinator sends to itself: the receiving handler's checks
(authorization, leadership, epochs) apply alike. The connections are `BrokerLinks`'
(server/broker_links.py: the inter-broker listener with the inter-broker security).

The leader comes from the metadata cache at each attempt: a partition whose leader is
unknown, or that answers NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_OR_PARTITION,
NOT_ENOUGH_REPLICAS(_AFTER_APPEND), REQUEST_TIMED_OUT or KAFKA_STORAGE_ERROR, or whose
connection fails, is routed again after a backoff; a partition the metadata no longer
knows (its topic was deleted) is done, as are UNSUPPORTED_FOR_MESSAGE_FORMAT and
UNSUPPORTED_VERSION; INVALID_PRODUCER_EPOCH and TRANSACTION_COORDINATOR_FENCED end the
transaction's sending. Any other answer is unexpected (Kafka throws): it is logged and
retried after a longer backoff, so a fixed cause (an ACL, say) lets the transaction end.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from moldau.coordinator.transaction.markers import MarkerJob, MarkerOutcome, TransactionResult
from moldau.errors import (
    InvalidProducerEpochError,
    KafkaStorageError,
    NotEnoughReplicasAfterAppendError,
    NotEnoughReplicasError,
    NotLeaderOrFollowerError,
    RequestTimedOutError,
    TransactionCoordinatorFencedError,
    UnknownTopicOrPartitionError,
    UnsupportedForMessageFormatError,
    UnsupportedVersionError,
)
from moldau.protocol.generated.api import ApiKey
from moldau.protocol.generated.write_txn_markers_request import WriteTxnMarkersRequest
from moldau.protocol.generated.write_txn_markers_response import WriteTxnMarkersResponse

from .broker_links import BrokerLinks

if TYPE_CHECKING:
    from moldau.client.security import ClientSecurity

    from .metadata_cache import MetadataCache

log = logging.getLogger("kafka.coordinator.transaction.TransactionMarkerChannelManager")

# Kafka 3.9 sends v1 from inter.broker.protocol.version 2.8 on, all Moldau speaks
WRITE_TXN_MARKERS_VERSION = 1
RETRY_BACKOFF_S = 0.1  # retry.backoff.ms
UNEXPECTED_BACKOFF_S = 5.0
_RETRY = frozenset({UnknownTopicOrPartitionError.code, NotLeaderOrFollowerError.code,
                    NotEnoughReplicasError.code, NotEnoughReplicasAfterAppendError.code,
                    RequestTimedOutError.code, KafkaStorageError.code})
_STOP = frozenset({InvalidProducerEpochError.code, TransactionCoordinatorFencedError.code})
_DROP = frozenset({UnsupportedForMessageFormatError.code, UnsupportedVersionError.code})
GONE = UnknownTopicOrPartitionError.code  # the outcome of a deleted topic's partition

TopicPartition = tuple[str, int]
Queued = tuple[MarkerJob, TopicPartition]


@dataclass
class _Sending:
    """A job and its partitions not done yet."""

    job: MarkerJob
    left: set[TopicPartition] = field(default_factory=set)


class _BrokerQueue:
    """The markers queued for one broker and the task that sends them."""

    def __init__(self, broker_id: int, channel: TxnMarkerChannel) -> None:
        self.broker_id = broker_id
        self.channel = channel
        self.queued: list[Queued] = []
        self.ready = asyncio.Event()
        self.closed = False
        self.task = asyncio.ensure_future(self._run())

    def put(self, item: Queued) -> None:
        self.queued.append(item)
        self.ready.set()

    async def _run(self) -> None:
        while not self.closed:
            await self.ready.wait()
            self.ready.clear()
            batch = [item for item in self.queued if self.channel.wanted(*item)]
            self.queued = []
            if not batch:
                continue
            try:
                response = await self.channel.links.request(
                    self.broker_id, ApiKey.WRITE_TXN_MARKERS, WRITE_TXN_MARKERS_VERSION,
                    _request(batch), self.channel.request_timeout_s)
            except Exception as exc:  # connection, TLS, SASL, timeout: all retried
                log.info("Sending transaction markers to broker %d failed: %s; retrying",
                         self.broker_id, exc)
                self.channel.retry_later(batch, RETRY_BACKOFF_S)
                continue
            self.channel.on_response(self.broker_id, batch, response)

    def close(self) -> None:
        self.closed = True
        self.task.cancel()


class TxnMarkerChannel:
    """The MarkerChannel of coordinator/transaction/markers.py over the network."""

    def __init__(self, broker_id: int, listener: str, metadata: MetadataCache,
                 security_for: Callable[[], ClientSecurity], *,
                 request_timeout_s: float = 30.0, connect_timeout_s: float = 10.0) -> None:
        self.broker_id = broker_id
        self.listener = listener
        self.metadata = metadata
        self.request_timeout_s = request_timeout_s
        self.links = BrokerLinks(f"broker-{broker_id}-txn-marker-sender", self.endpoint,
                                 security_for, connect_timeout_s=connect_timeout_s)
        self.sending: dict[str, _Sending] = {}
        self.queues: dict[int, _BrokerQueue] = {}
        self._timers: set[asyncio.TimerHandle] = set()
        # the batches waiting for a leader with an endpoint (Kafka's unknown-destination
        # queue), by timer
        self._unknown: dict[asyncio.TimerHandle, list[Queued]] = {}
        self.closed = False

    # --- the MarkerChannel protocol -----------------------------------------------------

    def send(self, job: MarkerJob) -> None:
        if self.closed:
            return
        self.sending[job.transactional_id] = _Sending(job, set(job.partitions))
        self._route([(job, tp) for tp in sorted(job.partitions)])

    def remove_transactions(self, transactional_ids: Iterable[str]) -> None:
        for tid in transactional_ids:
            self.sending.pop(tid, None)  # queued items of it are skipped (wanted)

    # --- routing --------------------------------------------------------------------------

    def wanted(self, job: MarkerJob, tp: TopicPartition) -> bool:
        """Still to be sent: its job is the id's current one and the partition not done."""
        current = self.sending.get(job.transactional_id)
        return current is not None and current.job is job and tp in current.left

    def endpoint(self, broker_id: int) -> tuple[str, int] | None:
        return self.metadata.endpoint(broker_id, self.listener)

    def _route(self, items: Iterable[Queued]) -> None:
        later: list[Queued] = []
        for job, tp in items:
            if not self.wanted(job, tp):
                continue
            info = self.metadata.partition(*tp)
            if info is None and self.metadata.initialized:
                log.info("There is no metadata for %s-%d (its topic was deleted); its "
                         "marker of %s is done", tp[0], tp[1], job.transactional_id)
                self._done(job, tp, GONE)
            elif (info is None or info.leader < 0 or info.leader not in self.metadata.brokers
                  or self.endpoint(info.leader) is None):
                later.append((job, tp))  # leader unknown for now
            else:
                self._queue_for(info.leader).put((job, tp))
        if later:
            self.retry_later(later, RETRY_BACKOFF_S, unknown_destination=True)

    def _queue_for(self, broker_id: int) -> _BrokerQueue:
        queue = self.queues.get(broker_id)
        if queue is None or queue.closed:
            queue = self.queues[broker_id] = _BrokerQueue(broker_id, self)
        return queue

    def retry_later(self, items: list[Queued], delay_s: float, *,
                    unknown_destination: bool = False) -> None:
        if self.closed:
            return
        loop = asyncio.get_running_loop()
        timer: asyncio.TimerHandle | None = None

        def fire() -> None:
            if timer is not None:
                self._timers.discard(timer)
                self._unknown.pop(timer, None)
            self._route(items)

        timer = loop.call_later(delay_s, fire)
        self._timers.add(timer)
        if unknown_destination:
            self._unknown[timer] = items

    def unknown_destination_markers(self) -> int:
        """Kafka's UnknownDestinationQueueSize: the markers (one per transaction and
        routing attempt, whatever its partitions) waiting because their partitions'
        leader is unknown or has no inter-broker endpoint."""
        return sum(len({id(job) for job, tp in items if self.wanted(job, tp)})
                   for items in list(self._unknown.values()))

    # --- answers --------------------------------------------------------------------------

    def on_response(self, broker_id: int, batch: list[Queued],
                    response: WriteTxnMarkersResponse) -> None:
        errors: dict[tuple[int, str, int], int] = {}
        for marker in response.markers:
            for topic in marker.topics:
                for p in topic.partitions:
                    errors[(marker.producer_id, topic.name, p.partition_index)] = p.error_code
        retry: list[Queued] = []
        unexpected: list[Queued] = []
        for job, tp in batch:
            if not self.wanted(job, tp):
                continue
            code = errors.get((job.producer_id, *tp))
            if code is None:
                log.error("Broker %d's WriteTxnMarkers answer has no result for %s-%d of "
                          "producer %d", broker_id, tp[0], tp[1], job.producer_id)
                unexpected.append((job, tp))
            elif code == 0 or code in _DROP or code in _STOP:
                if code in _DROP:
                    log.info("Sending %s's transaction marker for %s-%d failed with error "
                             "%d; the partition leaves the transaction",
                             job.transactional_id, tp[0], tp[1], code)
                self._done(job, tp, code)
            elif code in _RETRY:
                log.info("Sending %s's transaction marker for %s-%d failed with error %d; "
                         "retrying", job.transactional_id, tp[0], tp[1], code)
                retry.append((job, tp))
            else:
                log.error("Unexpected error %d while sending %s's transaction marker for "
                          "%s-%d to broker %d", code, job.transactional_id, tp[0], tp[1],
                          broker_id)
                unexpected.append((job, tp))
        if retry:
            self.retry_later(retry, RETRY_BACKOFF_S)
        if unexpected:
            self.retry_later(unexpected, UNEXPECTED_BACKOFF_S)

    def _done(self, job: MarkerJob, tp: TopicPartition, code: int) -> None:
        sending = self.sending.get(job.transactional_id)
        if sending is None or sending.job is not job:
            return
        sending.left.discard(tp)
        if code in _STOP or not sending.left:
            del self.sending[job.transactional_id]
        job.on_partition_done(MarkerOutcome(tp[0], tp[1], code))

    def close(self) -> None:
        self.closed = True
        for timer in self._timers:
            timer.cancel()
        self._timers.clear()
        self._unknown.clear()
        for queue in self.queues.values():
            queue.close()
        self.queues.clear()
        self.links.close()
        self.sending.clear()


def _request(batch: list[Queued]) -> WriteTxnMarkersRequest:
    """One marker per job, its partitions grouped by topic."""
    R = WriteTxnMarkersRequest
    by_job: dict[int, tuple[MarkerJob, dict[str, list[int]]]] = {}
    for job, (topic, partition) in batch:
        _, topics = by_job.setdefault(id(job), (job, {}))
        topics.setdefault(topic, []).append(partition)
    return R(markers=[R.WritableTxnMarker(
        producer_id=job.producer_id, producer_epoch=job.producer_epoch,
        transaction_result=job.result == TransactionResult.COMMIT,
        coordinator_epoch=job.coordinator_epoch,
        topics=[R.WritableTxnMarkerTopic(name=name, partition_indexes=sorted(indexes))
                for name, indexes in sorted(topics.items())])
        for job, topics in by_job.values()])
