"""Metadata v10+ by topic id: Kafka's Java AdminClient (describeTopics by id) sends each
topic's id with the name left at its default "" (not null); the id decides, as in Kafka's
broker. Found by the reference lab's java-client.admin scenario, where the client threw
"Use errors() when managing topic using topic name" at Moldau's answer (an
INVALID_TOPIC_EXCEPTION for the name "", without the id)."""

from __future__ import annotations

import uuid
from types import SimpleNamespace
from typing import Any

from moldau.errors import UnknownTopicIdError
from moldau.protocol.generated.metadata_request import MetadataRequest
from moldau.server.handlers.metadata import MetadataHandler
from moldau.server.metadata_cache import MetadataCache, PartitionInfo, TopicInfo

Topic = MetadataRequest.MetadataRequestTopic
TOPIC_ID = uuid.UUID("6a0d3ae1-6bd4-4c5e-9a49-07f2b0c3c6a1")


def _ask(*topics: Any) -> Any:
    metadata = MetadataCache(1)
    metadata.initialized = True
    metadata.put_topic(TopicInfo("orders", TOPIC_ID, {0: PartitionInfo(0, 1, 0, [1], [1])}))
    handler = MetadataHandler(1, {"auto.create.topics.enable": True}, metadata, SimpleNamespace())
    ctx = SimpleNamespace(api_version=12, listener="PLAINTEXT", authorize=lambda *args: True)
    request = MetadataRequest(topics=list(topics), allow_auto_topic_creation=False,
                              include_topic_authorized_operations=False)
    return handler(ctx, request).topics


def test_an_id_beside_an_empty_name_is_looked_up_by_id() -> None:
    [answer] = _ask(Topic(topic_id=TOPIC_ID, name=""))
    assert (answer.error_code, answer.name, answer.topic_id) == (0, "orders", TOPIC_ID)
    assert [p.partition_index for p in answer.partitions] == [0]


def test_an_unknown_id_beside_an_empty_name_is_unknown_topic_id() -> None:
    other = uuid.UUID(int=1)
    [answer] = _ask(Topic(topic_id=other, name=""))
    assert (answer.error_code, answer.name, answer.topic_id) == (UnknownTopicIdError.code,
                                                                 None, other)


def test_a_null_name_with_an_id_still_works() -> None:
    [answer] = _ask(Topic(topic_id=TOPIC_ID, name=None))
    assert (answer.error_code, answer.name) == (0, "orders")
