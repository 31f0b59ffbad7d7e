"""Fetch sessions for followers (KIP-227, Kafka's FetchSession and FetchSessionCache).

A follower's first fetch (session id 0, epoch 0) is a full one, and its answer names a
new session. Its later fetches are incremental: they carry only the partitions whose
fetch position changed (and the ones to forget), and their answers only the partitions
with news: records, an error, a diverging epoch, or a high watermark, last stable or log
start offset other than the one sent last. The leader still reads every partition of the
session at its last known position, so an idle partition's follower keeps counting as
caught up. A follower that stopped fetching three of its four partitions used to cost
both brokers the read, encoding and decoding of all four per fetch.

Only followers get sessions here; consumers are answered session id 0, which tells them
to keep sending full fetch requests (Kafka's answer when its session cache is full).
"""

from __future__ import annotations

import collections
import itertools
from dataclasses import dataclass, field
from typing import TYPE_CHECKING
from uuid import UUID

from moldau.errors import FetchSessionIdNotFoundError, InvalidFetchSessionEpochError
from moldau.protocol.fetch_session import INT32_MAX

if TYPE_CHECKING:
    from moldau.protocol.generated.fetch_request import FetchRequest
    from moldau.protocol.generated.fetch_response import FetchResponse

FETCH_SESSION_ID_NOT_FOUND = FetchSessionIdNotFoundError.code
INVALID_FETCH_SESSION_EPOCH = InvalidFetchSessionEpochError.code
# how a fetch names a topic: by id from v13, by name before
TopicKey = UUID | str


@dataclass
class CachedPartition:
    """A session partition: the follower's last fetch position for it (the request's
    FetchPartition) and what its last answer told the follower."""

    topic: TopicKey
    fetch: FetchRequest.FetchPartition  # the one last sent
    high_watermark: int = -2  # -2: nothing sent yet
    last_stable_offset: int = -2
    log_start_offset: int = -2

    def changed(self, data: FetchResponse.PartitionData) -> bool:
        """Whether the answer must carry this partition; if so, remember what it says."""
        if (data.records is not None and len(data.records)) or data.error_code \
                or data.diverging_epoch.epoch >= 0 or data.preferred_read_replica >= 0 \
                or data.high_watermark != self.high_watermark \
                or data.last_stable_offset != self.last_stable_offset \
                or data.log_start_offset != self.log_start_offset:
            self.high_watermark = data.high_watermark
            self.last_stable_offset = data.last_stable_offset
            self.log_start_offset = data.log_start_offset
            return True
        return False


@dataclass
class FetchSession:
    id: int
    epoch: int  # the epoch the next incremental fetch must carry
    # (topic key, partition) -> CachedPartition, in the order the partitions came
    partitions: dict[tuple[TopicKey, int], CachedPartition] = field(default_factory=dict)

    def update(self, topics: list[FetchRequest.FetchTopic],
               forgotten: list[FetchRequest.ForgottenTopic], by_id: bool) -> None:
        """Apply a fetch request: its partitions are added or take their new position,
        forgotten ones leave."""
        for gone in forgotten:
            key = gone.topic_id if by_id else gone.topic
            for index in gone.partitions:
                self.partitions.pop((key, index), None)
        for topic in topics:
            key = topic.topic_id if by_id else topic.topic
            for fp in topic.partitions:
                cached = self.partitions.get((key, fp.partition))
                if cached is None:
                    self.partitions[(key, fp.partition)] = CachedPartition(key, fp)
                else:
                    cached.fetch = fp

    def topics(self, template: type[FetchRequest.FetchTopic]) -> list[FetchRequest.FetchTopic]:
        """The session's partitions as the request's topics (FetchTopic objects made from
        `template`'s class), every partition at its last known position."""
        grouped: dict[TopicKey, list[FetchRequest.FetchPartition]] = {}
        for cached in self.partitions.values():
            grouped.setdefault(cached.topic, []).append(cached.fetch)
        out = []
        for key, partitions in grouped.items():
            topic = template(partitions=partitions)
            if isinstance(key, str):
                topic.topic = key
            else:
                topic.topic_id = key
            out.append(topic)
        return out

    def filter(self, response: FetchResponse, by_id: bool) -> None:
        """Keep in an incremental answer only the partitions with news."""
        kept = []
        # the generated fields type their elements loosely: name what they are
        topic: FetchResponse.FetchableTopicResponse
        data: FetchResponse.PartitionData
        for topic in response.responses:
            key = topic.topic_id if by_id else topic.topic
            partitions = []
            for data in topic.partitions:
                cached = self.partitions.get((key, data.partition_index))
                if cached is None or cached.changed(data):
                    partitions.append(data)
            if partitions:
                topic.partitions = partitions
                kept.append(topic)
        response.responses = kept

    def remember(self, response: FetchResponse, by_id: bool) -> None:
        """A full answer carries every partition: note what each said."""
        topic: FetchResponse.FetchableTopicResponse
        data: FetchResponse.PartitionData
        for topic in response.responses:
            key = topic.topic_id if by_id else topic.topic
            for data in topic.partitions:
                cached = self.partitions.get((key, data.partition_index))
                if cached is not None:
                    cached.changed(data)


class FetchSessionCache:
    """Sessions by id, the least recently used evicted past `slots`
    (max.incremental.fetch.session.cache.slots)."""

    def __init__(self, slots: int = 1000) -> None:
        self.slots = slots
        self._sessions: collections.OrderedDict[int, FetchSession] = collections.OrderedDict()
        self._ids = itertools.count(1)

    def __len__(self) -> int:
        return len(self._sessions)

    def create(self) -> FetchSession | None:
        if self.slots <= 0:
            return None
        while len(self._sessions) >= self.slots:
            self._sessions.popitem(last=False)
        session_id = next(self._ids)
        if session_id > INT32_MAX:
            self._ids = itertools.count(1)
            session_id = next(self._ids)
        session = self._sessions[session_id] = FetchSession(session_id, 1)
        return session

    def get(self, session_id: int) -> FetchSession | None:
        session = self._sessions.get(session_id)
        if session is not None:
            self._sessions.move_to_end(session_id)
        return session

    def remove(self, session_id: int) -> None:
        self._sessions.pop(session_id, None)
