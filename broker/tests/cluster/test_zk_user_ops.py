"""User configs in ZooKeeper (zk_user_ops) against the real ensemble: Kafka's znode and
notification, the compare-and-set that keeps concurrent writers of different keys of one
user (SCRAM credentials and quotas) from erasing each other, and the broker side that
loads them into the credential cache (server/user_configs.py)."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Callable, Iterator

import pytest

from moldau.cluster import zk_data as zd
from moldau.cluster import zk_user_ops
from moldau.cluster.config_changes import ConfigChangeListener
from moldau.cluster.zk_async import AsyncZk
from moldau.cluster.zk_client import KafkaZkClient
from moldau.cluster.zk_ensemble import ZooKeeperEnsemble
from moldau.security.credential_cache import ScramCredentialCache
from moldau.security.sasl.scram_credentials import ScramMechanism, derive_credential
from moldau.server.user_configs import UserConfigs

from .settle import settled

SHA256, SHA512 = ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512


@pytest.fixture
def other_client(zk_ensemble: ZooKeeperEnsemble, zk_chroot: str) -> Iterator[KafkaZkClient]:
    """A second session on the test's chroot: another broker or a tool."""
    client = KafkaZkClient(zk_ensemble.connect_string, zk_chroot, 6000, 15000)
    client.start()
    yield client
    client.close()


def putting(**keys: str) -> Callable[[dict[str, str]], dict[str, str]]:
    return lambda config: {**config, **keys}


def test_the_operations_are_methods_of_the_client() -> None:
    client = KafkaZkClient("127.0.0.1:1")  # not started: no connection is made
    for name in ("get_user_config", "get_all_user_configs", "update_user_config"):
        assert getattr(KafkaZkClient, name) is getattr(zk_user_ops, name), name
        assert getattr(client, name).__self__ is client, name


def test_a_write_is_kafkas_znode_and_notification(zk_client: KafkaZkClient) -> None:
    seq = zk_client.update_user_config("alice@example.com", putting(producer_byte_rate="1024"))
    assert seq.startswith("config_change_")
    data, _ = zk_client.kazoo.get("/config/users/alice%40example.com")
    assert json.loads(data) == {"version": 1, "config": {"producer_byte_rate": "1024"}}
    (change,) = zk_client.read_change_notifications(purge=False)
    assert change == (seq, "users", "alice%40example.com")
    data, _ = zk_client.kazoo.get(zd.config_change_path(seq))
    assert data == b'{"version":2,"entity_path":"users/alice%40example.com"}'
    assert zk_client.get_user_config("alice@example.com") == {"producer_byte_rate": "1024"}
    assert zk_client.get_user_config("nobody") == {}
    # the default user entity keeps its name; others are listed desanitized
    zk_client.update_user_config("<default>", putting(consumer_byte_rate="1"))
    zk_client.update_user_config("a b", putting(request_percentage="50"))
    assert zk_client.get_children("/config/users") == ["<default>", "a%20b",
                                                       "alice%40example.com"]
    assert zk_client.get_all_user_configs() == {
        "<default>": {"consumer_byte_rate": "1"}, "a b": {"request_percentage": "50"},
        "alice@example.com": {"producer_byte_rate": "1024"}}


def test_a_credential_change_keeps_the_quota_keys(zk_client: KafkaZkClient) -> None:
    credential = derive_credential(SHA256, "alice-secret", 8192).to_config_value()
    zk_client.update_user_config("alice", putting(producer_byte_rate="1024"))
    zk_client.update_user_config("alice", putting(**{"SCRAM-SHA-256": credential}))
    zk_client.update_user_config("alice", lambda c: {k: v for k, v in c.items()
                                                     if k != "producer_byte_rate"})
    assert zk_client.get_user_config("alice") == {"SCRAM-SHA-256": credential}


def test_a_failing_change_writes_nothing(zk_client: KafkaZkClient) -> None:
    zk_client.update_user_config("alice", putting(producer_byte_rate="1024"))
    before = zk_client.read_change_notifications(purge=False)

    def refuse(config: dict[str, str]) -> dict[str, str]:
        raise LookupError("no such credential")

    with pytest.raises(LookupError):
        zk_client.update_user_config("alice", refuse)
    with pytest.raises(LookupError):
        zk_client.update_user_config("bob", refuse)
    assert zk_client.get_user_config("alice") == {"producer_byte_rate": "1024"}
    assert not zk_client.exists("/config/users/bob")
    assert zk_client.read_change_notifications(purge=False) == before


@pytest.mark.parametrize("existing", [False, True], ids=["create", "set"])
def test_concurrent_writers_of_different_keys_both_survive(
        zk_client: KafkaZkClient, other_client: KafkaZkClient, existing: bool) -> None:
    """Both writers read the same version (a barrier holds each one's first change until
    the other has read too); the loser's write is refused and redone on the new map."""
    if existing:
        zk_client.update_user_config("alice", putting(consumer_byte_rate="2048"))
    barrier = threading.Barrier(2, timeout=10)
    calls = {"quota": 0, "scram": 0}
    credential = derive_credential(SHA512, "alice-secret", 4096).to_config_value()

    def writer(client: KafkaZkClient, name: str, key: str, value: str) -> None:
        def change(config: dict[str, str]) -> dict[str, str]:
            calls[name] += 1
            if calls[name] == 1:
                barrier.wait()
            return {**config, key: value}
        client.update_user_config("alice", change)

    threads = [threading.Thread(target=writer, args=(zk_client, "quota",
                                                     "producer_byte_rate", "1024")),
               threading.Thread(target=writer, args=(other_client, "scram",
                                                     "SCRAM-SHA-512", credential))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    expected = {"producer_byte_rate": "1024", "SCRAM-SHA-512": credential}
    if existing:
        expected["consumer_byte_rate"] = "2048"
    assert zk_client.get_user_config("alice") == expected
    assert sorted(calls.values()) == [1, 2]  # exactly one writer had to redo its change
    assert len(zk_client.read_change_notifications(purge=False)) == 2 + existing


# ----------------------------------------------------------- the broker's credential cache


def test_user_configs_load_and_follow_the_notifications(zk_ensemble: ZooKeeperEnsemble,
                                                        zk_chroot: str,
                                                        zk_client: KafkaZkClient) -> None:
    alice = derive_credential(SHA256, "alice-secret", 8192)
    bob = derive_credential(SHA512, "bob-secret", 4096)
    zk_client.update_user_config("alice", putting(**{"SCRAM-SHA-256": alice.to_config_value(),
                                                     "producer_byte_rate": "1024"}))
    zk_client.update_user_config("<default>", putting(**{
        "SCRAM-SHA-256": alice.to_config_value()}))  # not a user: never a login

    async def scenario() -> None:
        azk = AsyncZk(KafkaZkClient(zk_ensemble.connect_string, zk_chroot, 6000, 15000))
        await azk.start()
        cache = ScramCredentialCache()
        users = UserConfigs(azk, cache)
        listener = ConfigChangeListener(azk)
        try:
            await users.load_all()
            assert cache.get(SHA256, "alice") == alice
            assert cache.users(SHA256) == ["alice"]
            listener.add_handler(users.on_config_change)
            await listener.start()

            await azk.call(azk.client.update_user_config, "bob@x",
                           putting(**{"SCRAM-SHA-512": bob.to_config_value()}))
            await settled(lambda: cache.get(SHA512, "bob@x") == bob, "the cache")
            await azk.call(azk.client.update_user_config, "alice",
                           lambda c: {"producer_byte_rate": c["producer_byte_rate"]})
            await settled(lambda: cache.get(SHA256, "alice") is None, "the cache")
            # a user's client entity and the default user carry no credentials
            await users.on_config_change("users", "bob%40x/clients/app")
            await users.on_config_change("users", "<default>")
            await users.on_config_change("topics", "bob%40x")
            assert cache.users(SHA256) == [] and cache.users(SHA512) == ["bob@x"]
        finally:
            await azk.close()

    asyncio.run(scenario())
