"""Followers copy their leaders' logs (Kafka's ReplicaFetcherManager and ReplicaFetcherThread).

Each follower partition is handled by one fetcher: one per (leader, fetcher index), where
the index spreads partitions over `num.replica.fetchers` connections to that leader. A
fetcher fetches from its log end with the broker's replica id, appends the leader's
batches with their offsets and follows the leader's high watermark and log start offset.

Where its log may have left the leader's (after a leader change), it truncates first, as
Kafka does from IBP 2.7 on: each fetch names the epoch of the log's last batch, and the
leader answers a divergence with the epoch and where it ends in the leader's log instead
of records. A partition with no epoch yet (an empty log) and one that an error may have
left behind a leader change ask with OffsetForLeaderEpoch first, as older IBPs always did.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING
from uuid import UUID

from moldau.client.broker_connection import BrokerConnection
from moldau.client.security import ClientSecurity
from moldau.errors import (
    FetchSessionIdNotFoundError,
    InvalidFetchSessionEpochError,
    KafkaError,
    KafkaStorageError,
)
from moldau.protocol.fetch_session import FINAL_EPOCH, INITIAL_EPOCH, next_epoch
from moldau.protocol.generated.api import ApiKey
from moldau.protocol.generated.fetch_request import FetchRequest
from moldau.protocol.generated.fetch_response import FetchResponse
from moldau.protocol.generated.list_offsets_request import ListOffsetsRequest
from moldau.protocol.generated.offset_for_leader_epoch_request import OffsetForLeaderEpochRequest
from moldau.protocol.records import complete_length
from moldau.storage.epoch_cache import UNDEFINED_EPOCH, UNDEFINED_OFFSET

from .protocol_versions import InterBrokerVersions
from .throttle import UNLIMITED, ReplicationThrottle

if TYPE_CHECKING:
    from moldau.storage.log import PartitionLog

    from .replica_manager import Partition

log = logging.getLogger("kafka.server.ReplicaFetcherThread")

OFFSET_OUT_OF_RANGE = 1
# The leader has not applied the controller's latest LeaderAndIsr yet (the follower heard
# of the partition, its leadership or its new leader epoch first): it will within the
# controller's send latency, so the follower asks again soon rather than after
# replica.fetch.backoff.ms. A reassignment bumps the epoch twice; a full second of backoff
# each time left acks=all produces waiting for this in-sync follower for that second.
LEADER_BEHIND_ERRORS = frozenset({
    3,  # UNKNOWN_TOPIC_OR_PARTITION: the leader does not host the partition yet
    6,  # NOT_LEADER_OR_FOLLOWER: it does not know it leads yet
    75,  # UNKNOWN_LEADER_EPOCH: it is still at an older leader epoch
})
LEADER_BEHIND_RETRY_S = 0.05
TRUNCATION_ON_FETCH_VERSION = 12  # Fetch v12 has last_fetched_epoch and diverging_epoch
SESSIONS_VERSION = 7  # Fetch v7 has fetch sessions (KIP-227)
# the leader lost the session (evicted, restarted) or it is out of step: open a new one
SESSION_ERRORS = frozenset({FetchSessionIdNotFoundError.code, InvalidFetchSessionEpochError.code})
EARLIEST_TIMESTAMP, LATEST_TIMESTAMP = -2, -1
TopicPartition = tuple[str, int]
# a topic in a fetch: its id from Fetch v13 (None when the leader has none), else its name
FetchTopicKey = UUID | str | None
# what a fetch session holds of a partition: leader epoch, fetch offset, last fetched
# epoch, log start offset, partition max bytes
SessionEntry = tuple[int, int, int, int, int]


@dataclass
class FetcherConfig:
    broker_id: int
    num_fetchers: int = 1
    max_wait_ms: int = 500
    min_bytes: int = 1
    max_bytes: int = 10 * 1024 * 1024  # replica.fetch.response.max.bytes
    partition_max_bytes: int = 1024 * 1024  # replica.fetch.max.bytes
    backoff_ms: int = 1000
    socket_timeout_ms: int = 30000
    socket_receive_buffer_bytes: int = 64 * 1024  # replica.socket.receive.buffer.bytes
    connection_setup_timeout_ms: int = 10_000  # socket.connection.setup.timeout.ms
    connection_setup_timeout_max_ms: int = 30_000  # socket.connection.setup.timeout.max.ms


@dataclass(eq=False)
class FetchState:
    partition: Partition
    truncating: bool = True
    delayed_until: float = 0.0
    lag: int = 0  # the leader's high watermark minus our log end (FetcherLagMetrics)
    # Kafka's isReplicaInSync: the last answer found us at the leader's high watermark.
    # Such a follower is not throttled: with acks=all every produce waits for it.
    caught_up: bool = False

    @property
    def tp(self) -> TopicPartition:
        return self.partition.topic, self.partition.index


class ReplicaFetcher:
    """The fetches from one leader for the partitions given to this fetcher."""

    def __init__(self, name: str, leader_id: int, config: FetcherConfig,
                 versions: InterBrokerVersions,
                 endpoint: Callable[[int], tuple[str, int] | None],
                 security_for: Callable[[], ClientSecurity],
                 on_appended: Callable[[Partition, int], None],
                 throttle: ReplicationThrottle | None = None,
                 on_storage_error: Callable[[Partition, Exception], None] | None = None
                 ) -> None:
        self.name = name
        self.throttle = throttle
        self.on_storage_error = on_storage_error  # the log dir goes offline
        self.leader_id = leader_id
        self.config = config
        self.versions = versions
        self.endpoint = endpoint
        # asked at each connection (TLS and SASL): the store files may have changed since
        # the fetcher started (a certificate renewal or CA rotation reloads the listeners)
        self.security_for = security_for
        self.on_appended = on_appended
        self.states: dict[TopicPartition, FetchState] = {}
        self.connection: BrokerConnection | None = None
        self._failed_connects = 0  # in a row: each doubles the next setup timeout
        self._wake = asyncio.Event()
        # the states of the fetch waiting at the leader, and whether restart_long_poll
        # closed its connection on purpose
        self._in_flight: list[FetchState] | None = None
        self._restarting = False
        # Python 3.11's wait_for can swallow a cancellation when the awaited response
        # fails at the same moment: the loop checks this flag as well
        self.closed = False
        # the fetch session at the leader (KIP-227): its id (0: none yet), the epoch the
        # next fetch carries, and each partition's fetch data as the session has it
        self._session_id = 0
        self._session_epoch = INITIAL_EPOCH
        self._session_sent: dict[tuple[FetchTopicKey, int], SessionEntry] = {}
        self.task = asyncio.ensure_future(self._run())

    def add(self, partition: Partition) -> None:
        # Fetch v12+ carries the last fetched epoch, and the leader answers a divergence
        # in its fetch response: no OffsetForLeaderEpoch round trip before the first fetch
        known_epoch = partition.log.epochs.latest_epoch != UNDEFINED_EPOCH
        truncate_on_fetch = self.versions.fetch >= TRUNCATION_ON_FETCH_VERSION
        self.states[(partition.topic, partition.index)] = FetchState(
            partition, truncating=not (known_epoch and truncate_on_fetch))
        self._wake.set()

    def remove(self, tp: TopicPartition) -> None:
        self.states.pop(tp, None)

    def restart_long_poll(self) -> None:
        """Partitions joined (or rejoined, at a new leader epoch) while a fetch waits at the
        leader without them. That fetch can wait replica.fetch.wait.max.ms for data on its
        other partitions, and the leader answers one request per connection at a time: an
        in-sync follower left out so long holds every acks=all produce to the partition.
        Drop the waiting fetch with its connection; the next one asks for everything."""
        in_flight = self._in_flight
        if in_flight is None or self.connection is None:
            return
        now = _now()
        asked = set(in_flight)  # FetchState compares by identity: a re-added one is new
        if any(state not in asked for state in self.states.values()
               if state.delayed_until <= now):
            self._restarting = True
            self._disconnect()

    async def _run(self) -> None:
        log.info("[%s] Starting", self.name)
        backoff = self.config.backoff_ms / 1000
        while not self.closed:
            if not self.states:
                self._wake.clear()
                await self._wake.wait()
                continue
            try:
                connection = await self._connect()
                now = _now()
                truncating = [s for s in self.states.values()
                              if s.truncating and s.delayed_until <= now]
                if truncating:
                    await self._truncate(connection, truncating)
                ready = [s for s in self.states.values()
                         if not s.truncating and s.delayed_until <= now]
                if ready:
                    await self._fetch(connection, ready)
                else:
                    await asyncio.sleep(min(backoff, 0.1))
            except asyncio.CancelledError:
                raise
            except (OSError, ConnectionError, TimeoutError) as exc:
                if self._restarting:  # restart_long_poll: fetch again now, reconnected
                    self._restarting = False
                    continue
                log.warning("[%s] Error in fetch from broker %d: %s", self.name,
                            self.leader_id, exc)
                self._disconnect()
                await asyncio.sleep(backoff)
            except Exception:
                log.exception("[%s] Unexpected error in fetch from broker %d", self.name,
                              self.leader_id)
                self._disconnect()
                await asyncio.sleep(backoff)

    async def _connect(self) -> BrokerConnection:
        if self.connection is not None and not self.connection.closed:
            return self.connection
        address = self.endpoint(self.leader_id)
        if address is None:
            raise ConnectionError(f"no endpoint known for broker {self.leader_id}")
        # Kafka doubles the setup timeout after each failed attempt, up to its maximum
        config = self.config
        timeout_ms = min(config.connection_setup_timeout_ms * 2 ** self._failed_connects,
                         config.connection_setup_timeout_max_ms)
        try:
            security = self.security_for()
            self.connection = await BrokerConnection.connect(
                address[0], address[1], client_id=f"broker-{config.broker_id}-fetcher",
                ssl_context=security.ssl_context, sasl=security.sasl, timeout_s=timeout_ms / 1000,
                receive_buffer_bytes=config.socket_receive_buffer_bytes)
        except (OSError, TimeoutError):
            self._failed_connects = min(self._failed_connects + 1, 16)
            raise
        self._failed_connects = 0
        return self.connection

    def _disconnect(self) -> None:
        self._reset_session()
        if self.connection is not None:
            self.connection.close()
            self.connection = None

    def _reset_session(self) -> None:
        """The next fetch is a full one that opens a new session; it names the old one,
        which closes that at the leader (as Kafka's FetchSessionHandler does)."""
        self._session_epoch = INITIAL_EPOCH
        self._session_sent = {}

    # --- truncation -----------------------------------------------------------------------

    async def _truncate(self, connection: BrokerConnection, states: list[FetchState]) -> None:
        R = OffsetForLeaderEpochRequest
        by_topic: dict[str, list[OffsetForLeaderEpochRequest.OffsetForLeaderPartition]] = {}
        for s in states:
            p = s.partition
            by_topic.setdefault(p.topic, []).append(R.OffsetForLeaderPartition(
                partition=p.index, current_leader_epoch=p.leader_epoch,
                leader_epoch=p.log.epochs.latest_epoch))
        request = R(replica_id=self.config.broker_id, topics=[
            R.OffsetForLeaderTopic(topic=t, partitions=ps) for t, ps in by_topic.items()])
        response = await connection.request(ApiKey.OFFSET_FOR_LEADER_EPOCH,
                                            self.versions.offset_for_leader_epoch, request,
                                            self.config.socket_timeout_ms / 1000)
        answers = {(t.topic, p.partition): p for t in response.topics for p in t.partitions}
        for s in states:
            answer = answers.get(s.tp)
            if s.tp not in self.states or self.states[s.tp] is not s:
                continue  # removed or re-added meanwhile
            if answer is None or answer.error_code:
                self._delay(s, answer.error_code if answer else -1)
                continue
            self._truncate_one(s, answer.leader_epoch, answer.end_offset)

    def _truncate_one(self, state: FetchState, leader_epoch: int, leader_end: int,
                      source: str = "OffsetForLeaderEpoch") -> None:
        plog = state.partition.log
        end = plog.log_end_offset
        target = cut_to_leader(plog, leader_epoch, leader_end)
        if target < end:
            log.info("[%s] Truncating partition %s with leader epoch %d to offset %d (log "
                     "end %d; from %s)", self.name, state.partition.name, leader_epoch,
                     target, end, source)
        state.truncating = False

    # --- fetching -------------------------------------------------------------------------

    def _throttled_limits(self, states: list[FetchState]) -> dict[TopicPartition, int]:
        """The fetch size of each throttled partition: its share of what the follower
        throttle allows now, 0 (not fetched this time) when nothing is left."""
        throttle = self.throttle
        if throttle is None:
            return {}
        throttled = [s.tp for s in states if not s.caught_up and throttle.applies(*s.tp)]
        if not throttled:
            return {}
        available = throttle.quota.available()
        if available == UNLIMITED:
            return {}
        share = int(min(self.config.partition_max_bytes, available / len(throttled)))
        return dict.fromkeys(throttled, max(share, 0))

    async def _fetch(self, connection: BrokerConnection, states: list[FetchState]) -> None:
        version = self.versions.fetch
        limits = self._throttled_limits(states)
        states = [s for s in states if limits.get(s.tp, 1) > 0]
        if not states:  # everything is throttled and over its rate: wait for tokens
            await asyncio.sleep(0.05)
            return
        request = self._fetch_request(states, version, limits, self._max_wait_ms())
        self._in_flight = states
        try:
            response = await connection.request(
                ApiKey.FETCH, version, request,
                self.config.socket_timeout_ms / 1000 + self.config.max_wait_ms / 1000)
        except BaseException:
            self._reset_session()  # the leader may or may not have applied it
            raise
        finally:
            self._in_flight = None
        if self._restarting:  # the answer came before the restart could drop it
            self._restarting = False
        if response.error_code:
            self._reset_session()
            if response.error_code in SESSION_ERRORS:  # evicted, or out of step: anew
                log.info("[%s] Fetch session %d at broker %d ended with error %d; starting "
                         "a new one", self.name, request.session_id, self.leader_id,
                         response.error_code)
                return
            log.warning("[%s] Fetch from broker %d failed with error %d", self.name,
                        self.leader_id, response.error_code)
            await asyncio.sleep(self.config.backoff_ms / 1000)
            return
        self._session_answered(request, response)
        by_key = {((s.partition.topic_id if version >= 13 else s.partition.topic),
                   s.partition.index): s for s in states}
        for topic in response.responses:
            key_topic = topic.topic_id if version >= 13 else topic.topic
            for data in topic.partitions:
                state = by_key.get((key_topic, data.partition_index))
                if state is None or self.states.get(state.tp) is not state:
                    continue
                if data.error_code:
                    await self._on_error(connection, state, data.error_code)
                    continue
                diverging = data.diverging_epoch
                if diverging.epoch >= 0:  # no records: truncate, then fetch again
                    self._truncate_one(state, diverging.epoch, diverging.end_offset,
                                       "the diverging epoch of a fetch response")
                    continue
                if state.tp in limits and data.records:
                    assert self.throttle is not None
                    self.throttle.quota.record(len(data.records))
                try:
                    self._append(state, data)
                except KafkaError as exc:  # a corrupt batch, a full disk: this one waits
                    log.error("[%s] Error appending to %s: %s", self.name,
                              state.partition.name, exc)
                    self._delay(state, exc.code)
                    if isinstance(exc, KafkaStorageError) and self.on_storage_error:
                        self.on_storage_error(state.partition, exc)

    def _max_wait_ms(self) -> int:
        """How long the leader may hold this fetch: replica.fetch.wait.max.ms, but no
        longer than until a partition backing off (left out of it) may fetch again: after
        UNKNOWN_LEADER_EPOCH that is 50 ms, and an in-sync follower kept out for a whole
        long poll holds every acks=all produce to its partition that long."""
        now = _now()
        due = [s.delayed_until for s in self.states.values() if s.delayed_until > now]
        if not due:
            return self.config.max_wait_ms
        return max(0, min(self.config.max_wait_ms, int((min(due) - now) * 1000)))

    def _fetch_request(self, states: list[FetchState], version: int,
                       limits: dict[TopicPartition, int], max_wait_ms: int) -> FetchRequest:
        """The fetch for these partitions: a full one (opening a session), or within the
        session only the partitions whose fetch data changed and those to forget."""
        F = FetchRequest
        by_topic: dict[FetchTopicKey, list[FetchRequest.FetchPartition]] = {}
        names: dict[FetchTopicKey, str] = {}
        sessions = version >= SESSIONS_VERSION
        incremental = sessions and self._session_epoch != INITIAL_EPOCH
        sent = self._session_sent
        now_sent: dict[tuple[FetchTopicKey, int], SessionEntry] = {}
        for s in states:
            p = s.partition
            key = p.topic_id if version >= 13 else p.topic
            data = (p.leader_epoch, p.log.log_end_offset,
                    p.log.epochs.latest_epoch if version >= TRUNCATION_ON_FETCH_VERSION else -1,
                    p.log.log_start_offset, limits.get(s.tp, self.config.partition_max_bytes))
            now_sent[(key, p.index)] = data
            if incremental and sent.get((key, p.index)) == data:
                continue  # the session has it as it is
            names[key] = p.topic
            by_topic.setdefault(key, []).append(F.FetchPartition(
                partition=p.index, current_leader_epoch=data[0], fetch_offset=data[1],
                last_fetched_epoch=data[2], log_start_offset=data[3],
                partition_max_bytes=data[4]))
        forgotten: dict[FetchTopicKey, list[int]] = {}
        if incremental:
            for key, index in sent.keys() - now_sent.keys():
                forgotten.setdefault(key, []).append(index)
        if sessions:
            self._session_sent = now_sent
        request = F(replica_id=self.config.broker_id, max_wait_ms=max_wait_ms,
                    min_bytes=self.config.min_bytes, max_bytes=self.config.max_bytes,
                    isolation_level=0, session_id=self._session_id if sessions else 0,
                    session_epoch=self._session_epoch if sessions else FINAL_EPOCH,
                    topics=[F.FetchTopic(topic=names[k], topic_id=k if version >= 13 else None,
                                         partitions=ps) for k, ps in by_topic.items()],
                    forgotten_topics_data=[
                        F.ForgottenTopic(topic=k if version < 13 else "",
                                         topic_id=k if version >= 13 else None,
                                         partitions=sorted(ps))
                        for k, ps in forgotten.items()],
                    rack_id="")
        if version >= 15:
            request.replica_id = -1
            request.replica_state = F.ReplicaState(replica_id=self.config.broker_id,
                                                   replica_epoch=-1)
        return request

    def _session_answered(self, request: FetchRequest, response: FetchResponse) -> None:
        """Follow the session the answer names: opened by a full fetch, or carried on."""
        if request.session_epoch == FINAL_EPOCH:
            return  # no sessions at this version
        if request.session_epoch == INITIAL_EPOCH:
            self._session_id = response.session_id
            if response.session_id == 0:  # the leader keeps none (no slots): full again
                self._reset_session()
                return
        elif response.session_id != self._session_id:
            self._reset_session()
            return
        self._session_epoch = next_epoch(request.session_epoch)

    def _append(self, state: FetchState, data: FetchResponse.PartitionData) -> None:
        partition = state.partition
        plog = partition.log
        records = data.records
        if records:
            whole = complete_length(records)  # a size limit may have cut the last batch
            if whole < len(records):
                records = memoryview(records)[:whole]
        if records:
            plog.append_as_follower(records)
        # a follower's high watermark: the leader's, as far as this log reaches
        plog.update_high_watermark(min(data.high_watermark, plog.log_end_offset))
        if plog.log_start_offset < data.log_start_offset <= plog.high_watermark:
            plog.delete_records(data.log_start_offset)
        state.lag = max(data.high_watermark - plog.log_end_offset, 0)
        state.caught_up = state.lag == 0
        if records:
            self.on_appended(partition, len(records))
        else:  # the leader's high watermark alone moved: consumers reading here may wake
            partition.wake_for_high_watermark()

    async def _on_error(self, connection: BrokerConnection, state: FetchState,
                        code: int) -> None:
        if code != OFFSET_OUT_OF_RANGE:
            self._delay(state, code)
            return
        # Kafka's rule: past the leader's end, truncate to it; before the leader's start,
        # start over at the leader's start
        plog = state.partition.log
        latest = await self._leader_offset(connection, state, LATEST_TIMESTAMP)
        if latest is not None and plog.log_end_offset > latest:
            log.warning("[%s] Truncating %s to the leader's end offset %d", self.name,
                        state.partition.name, latest)
            plog.truncate_to(max(latest, plog.high_watermark))
            return
        earliest = await self._leader_offset(connection, state, EARLIEST_TIMESTAMP)
        if earliest is not None and plog.log_end_offset < earliest:
            log.warning("[%s] Restarting %s at the leader's log start offset %d", self.name,
                        state.partition.name, earliest)
            plog.truncate_fully_and_start_at(earliest)
            return
        self._delay(state, code)

    async def _leader_offset(self, connection: BrokerConnection, state: FetchState,
                             timestamp: int) -> int | None:
        L = ListOffsetsRequest
        p = state.partition
        request = L(replica_id=self.config.broker_id, isolation_level=0, topics=[
            L.ListOffsetsTopic(name=p.topic, partitions=[L.ListOffsetsPartition(
                partition_index=p.index, current_leader_epoch=p.leader_epoch,
                timestamp=timestamp)])])
        response = await connection.request(ApiKey.LIST_OFFSETS, 4, request,
                                            self.config.socket_timeout_ms / 1000)
        answer = response.topics[0].partitions[0]
        return None if answer.error_code else answer.offset

    def _delay(self, state: FetchState, code: int) -> None:
        delay = retry_delay_s(code, self.config.backoff_ms / 1000)
        log.info("[%s] Partition %s backs off for %.2f s after error %d from broker %d",
                 self.name, state.partition.name, delay, code, self.leader_id)
        state.delayed_until = _now() + delay
        state.truncating = True  # a leader change may follow: check for divergence again

    def close(self) -> None:
        self.closed = True
        self._wake.set()
        self.task.cancel()
        self._disconnect()


class ReplicaFetcherManager:
    def __init__(self, config: FetcherConfig, versions: InterBrokerVersions,
                 endpoint: Callable[[int], tuple[str, int] | None],
                 security_for: Callable[[], ClientSecurity],
                 on_appended: Callable[[Partition, int], None],
                 throttle: ReplicationThrottle | None = None,
                 on_storage_error: Callable[[Partition, Exception], None] | None = None
                 ) -> None:
        self.config = config
        self.throttle = throttle  # shared by the fetchers: the rate is per broker
        self.on_storage_error = on_storage_error
        self.versions = versions
        self.endpoint = endpoint
        self.security_for = security_for
        self.on_appended = on_appended
        self.fetchers: dict[tuple[int, int], ReplicaFetcher] = {}
        self.assigned: dict[TopicPartition, tuple[int, int]] = {}
        self.closed = False
        self._closing: set[asyncio.Future[None]] = set()  # stopped fetchers' tasks

    def add_partition(self, partition: Partition, leader_id: int) -> None:
        """Follow leader_id for this partition (again from truncation, as after any
        LeaderAndIsr that makes this broker a follower)."""
        if self.closed:
            return  # the broker is shutting down
        tp = (partition.topic, partition.index)
        self.remove_partitions([tp])
        key = (leader_id, hash(tp) % max(self.config.num_fetchers, 1))
        fetcher = self.fetchers.get(key)
        if fetcher is None:
            fetcher = self.fetchers[key] = ReplicaFetcher(
                f"ReplicaFetcherThread-{key[1]}-{leader_id}", leader_id, self.config,
                self.versions, self.endpoint, self.security_for, self.on_appended,
                self.throttle, self.on_storage_error)
        fetcher.add(partition)
        self.assigned[tp] = key

    def follows(self, tp: TopicPartition, leader_id: int) -> bool:
        key = self.assigned.get(tp)
        return key is not None and key[0] == leader_id

    def restart_long_polls(self) -> None:
        """After a LeaderAndIsr: fetchers that got partitions while a fetch was waiting
        ask again at once (ReplicaFetcher.restart_long_poll)."""
        for fetcher in self.fetchers.values():
            fetcher.restart_long_poll()

    def remove_partitions(self, tps: list[TopicPartition]) -> None:
        for tp in tps:
            key = self.assigned.pop(tp, None)
            if key is None:
                continue
            fetcher = self.fetchers.get(key)
            if fetcher is not None:
                fetcher.remove(tp)
                if not fetcher.states:
                    self._close(fetcher)
                    del self.fetchers[key]

    def _close(self, fetcher: ReplicaFetcher) -> None:
        # asyncio holds tasks weakly: keep the cancelled one until it has finished
        fetcher.close()
        self._closing.add(fetcher.task)
        fetcher.task.add_done_callback(self._closing.discard)

    def shutdown(self) -> None:
        self.closed = True
        for fetcher in self.fetchers.values():
            self._close(fetcher)
        self.fetchers.clear()
        self.assigned.clear()


def truncation_offset(plog: PartitionLog, leader_epoch: int, leader_end: int) -> int:
    """Where a follower cuts its log, given the leader's (epoch, end offset) for the
    follower's latest epoch, from OffsetForLeaderEpoch or a fetch's diverging epoch."""
    if leader_end == UNDEFINED_OFFSET or leader_epoch == UNDEFINED_EPOCH:
        # the leader knows nothing of our epoch: keep what is committed
        target = plog.high_watermark
    else:
        # where the epoch the leader names ends in our log bounds what we keep
        _, ours = plog.epochs.end_offset_for(leader_epoch, plog.log_end_offset)
        target = min(leader_end, ours if ours != UNDEFINED_OFFSET else leader_end)
    return min(target, plog.log_end_offset)


def cut_to_leader(plog: PartitionLog, leader_epoch: int, leader_end: int) -> int:
    """Truncate a follower's log for the leader's (epoch, end offset); returns the cut.
    It truncates even at the log end: that drops an epoch this broker assigned when it
    became leader and never wrote under, which would otherwise make every later fetch
    diverge again (Kafka's truncateTo does the same)."""
    target = truncation_offset(plog, leader_epoch, leader_end)
    plog.truncate_to(target)
    return target


def retry_delay_s(code: int, backoff_s: float) -> float:
    """How long a partition waits after its fetch failed with this error code: briefly when
    the leader only lags the controller (LEADER_BEHIND_ERRORS), else the fetch backoff."""
    return min(backoff_s, LEADER_BEHIND_RETRY_S) if code in LEADER_BEHIND_ERRORS else backoff_s


def _now() -> float:
    # the clock of asyncio's loop.time(), without asking for the running loop (a getpid
    # system call in CPython 3.11) at every fetch: the fetcher compares only its own
    # readings of it
    return time.monotonic()

