"""Fetch sessions (KIP-227) for followers: the leader's session cache and what an
incremental fetch and its answer carry; the follower's side of a session."""

from __future__ import annotations

import uuid
from types import SimpleNamespace
from typing import Any

from moldau.protocol.fetch_session import next_epoch
from moldau.protocol.generated.fetch_request import FetchRequest as F
from moldau.protocol.generated.fetch_response import FetchResponse as R
from moldau.replication.protocol_versions import versions_for
from moldau.replication.replica_fetcher import FetcherConfig, FetchState, ReplicaFetcher
from moldau.server.fetch_sessions import FetchSessionCache
from moldau.server.responses import FileRecords

TOPIC = uuid.uuid4()


def _fp(index: int, offset: int) -> Any:
    return F.FetchPartition(partition=index, current_leader_epoch=0, fetch_offset=offset,
                            last_fetched_epoch=0, log_start_offset=0, partition_max_bytes=100)


def _answer(*partitions: tuple[int, int, int]) -> Any:
    """A full answer: (partition, high watermark, record bytes) each."""
    return R(responses=[R.FetchableTopicResponse(topic="t", topic_id=TOPIC, partitions=[
        R.PartitionData(partition_index=i, high_watermark=hw, last_stable_offset=hw,
                        log_start_offset=0, records=FileRecords(3, 0, size) if size else b"")
        for i, hw, size in partitions])])


def test_an_incremental_answer_carries_only_partitions_with_news() -> None:
    cache = FetchSessionCache()
    session = cache.create()
    assert session is not None and session.epoch == 1
    session.update([F.FetchTopic(topic_id=TOPIC, partitions=[_fp(0, 10), _fp(1, 20),
                                                             _fp(2, 30)])], [], True)
    session.remember(_answer((0, 10, 0), (1, 20, 0), (2, 30, 0)), True)

    # the follower moved partition 0 on; the leader has new records for 1, nothing for 2
    session.update([F.FetchTopic(topic_id=TOPIC, partitions=[_fp(0, 15)])], [], True)
    assert next(t.partitions for t in session.topics(F.FetchTopic))[0].fetch_offset == 15
    answer = _answer((0, 15, 0), (1, 20, 500), (2, 30, 0))
    session.filter(answer, True)
    assert [p.partition_index for p in answer.responses[0].partitions] == [0, 1]

    # nothing new at all: an empty answer
    answer = _answer((0, 15, 0), (1, 20, 0), (2, 30, 0))
    session.filter(answer, True)
    assert answer.responses == []

    # a forgotten partition leaves the session
    session.update([], [F.ForgottenTopic(topic_id=TOPIC, partitions=[2])], True)
    assert [p.partition for t in session.topics(F.FetchTopic) for p in t.partitions] == [0, 1]


def test_the_cache_evicts_the_least_recently_used_session() -> None:
    cache = FetchSessionCache(slots=2)
    first, second = cache.create(), cache.create()
    assert first is not None and second is not None
    assert cache.get(first.id) is first  # first is now the most recently used
    third = cache.create()
    assert third is not None
    assert cache.get(second.id) is None and cache.get(first.id) is first and len(cache) == 2
    assert FetchSessionCache(slots=0).create() is None
    assert next_epoch(5) == 6 and next_epoch(2**31 - 1) == 1


def _fetcher() -> Any:
    """A ReplicaFetcher's session bookkeeping, without its task."""
    fetcher: Any = ReplicaFetcher.__new__(ReplicaFetcher)
    fetcher.config = FetcherConfig(broker_id=2)
    fetcher.versions = versions_for("3.9")
    fetcher._session_id = 0
    ReplicaFetcher._reset_session(fetcher)
    return fetcher


def _state(index: int, end: int) -> FetchState:
    log = SimpleNamespace(log_end_offset=end, log_start_offset=0,
                          epochs=SimpleNamespace(latest_epoch=3))
    partition = SimpleNamespace(topic="t", index=index, topic_id=TOPIC, leader_epoch=3,
                                log=log)
    return FetchState(partition, truncating=False)  # type: ignore[arg-type]


def test_the_follower_sends_only_what_changed_and_forgets_what_left() -> None:
    fetcher = _fetcher()
    states = [_state(0, 10), _state(1, 20), _state(2, 30)]
    full = ReplicaFetcher._fetch_request(fetcher, states, 17, {}, 500)
    assert (full.session_id, full.session_epoch) == (0, 0)
    assert [p.partition for p in full.topics[0].partitions] == [0, 1, 2]
    ReplicaFetcher._session_answered(fetcher, full, R(session_id=7))
    assert (fetcher._session_id, fetcher._session_epoch) == (7, 1)

    states[0].partition.log.log_end_offset = 12  # appended what the answer brought
    incremental = ReplicaFetcher._fetch_request(fetcher, states[:2], 17, {}, 500)
    assert (incremental.session_id, incremental.session_epoch) == (7, 1)
    assert [(p.partition, p.fetch_offset) for p in incremental.topics[0].partitions] == [(0, 12)]
    assert [(t.topic_id, t.partitions) for t in incremental.forgotten_topics_data] == [
        (TOPIC, [2])]
    ReplicaFetcher._session_answered(fetcher, incremental, R(session_id=7))
    assert fetcher._session_epoch == 2

    # an answer naming another session (the leader lost ours): a full fetch follows,
    # naming the old session so that the leader closes it
    ReplicaFetcher._session_answered(fetcher, incremental, R(session_id=9))
    again = ReplicaFetcher._fetch_request(fetcher, states, 17, {}, 500)
    assert (again.session_id, again.session_epoch) == (7, 0)
    assert len(again.topics[0].partitions) == 3 and again.forgotten_topics_data == []
    ReplicaFetcher._session_answered(fetcher, again, R(session_id=8))
    assert (fetcher._session_id, fetcher._session_epoch) == (8, 1)


def test_a_leader_without_sessions_gets_full_fetches() -> None:
    fetcher = _fetcher()
    states = [_state(0, 10)]
    for _ in range(2):
        request = ReplicaFetcher._fetch_request(fetcher, states, 17, {}, 500)
        assert (request.session_id, request.session_epoch) == (0, 0)
        ReplicaFetcher._session_answered(fetcher, request, R(session_id=0))
