"""Delegation tokens in ZooKeeper (zk_token_ops): the token znode's JSON byte for byte as
Kafka 3.9 writes it and every version it ever wrote read back, and the operations and
change notifications against the real ensemble."""

from __future__ import annotations

import json

import pytest

from moldau.cluster import zk_token_ops as zt
from moldau.cluster.zk_client import KafkaZkClient
from moldau.security.delegation_tokens import TokenInformation
from moldau.security.principal import KafkaPrincipal

ALICE, BOB, ADMIN = KafkaPrincipal("alice"), KafkaPrincipal("bob"), KafkaPrincipal("admin")


def info(token_id: str = "tok-1", expiry: int = 1_700_086_400_000) -> TokenInformation:
    return TokenInformation(token_id, ALICE, ADMIN, (BOB, KafkaPrincipal("CN=x y")),
                            1_700_000_000_000, 1_700_604_800_000, expiry)


def test_the_znode_is_kafkas_json_v3() -> None:
    # keys in the iteration order of the Scala immutable map Kafka serialises (a CHAMP
    # HashMap of eight keys), principals through the Sanitizer
    assert zt.encode_token_info(info()) == (
        b'{"issueTimestamp":1700000000000,"renewers":["User%3Abob","User%3ACN%3Dx%20y"],'
        b'"tokenRequester":"User%3Aadmin","tokenId":"tok-1","owner":"User%3Aalice",'
        b'"expiryTimestamp":1700086400000,"maxTimestamp":1700604800000,"version":3}')
    assert zt.decode_token_info(zt.encode_token_info(info())) == info()


def test_older_versions_read_with_the_owner_as_requester() -> None:
    v1 = json.dumps({"version": 1, "owner": "User%3Aalice", "renewers": [],
                     "issueTimestamp": 1, "maxTimestamp": 3, "expiryTimestamp": 2,
                     "tokenId": "old"}).encode()
    decoded = zt.decode_token_info(v1)
    assert decoded == TokenInformation("old", ALICE, ALICE, (), 1, 3, 2)
    assert zt.decode_token_info(b"") is None


@pytest.mark.parametrize("data,why", [
    (b'{"version":4,"owner":"User%3Aa","tokenRequester":"User%3Aa","renewers":[],'
     b'"issueTimestamp":1,"maxTimestamp":1,"expiryTimestamp":1,"tokenId":"t"}', "version 4"),
    (b'{"version":3,"owner":"User%3Aa","renewers":[],"issueTimestamp":1,"maxTimestamp":1,'
     b'"expiryTimestamp":1,"tokenId":"t"}', "tokenRequester is missing"),
    (b'{"version":3,"owner":"alice","tokenRequester":"User%3Aa","renewers":[],'
     b'"issueTimestamp":1,"maxTimestamp":1,"expiryTimestamp":1,"tokenId":"t"}',
     "principalType:principalName"),
    (b"[1]", "expected a JSON object"),
    (b"{not json", "Expecting property name"),
])
def test_malformed_znodes_are_refused(data: bytes, why: str) -> None:
    with pytest.raises(ValueError, match=why):
        zt.decode_token_info(data)


def test_tokens_are_written_read_and_deleted(zk_client: KafkaZkClient) -> None:
    zk_client.create_delegation_token_paths()
    assert zk_client.exists("/delegation_token/tokens")
    assert zk_client.exists("/delegation_token/token_changes")
    zk_client.set_or_create_delegation_token(info("tok-1"))
    zk_client.set_or_create_delegation_token(info("tok-2"))
    zk_client.set_or_create_delegation_token(info("tok-1", expiry=1_700_000_500_000))
    # another writer's garbage is skipped when loading
    zk_client.kazoo.create("/delegation_token/tokens/bad", b"{}")
    assert zk_client.get_delegation_token_ids() == ["bad", "tok-1", "tok-2"]
    assert zk_client.get_delegation_token("tok-1") == info("tok-1", 1_700_000_500_000)
    assert zk_client.get_delegation_token("nope") is None
    assert [t.token_id for t in zk_client.get_all_delegation_tokens()] == ["tok-1", "tok-2"]
    zk_client.delete_delegation_token("tok-1")
    zk_client.delete_delegation_token("tok-1")  # already gone: fine
    assert zk_client.get_delegation_token("tok-1") is None


def test_change_notifications_name_the_token_and_old_ones_are_purged(
        zk_client: KafkaZkClient) -> None:
    first = zk_client.create_token_change_notification("tok-1")  # creates the parent too
    second = zk_client.create_token_change_notification("tok-2")
    assert first.startswith("token_change_") and len(first) == len("token_change_") + 10
    data, _ = zk_client.kazoo.get(f"/delegation_token/token_changes/{second}")
    assert data == b"tok-2"  # the id itself, not JSON
    changes = zk_client.read_token_changes()
    assert [(c.seq_name, c.token_id) for c in changes] == [(first, "tok-1"), (second, "tok-2")]
    assert [c.token_id for c in zk_client.read_token_changes(first)] == ["tok-2"]
    assert zk_client.read_token_changes(second, purge=True, max_age_ms=0) == []
    assert zk_client.get_children("/delegation_token/token_changes") == []
