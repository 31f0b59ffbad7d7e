"""Client quota entities in ZooKeeper (zk_quota_ops) against the real ensemble: Kafka's
znodes, names and notifications for users, users' client ids, client ids and ips, the
cleanup of an emptied entity, a user's SCRAM credential and quotas sharing one znode
without erasing each other, and the broker side that loads them into ClientQuotaConfigs
and follows the change notifications (server/quota_config_handler.py)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable

from moldau.cluster import zk_quota_ops
from moldau.cluster.config_changes import ConfigChangeListener
from moldau.cluster.zk_async import AsyncZk
from moldau.cluster.zk_client import KafkaZkClient
from moldau.cluster.zk_ensemble import ZooKeeperEnsemble
from moldau.server.client_quota_configs import DEFAULT, ClientQuotaConfigs, QuotaEntity
from moldau.server.quota_config_handler import QuotaConfigHandler

from .settle import settled

OPS = ("get_quota_entity_config", "get_ip_quota_config", "get_all_quota_entity_configs",
       "get_all_ip_quota_configs", "update_quota_entity_config", "update_ip_quota_config")


def putting(**keys: str) -> Callable[[dict[str, str]], dict[str, str]]:
    return lambda config: {**config, **keys}


def removing(*keys: str) -> Callable[[dict[str, str]], dict[str, str]]:
    return lambda config: {k: v for k, v in config.items() if k not in keys}


def znode(zk: KafkaZkClient, path: str) -> object:
    found = zk.get(path)
    return None if found is None else json.loads(found[0])


def notified(zk: KafkaZkClient, seq: str) -> tuple[str, str]:
    change = next(c for c in zk.read_change_notifications(purge=False) if c.seq_name == seq)
    return change.entity_type, change.entity_name


def test_the_operations_are_methods_of_the_client() -> None:
    client = KafkaZkClient("127.0.0.1:1")  # not started: no connection is made
    for name in OPS:
        assert getattr(KafkaZkClient, name) is getattr(zk_quota_ops, name), name
        assert getattr(client, name).__self__ is client, name


def test_kafkas_znodes_names_and_notifications(zk_client: KafkaZkClient) -> None:
    zk = zk_client
    cases = [
        (("alice@example.com", None), "/config/users/alice%40example.com",
         ("users", "alice%40example.com")),
        (("app user", "app 1*"), "/config/users/app%20user/clients/app%201%2A",
         ("users", "app%20user/clients/app%201%2A")),
        ((DEFAULT, DEFAULT), "/config/users/<default>/clients/<default>",
         ("users", "<default>/clients/<default>")),
        ((None, "clueful"), "/config/clients/clueful", ("clients", "clueful")),
        ((None, DEFAULT), "/config/clients/<default>", ("clients", "<default>")),
    ]
    for (user, client_id), path, notification in cases:
        seq = zk.update_quota_entity_config(user, client_id,
                                            putting(producer_byte_rate="1048576"))
        assert znode(zk, path) == {"version": 1, "config": {"producer_byte_rate": "1048576"}}
        assert notified(zk, seq) == notification
        assert zk.get_quota_entity_config(user, client_id) == {"producer_byte_rate": "1048576"}
    seq = zk.update_ip_quota_config("10.1.2.3", putting(connection_creation_rate="10"))
    assert znode(zk, "/config/ips/10.1.2.3") == {
        "version": 1, "config": {"connection_creation_rate": "10"}}
    assert notified(zk, seq) == ("ips", "10.1.2.3")
    zk.update_ip_quota_config(DEFAULT, putting(connection_creation_rate="5"))

    assert zk.get_all_quota_entity_configs() == {
        (user, client_id): {"producer_byte_rate": "1048576"}
        for (user, client_id), _, _ in cases} | {
        ("app user", None): {}, (DEFAULT, None): {}}  # parents made for the client ids
    assert zk.get_all_ip_quota_configs() == {
        "10.1.2.3": {"connection_creation_rate": "10"},
        DEFAULT: {"connection_creation_rate": "5"}}


def test_an_emptied_entity_is_removed_but_still_notified(zk_client: KafkaZkClient) -> None:
    zk = zk_client
    zk.update_quota_entity_config(None, "gone", putting(consumer_byte_rate="100"))
    seq = zk.update_quota_entity_config(None, "gone", removing("consumer_byte_rate"))
    assert not zk.exists("/config/clients/gone")
    assert notified(zk, seq) == ("clients", "gone")
    # a user with client-id entities below it keeps its znode, with an empty map
    zk.update_quota_entity_config("bob", None, putting(producer_byte_rate="100"))
    zk.update_quota_entity_config("bob", "app", putting(producer_byte_rate="200"))
    zk.update_quota_entity_config("bob", None, removing("producer_byte_rate"))
    assert znode(zk, "/config/users/bob") == {"version": 1, "config": {}}
    zk.update_quota_entity_config("bob", "app", removing("producer_byte_rate"))
    assert not zk.exists("/config/users/bob/clients/app")
    # removing from an entity that does not exist creates nothing, still notifies
    seq = zk.update_ip_quota_config("10.9.9.9", removing("connection_creation_rate"))
    assert not zk.exists("/config/ips/10.9.9.9")
    assert notified(zk, seq) == ("ips", "10.9.9.9")


def test_credentials_and_quotas_share_the_user_znode(zk_client: KafkaZkClient) -> None:
    zk = zk_client
    zk.update_user_config("carol", putting(**{"SCRAM-SHA-256": "salt=..."}))
    zk.update_quota_entity_config("carol", None, putting(producer_byte_rate="1024"))
    assert zk.get_user_config("carol") == {"SCRAM-SHA-256": "salt=...",
                                           "producer_byte_rate": "1024"}
    # a credential write keeps the quota, a quota removal keeps the credential (and znode)
    zk.update_user_config("carol", putting(**{"SCRAM-SHA-512": "salt=---"}))
    zk.update_quota_entity_config("carol", None, removing("producer_byte_rate"))
    assert zk.get_user_config("carol") == {"SCRAM-SHA-256": "salt=...",
                                           "SCRAM-SHA-512": "salt=---"}


def test_the_broker_loads_and_follows_the_quotas(zk_ensemble: ZooKeeperEnsemble,
                                                 zk_chroot: str) -> None:
    async def scenario() -> None:
        azk = AsyncZk(KafkaZkClient(zk_ensemble.connect_string, zk_chroot, 6000, 15000))
        await azk.start()
        client = azk.client
        await azk.call(client.update_quota_entity_config, "u", "c",
                       putting(producer_byte_rate="1048576", request_percentage="12.5"))
        await azk.call(client.update_user_config, "u",
                       putting(**{"SCRAM-SHA-256": "x"}, consumer_byte_rate="2048"))
        await azk.call(client.update_ip_quota_config, DEFAULT,
                       putting(connection_creation_rate="7"))
        quotas = ClientQuotaConfigs()
        changed: list[object] = []
        quotas.on_change(changed.append)
        handler = QuotaConfigHandler(azk, quotas)
        listener = ConfigChangeListener(azk)
        try:
            await handler.load_all()
            assert quotas.client_quotas() == {
                QuotaEntity("u", "c"): {"producer_byte_rate": 1048576.0,
                                        "request_percentage": 12.5},
                QuotaEntity("u", None): {"consumer_byte_rate": 2048.0}}
            assert quotas.ip_connection_rates() == {DEFAULT: 7.0}
            listener.add_handler(handler.on_config_change)
            await listener.start()

            await azk.call(client.update_quota_entity_config, None, "clueful",
                           putting(producer_byte_rate="1048576"))
            await settled(lambda: quotas.client_quota(
                QuotaEntity(None, "clueful"), "producer_byte_rate") == 1048576.0, "the quotas")
            await azk.call(client.update_quota_entity_config, "u", "c", lambda c: {})
            await settled(lambda: QuotaEntity("u", "c") not in quotas.client_quotas(), "the quotas")
            await azk.call(client.update_ip_quota_config, "10.0.0.1",
                           putting(connection_creation_rate="3"))
            await settled(lambda: quotas.ip_connection_rates().get("10.0.0.1") == 3.0, "the quotas")
            # a credential change alone leaves the user's quotas (and the listeners) be
            before = len(changed)
            await azk.call(client.update_user_config, "u", putting(**{"SCRAM-SHA-512": "y"}))
            await asyncio.sleep(0.2)
            assert len(changed) == before
            assert quotas.client_quotas()[QuotaEntity("u", None)] == {
                "consumer_byte_rate": 2048.0}
        finally:
            await azk.close()

    asyncio.run(scenario())
