"""The controller's requests survive the wire in every version a broker may send: what the
receiving broker reads back equals what the controller decided."""

from __future__ import annotations

import uuid

import pytest

from moldau.cluster import zk_data
from moldau.cluster.controller import PartitionDecision
from moldau.protocol._runtime import ZERO_UUID
from moldau.protocol.fit import fit_to_version
from moldau.protocol.generated.api import ApiKey
from moldau.protocol.generated.metadata_response import MetadataResponse
from moldau.protocol.generated.request_header import RequestHeader
from moldau.protocol.headers import decode_request, encode_request
from moldau.replication.protocol_versions import (
    UnknownProtocolVersionError,
    parse,
    versions_for,
)
from moldau.server import controller_channel as cc
from moldau.server.metadata_cache import BrokerEndpoints, MetadataCache, TopicInfo

TOPIC_ID = uuid.uuid4()
DECISIONS = [PartitionDecision("t", TOPIC_ID, 0, 1, 3, [1, 2], [1, 2, 3], 7, 2),
             PartitionDecision("t", TOPIC_ID, 1, 2, 0, [2], [2, 3], 0, 2),
             PartitionDecision("u", uuid.uuid4(), 0, -1, 4, [3], [3], 9, 2)]
BROKER = zk_data.BrokerRegistration(
    id=1, rack="r1", endpoints=[zk_data.EndPoint("INTERNAL", "h1", 9093, "SSL"),
                                zk_data.EndPoint("PLAINTEXT", "h1", 9092, "PLAINTEXT")])


def round_trip(api_key: int, version: int, body: object) -> object:
    header = RequestHeader(request_api_key=api_key, request_api_version=version,
                           correlation_id=1, client_id="controller-1")
    data = encode_request(header, fit_to_version(body, version))
    return decode_request(data[4:])[1]


def topic_ids(name: str) -> uuid.UUID:
    return next(d.topic_id for d in DECISIONS if d.topic == name)


@pytest.mark.parametrize("version", range(8))
def test_leader_and_isr(version: int) -> None:
    # the partitions' states were written by a controller of epoch 2; epoch 5 sends them
    request = cc.leader_and_isr_request(DECISIONS, 1, 55, [], 5)
    back = round_trip(ApiKey.LEADER_AND_ISR, version, request)
    assert cc.decisions_from_leader_and_isr(back, version, topic_ids) == DECISIONS
    assert back.controller_epoch == 5
    assert back.broker_epoch == (55 if version >= 2 else -1)


@pytest.mark.parametrize("version", range(3, 9))
def test_update_metadata(version: int) -> None:
    request = cc.update_metadata_request(DECISIONS, ["gone"], [BROKER], 1, 55, 2)
    back = round_trip(ApiKey.UPDATE_METADATA, version, request)
    live, decisions, deleted = cc.read_update_metadata(back, version, topic_ids)
    assert decisions == DECISIONS and deleted == ["gone"]
    assert live == [BROKER] and live[0].rack == "r1"
    offline = {(p.topic_name, p.partition_index): p.offline_replicas
               for p in back.ungrouped_partition_states} if version < 5 else {
        (t.topic_name, p.partition_index): p.offline_replicas
        for t in back.topic_states for p in t.partition_states}
    assert offline[("t", 0)] == ([2, 3] if version >= 4 else [])  # only broker 1 is alive


@pytest.mark.parametrize("version", range(5))
@pytest.mark.parametrize("delete", [True, False])
def test_stop_replica(version: int, delete: bool) -> None:
    request = cc.stop_replica_request([("t", 0), ("t", 1), ("u", 0)], delete, 1, 55, 2)
    back = round_trip(ApiKey.STOP_REPLICA, version, request)
    assert cc.read_stop_replica(back, version) == {
        delete: [("t", 0), ("t", 1), ("u", 0)], not delete: []}


def test_inter_broker_protocol_gates_the_versions() -> None:
    assert versions_for("3.9") == versions_for("3.9-IV0")
    latest = versions_for("3.9-IV0")
    assert (latest.leader_and_isr, latest.update_metadata, latest.stop_replica,
            latest.fetch) == (7, 8, 4, 17)
    old = versions_for("2.8")
    assert (old.leader_and_isr, old.update_metadata, old.stop_replica, old.fetch) == (
        5, 7, 3, 12)
    assert versions_for("3.5-IV0").fetch == 14 and versions_for("3.7-IV4").fetch == 16
    assert parse("3.4") == "3.4-IV0"
    for bad in ("2.7", "3.10", "banana", ""):
        with pytest.raises(UnknownProtocolVersionError):
            parse(bad)


def no_ids(name: str) -> None:
    return None  # a broker that has not seen the topic yet


@pytest.mark.parametrize(("api_key", "version"), [(ApiKey.LEADER_AND_ISR, 4),
                                                  (ApiKey.UPDATE_METADATA, 6)])
def test_below_ibp_2_8_iv1_an_unknown_topic_gets_the_zero_id(api_key: int, version: int) -> None:
    """LeaderAndIsr v4 and UpdateMetadata v6 (IBP 2.8-IV0) carry no topic ids: a topic the
    broker has not seen gets Kafka's zero id, which Metadata v10+ can encode, not None."""
    if api_key == ApiKey.LEADER_AND_ISR:
        back = round_trip(api_key, version, cc.leader_and_isr_request(DECISIONS, 1, 55, [], 5))
        decisions = cc.decisions_from_leader_and_isr(back, version, no_ids)
    else:
        back = round_trip(api_key, version,
                          cc.update_metadata_request(DECISIONS, [], [BROKER], 1, 55, 2))
        decisions = cc.read_update_metadata(back, version, no_ids)[1]
    assert {d.topic_id for d in decisions} == {ZERO_UUID}
    cache = MetadataCache(1)
    cache.set_brokers([BrokerEndpoints(1, {"PLAINTEXT": ("h1", 9092)}, None)])
    for name in ("t", "u"):
        cache.put_topic(TopicInfo(name, ZERO_UUID))
    assert cache.topic_names == {}  # the zero id names no topic
    response = MetadataResponse(topics=[MetadataResponse.MetadataResponseTopic(
        name="t", topic_id=cache.topic_id("t"), partitions=[])])
    assert MetadataResponse.decode(response.encode(12), 12).topics[0].topic_id == ZERO_UUID
