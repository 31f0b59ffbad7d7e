"""Fetch (API key 1) for consumers: read up to the high watermark (or the last stable
offset under read_committed), long-poll until min_bytes or max_wait_ms, and hand the
record data to the connection as file ranges, which plaintext connections send with
sendfile.

Consumers on Fetch v0-v9 get their answer in the formats and codecs they read
(fetch_conversion.py: message formats v0/v1 below v4, no zstd below v10).

Fetch sessions (KIP-227) are kept for followers only (moldau.server.fetch_sessions): a
consumer's answer carries session id 0, which tells it to send full fetch requests, as
Kafka does when its session cache is full.
A follower's fetch (replica_id >= 0, CLUSTER_ACTION) reads up to the log end and tells the
leader how far the follower got: that moves the high watermark and grows the ISR.

A fetch that names the epoch of the fetcher's last batch (v12+ `last_fetched_epoch`, what
followers send) is first checked against this log's epochs: where the fetcher's log has
left the leader's, the answer carries no records but the diverging epoch and where it
ends here, so the follower truncates without an OffsetForLeaderEpoch round trip (Kafka's
truncation on fetch, IBP 2.7 and later).
"""

from __future__ import annotations

import asyncio
import os
import time
from typing import TYPE_CHECKING
from uuid import UUID

from moldau.errors import (
    FencedLeaderEpochError,
    KafkaError,
    OffsetOutOfRangeError,
    TopicAuthorizationFailedError,
    UnknownLeaderEpochError,
    UnknownTopicIdError,
)
from moldau.protocol.fetch_session import FINAL_EPOCH, INITIAL_EPOCH, next_epoch
from moldau.protocol.generated.fetch_request import FetchRequest
from moldau.protocol.generated.fetch_response import FetchResponse
from moldau.replication.replica_manager import Partition
from moldau.security.acls import AclOperation, ResourceType
from moldau.storage.epoch_cache import UNDEFINED_EPOCH, UNDEFINED_OFFSET
from moldau.storage.log import FetchData, PartitionLog
from moldau.storage.log_aborted import aborted_transactions

from ..fetch_sessions import (
    FETCH_SESSION_ID_NOT_FOUND,
    INVALID_FETCH_SESSION_EPOCH,
    FetchSession,
    FetchSessionCache,
)
from ..quotas import NoQuotas
from ..replica_selector import NO_PREFERENCE, preferred_read_replica
from ..responses import FileRecords
from .cluster_info import CLUSTER_NAME
from .fetch_conversion import ZSTD_VERSION, for_old_consumer

if TYPE_CHECKING:
    from collections.abc import Awaitable, Mapping

    from moldau.replication.replica_manager import ReplicaManager
    from moldau.replication.throttle import ReplicationThrottle

    from ..broker_metrics import BrokerTopicStats, DelayedOperations, NoTopicStats
    from ..config import BrokerConfig
    from ..metadata_cache import MetadataCache
    from ..requests import RequestContext

PartitionData = FetchResponse.PartitionData
TopicResponse = FetchResponse.FetchableTopicResponse
EpochEndOffset = FetchResponse.EpochEndOffset
AbortedTransaction = FetchResponse.AbortedTransaction
# The tagged struct fields every answer carries at their defaults, shared: the handler
# only ever replaces them (a diverging epoch), and building three structs per partition
# and read was a measurable part of serving a follower's fetch
NO_DIVERGING_EPOCH = EpochEndOffset()
NO_CURRENT_LEADER = FetchResponse.LeaderIdAndEpoch()
NO_SNAPSHOT_ID = FetchResponse.SnapshotId()
INT32_MAX = 2**31 - 1
READ_COMMITTED = 1
SESSIONS_VERSION = 7  # Fetch v7 brought fetch sessions
# Records up to this size are copied into the answer rather than sent with sendfile
# (_records)
INLINE_RECORDS_MAX = 32 * 1024
# the session of a fetch and whether the fetch is incremental, or None
SessionUse = tuple[FetchSession, bool] | None
# a requested topic resolved: (name or None when its id is unknown, topic id, the topic
# as requested, whether the requester may read it)
ResolvedTopic = tuple[str | None, UUID | None, FetchRequest.FetchTopic, bool]


def _records(fd: int, position: int, size: int) -> FileRecords | bytes:
    """A partition's records for the answer: a file range that the connection sends
    with sendfile, or for a small one its bytes. A file range costs a send of the bytes
    before it, the sendfile and a send of the bytes after (three system calls, each
    through the loopback or NIC path), where bytes join the one write of the pass's
    answers; below INLINE_RECORDS_MAX the copy is the cheaper (a small produce's
    follower fetch carries a few KB)."""
    if size <= INLINE_RECORDS_MAX:
        try:
            data = os.pread(fd, size, position)
        except OSError:
            data = b""  # sendfile meets the error, and the connection reports it
        if len(data) == size:
            return data
    return FileRecords(fd, position, size)


def _aborted(plog: PartitionLog, fetch_offset: int,
             data: FetchData) -> list[FetchResponse.AbortedTransaction]:
    """A read_committed answer's AbortedTransactions (docs/transactions.md item 4)."""
    return [AbortedTransaction(producer_id=txn.producer_id, first_offset=txn.first_offset)
            for txn in aborted_transactions(plog, fetch_offset, data)]


def _reads_to(request: FetchRequest, replica_id: int) -> int | None:
    """What a fetch reads to, as PartitionLog.fetch_upper_bound takes it: the log end
    (None) for a follower, else the consumer's isolation level (high watermark or LSO);
    its long poll wakes when that moves."""
    return None if replica_id >= 0 else request.isolation_level


def check_leader_epoch(partition: Partition, requested: int) -> None:
    """KIP-320: a client with a stale epoch is fenced; one ahead of us must retry."""
    if requested == -1:
        return
    if requested < partition.leader_epoch:
        raise FencedLeaderEpochError(
            f"leader epoch {requested} of the request is older than the current "
            f"{partition.leader_epoch} of {partition.name}")
    if requested > partition.leader_epoch:
        raise UnknownLeaderEpochError(
            f"leader epoch {requested} of the request is newer than the current "
            f"{partition.leader_epoch} of {partition.name}")


def diverging_epoch(plog: PartitionLog, last_fetched_epoch: int,
                    fetch_offset: int) -> tuple[int, int] | None:
    """(epoch, end offset) where the fetcher's log leaves this one, or None when a fetch at
    fetch_offset after a batch of last_fetched_epoch continues this log: this log has no
    such epoch (it ends at a smaller one) or that epoch ends here before fetch_offset."""
    epoch, end = plog.epochs.end_offset_for(last_fetched_epoch, plog.log_end_offset)
    if epoch == UNDEFINED_EPOCH or end == UNDEFINED_OFFSET:
        raise OffsetOutOfRangeError(
            f"could not determine the end offset of the last fetched epoch "
            f"{last_fetched_epoch} in {plog.name}")
    if fetch_offset < plog.log_start_offset:
        raise OffsetOutOfRangeError(
            f"fetch offset {fetch_offset} is below the log start offset "
            f"{plog.log_start_offset} of {plog.name}")
    if epoch < last_fetched_epoch or end < fetch_offset:
        return epoch, end
    return None


class FetchHandler:
    MIN_VERSION, MAX_VERSION = 0, 17

    def __init__(self, config: BrokerConfig, metadata: MetadataCache,
                 replica_manager: ReplicaManager, topic_stats: BrokerTopicStats | NoTopicStats,
                 purgatory: Mapping[str, DelayedOperations],
                 leader_throttle: ReplicationThrottle) -> None:
        self.config = config
        self.metadata = metadata
        self.replica_manager = replica_manager
        self.topic_stats = topic_stats
        self.fetch_purgatory = purgatory["Fetch"]
        self.leader_throttle = leader_throttle
        self.sessions = FetchSessionCache(
            config["max.incremental.fetch.session.cache.slots"])

    def __call__(self, ctx: RequestContext,
                 request: FetchRequest) -> FetchResponse | Awaitable[FetchResponse]:
        version = ctx.api_version
        replica_id = request.replica_id if version <= 14 else request.replica_state.replica_id
        if replica_id >= 0 and not ctx.authorize(AclOperation.CLUSTER_ACTION,
                                                 ResourceType.CLUSTER, CLUSTER_NAME):
            return self._error_response(request, TopicAuthorizationFailedError.code)
        topics = request.topics
        session: SessionUse = None
        if replica_id >= 0 and version >= SESSIONS_VERSION:
            session, error = self._session(request, version >= 13)
            if error:
                return FetchResponse(error_code=error, session_id=0, responses=[])
            if session is not None and session[1]:
                topics = session[0].topics(FetchRequest.FetchTopic)
        elif request.session_id != 0 or request.session_epoch > 0:
            # an incremental request for a session we never created
            return FetchResponse(error_code=FETCH_SESSION_ID_NOT_FOUND, session_id=0,
                                 responses=[])
        if replica_id < 0 and type(ctx.quotas) is not NoQuotas:
            # a consumer's fetch is no larger than its quota allows over the measured
            # span (Kafka caps fetch max bytes, and min bytes with it); a throttled fetch
            # then answers with no records (server/quotas.py)
            cap = ctx.quotas.fetch_max_bytes(ctx)
            if cap < request.max_bytes:
                request.max_bytes = int(cap)
                request.min_bytes = min(request.min_bytes, request.max_bytes)
        wanted = self._resolve(ctx, topics, version, replica_id >= 0)
        response, total, partitions, answer_now = self._read(request, wanted, version,
                                                             replica_id)
        if (request.max_wait_ms <= 0 or total >= request.min_bytes or answer_now
                or not partitions):
            return self._answer(ctx, request, response, replica_id, session, version)
        # watch now: the long poll's task starts a loop pass later, and an append in
        # between (the next produce, answered first) would wait out max_wait_ms
        watched = self.replica_manager.watch(partitions, _reads_to(request, replica_id))
        return self._long_poll(ctx, request, wanted, partitions, version, replica_id,
                               watched, session)

    def _session(self, request: FetchRequest, by_id: bool) -> tuple[SessionUse, int]:
        """A follower's fetch session (KIP-227, as Kafka's FetchManager.newContext): (the
        session and whether this fetch is incremental, or None for a sessionless
        fetch; an error code)."""
        session_id, epoch = request.session_id, request.session_epoch
        if session_id != 0 and epoch in (INITIAL_EPOCH, FINAL_EPOCH):
            self.sessions.remove(session_id)  # closed; a new one starts, or none
        elif session_id != 0:
            session = self.sessions.get(session_id)
            if session is None:
                return None, FETCH_SESSION_ID_NOT_FOUND
            if epoch != session.epoch:
                return None, INVALID_FETCH_SESSION_EPOCH
            session.epoch = next_epoch(epoch)
            session.update(request.topics, request.forgotten_topics_data, by_id)
            return (session, True), 0
        if epoch != INITIAL_EPOCH:
            return None, 0  # a full fetch without a session
        created = self.sessions.create()
        if created is None:
            return None, 0  # no slots: answered with session id 0
        created.update(request.topics, [], by_id)
        return (created, False), 0

    def _answer(self, ctx: RequestContext, request: FetchRequest, response: FetchResponse,
                replica_id: int, session: SessionUse, version: int) -> FetchResponse:
        """The final answer: an incremental one keeps only the partitions with news; a
        consumer's below v10 in the formats and codecs it reads."""
        if replica_id < 0 and version < ZSTD_VERSION:
            for_old_consumer(request, response, version, self.replica_manager.partitions,
                             self.topic_stats)
        if session is not None:
            fetch_session, incremental = session
            if incremental:
                fetch_session.filter(response, version >= 13)
            else:
                fetch_session.remember(response, version >= 13)
            response.session_id = fetch_session.id
        return self._accounted(ctx, response, replica_id)

    def _accounted(self, ctx: RequestContext, response: FetchResponse,
                   replica_id: int) -> FetchResponse:
        """Count the answer in BrokerTopicMetrics: bytes out (replication bytes for a
        follower), and a fetch request (failed or not) per partition of known topics.
        A consumer's bytes out wait for the quota stage while quotas are on: Kafka counts
        the bytes of the response that leaves, none of a throttled fetch's records."""
        stats = self.topic_stats
        known = self.metadata.topics
        after_quota = replica_id < 0 and type(ctx.quotas) is not NoQuotas
        for topic in response.responses:
            name = topic.topic
            if name not in known:
                continue
            for data in topic.partitions:
                size = len(data.records) if data.records is not None else 0
                if replica_id >= 0:
                    if size:
                        stats.mark_broker("ReplicationBytesOutPerSec", size)
                        if self._reassignment_fetch(name, data.partition_index, replica_id):
                            stats.mark_broker("ReassignmentBytesOutPerSec", size)
                    continue
                stats.mark("TotalFetchRequestsPerSec", name)
                if data.error_code:
                    stats.mark("FailedFetchRequestsPerSec", name)
                elif size and not after_quota:
                    stats.mark("BytesOutPerSec", name, size)
        if after_quota:
            ctx.after_quota = lambda: self._bytes_out(response)
        return response

    def _bytes_out(self, response: FetchResponse) -> None:
        """A consumer fetch's BytesOutPerSec, counted after the quota stage (which takes
        a throttled fetch's records out of its response)."""
        stats = self.topic_stats
        known = self.metadata.topics
        for topic in response.responses:
            name = topic.topic
            if name not in known:
                continue
            for data in topic.partitions:
                if not data.error_code and data.records is not None and len(data.records):
                    stats.mark("BytesOutPerSec", name, len(data.records))

    def _reassignment_fetch(self, topic: str, index: int, replica_id: int) -> bool:
        """A fetch by a replica that a reassignment adds (ReassignmentBytesOutPerSec)."""
        partition = self.replica_manager.partitions.get((topic, index))
        return partition is not None and replica_id in partition.state.adding

    async def _long_poll(self, ctx: RequestContext, request: FetchRequest,
                         wanted: list[ResolvedTopic],
                         partitions: list[Partition], version: int, replica_id: int,
                         watched: asyncio.Future[None] | None,
                         session: SessionUse) -> FetchResponse:
        deadline = time.monotonic() + request.max_wait_ms / 1000
        rm = self.replica_manager
        reads_to = _reads_to(request, replica_id)
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                if watched is not None:  # the task started after the deadline
                    rm.unwatch(partitions, watched, reads_to)
                break
            with self.fetch_purgatory.waiting(len(partitions)):
                await rm.wait_for_change(partitions, remaining, watched, reads_to)
            watched = None  # registered anew after each read, in the same loop pass
            response, total, partitions, answer_now = self._read(request, wanted, version,
                                                                 replica_id, again=True)
            if total >= request.min_bytes or answer_now or not partitions:
                return self._answer(ctx, request, response, replica_id, session, version)
        return self._answer(ctx, request, self._read(request, wanted, version, replica_id,
                                                     again=True)[0],
                            replica_id, session, version)

    def _resolve(self, ctx: RequestContext, topics: list[FetchRequest.FetchTopic],
                 version: int, from_follower: bool) -> list[ResolvedTopic]:
        """The requested topics resolved, in request order."""
        metadata = self.metadata
        resolved: list[ResolvedTopic] = []
        for topic in topics:
            if version >= 13:
                name = metadata.topic_names.get(topic.topic_id)
                topic_id = topic.topic_id
            else:
                name = topic.topic
                topic_id = metadata.topic_id(name) if name is not None else None
            authorized = name is not None and (
                from_follower or ctx.authorize(AclOperation.READ, ResourceType.TOPIC, name))
            resolved.append((name, topic_id, topic, authorized))
        return resolved

    def _read(self, request: FetchRequest, wanted: list[ResolvedTopic], version: int,
              replica_id: int, again: bool = False
              ) -> tuple[FetchResponse, int, list[Partition], bool]:
        """One read of the request's partitions. A follower's fetch position counts once,
        when the request arrives (`again` marks the long poll's re-reads): a request left
        waiting by a follower that died since must not keep it looking alive, nor put it
        back in the ISR. The last value returned says the answer cannot wait: an error or
        a diverging epoch."""
        rm = self.replica_manager
        metadata = self.metadata
        # a follower reads to the log end; a consumer to the high watermark or the LSO
        isolation = _reads_to(request, replica_id)
        # KIP-392: consumers that send client metadata (v11+) may read from followers, and
        # a leader with a replica selector may send them to a replica in their rack
        from_follower_ok = replica_id < 0 and version >= 11
        selector = self.config["replica.selector.class"] if from_follower_ok else None
        client_rack = request.rack_id if from_follower_ok else ""
        now_ms = time.time() * 1000
        with_start = version >= 5
        budget = request.max_bytes
        min_one = True  # the first batch found is sent even when larger than the limits
        total = 0
        answer_now = False
        fetched: list[Partition] = []
        responses = []
        # the generated fields type their elements loosely: name what they are
        fp: FetchRequest.FetchPartition
        for name, topic_id, topic, authorized in wanted:
            partitions_out = []
            for fp in topic.partitions:
                # aborted_transactions: null but in a read_committed read's answer (Kafka)
                out = PartitionData(partition_index=fp.partition, records=b"",
                                    aborted_transactions=None,
                                    diverging_epoch=NO_DIVERGING_EPOCH,
                                    current_leader=NO_CURRENT_LEADER, snapshot_id=NO_SNAPSHOT_ID)
                try:
                    if name is None:
                        raise UnknownTopicIdError(f"unknown topic id {topic.topic_id}")
                    if not authorized:
                        raise TopicAuthorizationFailedError(name)
                    partition = rm.leading(name, fp.partition, metadata, from_follower_ok)
                    check_leader_epoch(partition, fp.current_leader_epoch)
                    plog = partition.log
                    if selector and partition.is_leader:
                        preferred = preferred_read_replica(selector, partition, client_rack,
                                                           fp.fetch_offset, metadata.brokers)
                        if preferred != NO_PREFERENCE:  # no data: the client goes there
                            out.preferred_read_replica = preferred
                            out.high_watermark = plog.high_watermark
                            out.last_stable_offset = plog.last_stable_offset
                            out.log_start_offset = plog.log_start_offset
                            partitions_out.append(out)
                            continue
                    diverging = (diverging_epoch(plog, fp.last_fetched_epoch, fp.fetch_offset)
                                 if fp.last_fetched_epoch >= 0 else None)
                    out.high_watermark = plog.high_watermark
                    out.last_stable_offset = plog.last_stable_offset
                    if with_start:
                        out.log_start_offset = plog.log_start_offset
                    if diverging is not None:
                        # no records: the fetcher truncates first, and its fetch offset is
                        # not a position it has in common with this log (Kafka does not
                        # count it for the ISR either)
                        out.diverging_epoch = EpochEndOffset(epoch=diverging[0],
                                                             end_offset=diverging[1])
                        answer_now = True
                        partitions_out.append(out)
                        continue
                    if replica_id >= 0 and not again:
                        rm.follower_fetched(partition, replica_id, fp.fetch_offset, now_ms)
                    fetched.append(partition)
                    committed = isolation == READ_COMMITTED
                    limit = min(fp.partition_max_bytes, budget)
                    throttled = replica_id >= 0 and self._leader_throttled(partition, replica_id)
                    if throttled:  # what the leader throttle allows now (maybe nothing)
                        limit = int(min(limit, self.leader_throttle.quota.available()))
                    if limit > 0 or (min_one and not throttled):
                        data = plog.read(fp.fetch_offset, max(limit, 0),
                                         max_offset=plog.fetch_upper_bound(isolation),
                                         min_one_batch=min_one)
                        found = data.slice
                        if committed:
                            out.aborted_transactions = _aborted(plog, fp.fetch_offset, data)
                        if found is not None and found.size:
                            # bytes the log still held (a recent append): no read
                            out.records = (data.memory if data.memory is not None
                                           else _records(found.fd, found.position, found.size))
                            total += found.size
                            budget -= found.size
                            min_one = False
                            if throttled:
                                self.leader_throttle.quota.record(found.size)
                    elif committed:
                        out.aborted_transactions = []
                except KafkaError as exc:
                    answer_now = True
                    out.error_code = exc.code
                partitions_out.append(out)
            responses.append(TopicResponse(topic=name or "", topic_id=topic_id or topic.topic_id,
                                           partitions=partitions_out))
        return FetchResponse(responses=responses), total, fetched, answer_now

    def _leader_throttled(self, partition: Partition, replica_id: int) -> bool:
        """KIP-73 on the leader: a follower outside the ISR of a partition named in
        leader.replication.throttled.replicas."""
        return (replica_id not in partition.state.isr
                and self.leader_throttle.applies(partition.topic, partition.index))

    @staticmethod
    def _error_response(request: FetchRequest, code: int) -> FetchResponse:
        responses = [
            TopicResponse(topic=t.topic or "", topic_id=t.topic_id, partitions=[
                PartitionData(partition_index=p.partition, error_code=code, records=b"")
                for p in t.partitions])
            for t in request.topics
        ]
        return FetchResponse(responses=responses)
