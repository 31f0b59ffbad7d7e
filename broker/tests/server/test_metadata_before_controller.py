"""A broker that has not yet applied the controller's first UpdateMetadata must not call a
topic unknown: librdkafka takes UNKNOWN_TOPIC_OR_PARTITION as the topic's deletion and
fails every queued record (seen in a rolling restart, when a client asked a broker that
had just started). The handler is tested on its own, with a real MetadataCache."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from moldau.errors import LeaderNotAvailableError, UnknownTopicOrPartitionError
from moldau.protocol.generated.metadata_request import MetadataRequest
from moldau.server.handlers.metadata import MetadataHandler
from moldau.server.metadata_cache import MetadataCache
from moldau.server.partition_states import PartitionStates

Topic = MetadataRequest.MetadataRequestTopic


def _broker() -> Any:
    metadata = MetadataCache(2)
    unused: Any = None  # an UpdateMetadata without deletions touches only the cache
    states = PartitionStates(2, unused, metadata, unused, unused, unused, unused, set())
    return SimpleNamespace(broker_id=2, metadata=metadata,
                           config={"auto.create.topics.enable": True},
                           topics=SimpleNamespace(auto_create=_no_create),
                           apply_update_metadata=states.apply_update_metadata)


def _handler(broker: Any) -> MetadataHandler:
    return MetadataHandler(broker.broker_id, broker.config, broker.metadata, broker.topics)


def _no_create(name: str) -> None:
    raise AssertionError(f"auto-created {name} before the cluster's metadata was known")


def _ask(broker: Any, name: str) -> Any:
    ctx = SimpleNamespace(api_version=9, listener="PLAINTEXT",
                          authorize=lambda *args: True)
    request = MetadataRequest(topics=[Topic(name=name)], allow_auto_topic_creation=False,
                              include_topic_authorized_operations=False)
    return _handler(broker)(ctx, request).topics[0]


def test_a_topic_is_not_unknown_before_the_first_update_metadata() -> None:
    broker = _broker()
    answer = _ask(broker, "operations")
    assert answer.error_code == LeaderNotAvailableError.code
    assert answer.partitions == []


def test_an_absent_topic_is_unknown_once_the_controller_has_spoken() -> None:
    broker = _broker()
    broker.apply_update_metadata([], [], [])
    assert broker.metadata.initialized
    assert _ask(broker, "operations").error_code == UnknownTopicOrPartitionError.code


def test_no_auto_creation_before_the_first_update_metadata() -> None:
    broker = _broker()
    broker.config = {"auto.create.topics.enable": True}
    request = MetadataRequest(topics=[Topic(name="new-topic")],
                              allow_auto_topic_creation=True,
                              include_topic_authorized_operations=False)
    ctx = SimpleNamespace(api_version=9, listener="PLAINTEXT", authorize=lambda *a: True)
    answer = _handler(broker)(ctx, request).topics[0]
    assert answer.error_code == LeaderNotAvailableError.code  # and _no_create was not called
