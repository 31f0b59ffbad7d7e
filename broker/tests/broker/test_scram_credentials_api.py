"""DescribeUserScramCredentials (50) and AlterUserScramCredentials (51) on a real broker
(the controller of its own cluster), with confluent-kafka's and kafka-python's admin
clients and the raw protocol: the credentials land in `/config/users/<user>` in Kafka's
format next to the user's quota keys, the password the client salted logs in (checked
against the stored keys), and every bad input gets Kafka's code and message while the
broker keeps serving. Authorization is in test_acl_per_api.py; NOT_CONTROLLER from a
broker that is not the controller in tests/tools/test_configs_scram.py."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator, Sequence
from typing import Any

import pytest
from confluent_kafka.admin import (
    AdminClient,
    ScramCredentialInfo,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)
from confluent_kafka.admin import ScramMechanism as CkScramMechanism
from kafka import KafkaAdminClient
from kafka.admin import ScramMechanism as KpScramMechanism
from kafka.admin import UserScramCredentialDeletion as KpDeletion
from kafka.admin import UserScramCredentialUpsertion as KpUpsertion

from moldau.cluster.zk_client import KafkaZkClient
from moldau.devcluster.brokers import BrokerProcess
from moldau.protocol.generated.alter_user_scram_credentials_request import (
    AlterUserScramCredentialsRequest,
)
from moldau.protocol.generated.describe_user_scram_credentials_request import (
    DescribeUserScramCredentialsRequest,
)
from moldau.security.sasl.scram_credentials import (
    ScramCredential,
    ScramMechanism,
    password_matches,
)
from moldau.server.handlers.scram_credentials import AlterUserScramCredentialsHandler

from .raw import connect, round_trip

DESCRIBE, ALTER = 50, 51
SHA256, SHA512 = ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512
UNKNOWN_SERVER_ERROR, UNSUPPORTED_MECHANISM, NOT_CONTROLLER = -1, 33, 41
RESOURCE_NOT_FOUND, DUPLICATE_RESOURCE, UNACCEPTABLE_CREDENTIAL = 91, 92, 93
Upsert = AlterUserScramCredentialsRequest.ScramCredentialUpsertion
Delete = AlterUserScramCredentialsRequest.ScramCredentialDeletion
Name = DescribeUserScramCredentialsRequest.UserName


@pytest.fixture(scope="module")
def zk(broker: BrokerProcess) -> Iterator[KafkaZkClient]:
    """A session on the broker's chroot, to look at what the broker wrote."""
    client = KafkaZkClient(broker.zookeeper_connect, session_timeout_ms=6000)
    client.start()
    yield client
    client.close()


def stored(zk: KafkaZkClient, user: str, mechanism: ScramMechanism) -> ScramCredential:
    return ScramCredential.from_config_value(zk.get_user_config(user)[mechanism.mechanism_name])


def alter(broker: BrokerProcess, upsertions: Sequence[Any] = (),
          deletions: Sequence[Any] = ()) -> list[tuple[str, int, str | None]]:
    """AlterUserScramCredentials v0: (user, error code, message) per result."""
    with connect(broker) as conn:
        answer = conn.request(ALTER, 0, AlterUserScramCredentialsRequest(
            upsertions=list(upsertions), deletions=list(deletions)))
    return [(r.user, r.error_code, r.error_message) for r in answer.results]


def describe(broker: BrokerProcess, users: list[str] | None) -> Any:
    with connect(broker) as conn:
        return conn.request(DESCRIBE, 0, DescribeUserScramCredentialsRequest(
            users=None if users is None else [Name(name=u) for u in users]))


def salted(mechanism: ScramMechanism, password: str, salt: bytes = b"pepper",
           iterations: int = 4096) -> dict[str, Any]:
    """What a client sends for a password: the salt and the salted password."""
    return {"salt": salt, "iterations": iterations, "mechanism": mechanism.type_code,
            "salted_password": mechanism.salted_password(password, salt, iterations)}


# --------------------------------------------------------------------------- real clients


def test_confluent_kafka_alters_and_describes(broker: BrokerProcess, zk: KafkaZkClient) -> None:
    # a quota written first (the quota issue's key) stays next to the credentials
    zk.update_user_config("alice", lambda c: {**c, "producer_byte_rate": "1024"})
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    futures = admin.alter_user_scram_credentials([
        UserScramCredentialUpsertion("alice", ScramCredentialInfo(
            CkScramMechanism.SCRAM_SHA_256, 8192), b"alice-secret"),
        UserScramCredentialUpsertion("alice", ScramCredentialInfo(
            CkScramMechanism.SCRAM_SHA_512, 4096), b"alice-512")])
    assert futures["alice"].result(30) is None
    config = zk.get_user_config("alice")
    assert sorted(config) == ["SCRAM-SHA-256", "SCRAM-SHA-512", "producer_byte_rate"]
    assert config["producer_byte_rate"] == "1024"
    # librdkafka salted the passwords; the stored keys are the ones a login checks
    assert stored(zk, "alice", SHA256).iterations == 8192
    assert password_matches(SHA256, stored(zk, "alice", SHA256), "alice-secret")
    assert password_matches(SHA512, stored(zk, "alice", SHA512), "alice-512")
    assert not password_matches(SHA256, stored(zk, "alice", SHA256), "wrong")

    described = admin.describe_user_scram_credentials(["alice"])["alice"].result(30)
    assert [(i.mechanism, i.iterations) for i in described.scram_credential_infos] == [
        (CkScramMechanism.SCRAM_SHA_256, 8192), (CkScramMechanism.SCRAM_SHA_512, 4096)]
    futures = admin.alter_user_scram_credentials([
        UserScramCredentialDeletion("alice", CkScramMechanism.SCRAM_SHA_512)])
    assert futures["alice"].result(30) is None
    assert sorted(zk.get_user_config("alice")) == ["SCRAM-SHA-256", "producer_byte_rate"]
    unknown = admin.describe_user_scram_credentials(["nobody-here"])["nobody-here"]
    with pytest.raises(Exception, match="Attempt to describe a user credential that does "
                                        "not exist: nobody-here"):
        unknown.result(30)


def test_kafka_python_alters_and_describes(broker: BrokerProcess, zk: KafkaZkClient) -> None:
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        answer = admin.alter_user_scram_credentials([
            KpUpsertion("carol", KpScramMechanism.SCRAM_SHA_512, "carol-secret",
                        iterations=16384)])
        assert answer == {"carol": None}
        assert password_matches(SHA512, stored(zk, "carol", SHA512), "carol-secret")
        described = admin.describe_user_scram_credentials(["carol", "nobody"])
        assert described["carol"] == {"error": None, "credential_infos": [
            {"mechanism": KpScramMechanism.SCRAM_SHA_512, "iterations": 16384}]}
        assert described["nobody"]["error"] == (
            "Attempt to describe a user credential that does not exist: nobody")
        answer = admin.alter_user_scram_credentials([
            KpDeletion("carol", KpScramMechanism.SCRAM_SHA_512),
            KpUpsertion("dave", KpScramMechanism.SCRAM_SHA_256, "dave-secret",
                        iterations=4000)])
        assert answer == {"carol": None, "dave": "Too few iterations"}
        assert zk.get_user_config("carol") == {} and zk.get_user_config("dave") == {}
    finally:
        admin.close()


# --------------------------------------------------------------------- the raw protocol


def test_bad_alterations_get_kafkas_codes_and_messages(broker: BrokerProcess,
                                                       zk: KafkaZkClient) -> None:
    results = alter(broker, upsertions=[
        Upsert(name="", **salted(SHA256, "x")),
        Upsert(name="unknown-mech", **{**salted(SHA256, "x"), "mechanism": 0}),
        Upsert(name="few", **salted(SHA256, "x", iterations=4095)),
        Upsert(name="many", **salted(SHA512, "x", iterations=16385)),
        Upsert(name="twice", **salted(SHA256, "x")),
        Upsert(name="twice", **salted(SHA256, "y")),
        Upsert(name="empty-key", **{**salted(SHA256, "x"), "salted_password": b""}),
        Upsert(name="fine", **salted(SHA512, "fine-secret", iterations=16384)),
        Upsert(name="missing-delete", **salted(SHA512, "x")),
    ], deletions=[
        Delete(name="unknown-delete", mechanism=7),
        Delete(name="missing-delete", mechanism=SHA256.type_code),
    ])
    # refused outright first, then duplicates, missing deletions, failures, successes
    assert results == [
        ("unknown-delete", UNSUPPORTED_MECHANISM, "Unknown SCRAM mechanism"),
        ("", UNACCEPTABLE_CREDENTIAL, "Username must not be empty"),
        ("unknown-mech", UNSUPPORTED_MECHANISM, "Unknown SCRAM mechanism"),
        ("few", UNACCEPTABLE_CREDENTIAL, "Too few iterations"),
        ("many", UNACCEPTABLE_CREDENTIAL, "Too many iterations"),
        ("twice", DUPLICATE_RESOURCE,
         "A user credential cannot be altered twice in the same request"),
        ("missing-delete", RESOURCE_NOT_FOUND,
         "Attempt to delete a user credential that does not exist"),
        ("empty-key", UNKNOWN_SERVER_ERROR,
         "The server experienced an unexpected error when processing the request."),
        ("fine", 0, ""),
    ]
    for user in ("unknown-mech", "few", "many", "twice", "empty-key", "missing-delete",
                 "unknown-delete"):
        assert zk.get_user_config(user) == {}, user  # nothing written for a refused user
    assert password_matches(SHA512, stored(zk, "fine", SHA512), "fine-secret")
    # an upsertion's reason wins over a deletion's for the same user; a user changed and
    # deleted for one mechanism names it twice
    assert alter(broker, upsertions=[Upsert(name="u", **salted(SHA256, "x", iterations=1))],
                 deletions=[Delete(name="u", mechanism=9)]) == [
        ("u", UNACCEPTABLE_CREDENTIAL, "Too few iterations")]
    assert alter(broker, upsertions=[Upsert(name="fine", **salted(SHA512, "z"))],
                 deletions=[Delete(name="fine", mechanism=SHA512.type_code)]) == [
        ("fine", DUPLICATE_RESOURCE,
         "A user credential cannot be altered twice in the same request")]
    assert alter(broker) == []
    with connect(broker) as conn:
        round_trip(conn)


def test_describe_answers_as_kafka(broker: BrokerProcess, zk: KafkaZkClient) -> None:
    assert alter(broker, upsertions=[
        Upsert(name="bob@example.com", **salted(SHA512, "b", iterations=8192)),
        Upsert(name="eve", **salted(SHA256, "e")),
        Upsert(name="eve", **salted(SHA512, "e", iterations=5000))]) == [
        ("bob@example.com", 0, ""), ("eve", 0, "")]
    zk.update_user_config("quota-only", lambda c: {**c, "consumer_byte_rate": "10"})

    answer = describe(broker, ["eve", "ghost", "eve", "", "bob@example.com", ""])
    assert (answer.error_code, answer.error_message) == (0, "")
    assert [(r.user, r.error_code, r.error_message,
             [(i.mechanism, i.iterations) for i in r.credential_infos])
            for r in answer.results] == [
        ("eve", DUPLICATE_RESOURCE, "Cannot describe SCRAM credentials for the same user "
                                    "twice in a single request: eve", []),
        ("ghost", RESOURCE_NOT_FOUND,
         "Attempt to describe a user credential that does not exist: ghost", []),
        ("", RESOURCE_NOT_FOUND, "Username must not be empty", []),
        ("bob@example.com", 0, "", [(2, 8192)]),
    ]
    # null (or no) users: every user with a credential, sorted, named as its znode
    for users in (None, []):
        every = describe(broker, users)
        named = {r.user: [(i.mechanism, i.iterations) for i in r.credential_infos]
                 for r in every.results}
        assert list(named) == sorted(named)
        assert named["bob%40example.com"] == [(2, 8192)]
        assert named["eve"] == [(1, 4096), (2, 5000)]
        assert "quota-only" not in named and "ghost" not in named
    with connect(broker) as conn:
        round_trip(conn)


def test_a_broker_that_is_not_the_controller_answers_41_for_every_user() -> None:
    """Kafka's error response: every user named once, sorted, code alone (the handler with
    no active controller; on a real cluster in tests/tools/test_configs_scram.py)."""
    handler = AlterUserScramCredentialsHandler(zk=None, controller=lambda: None)  # type: ignore[arg-type]
    request = AlterUserScramCredentialsRequest(
        upsertions=[Upsert(name="zed", **salted(SHA256, "x")),
                    Upsert(name="amy", **salted(SHA256, "x"))],
        deletions=[Delete(name="zed", mechanism=2)])
    answer = asyncio.run(handler(None, request))  # type: ignore[arg-type]
    assert [(r.user, r.error_code, r.error_message) for r in answer.results] == [
        ("amy", NOT_CONTROLLER, None), ("zed", NOT_CONTROLLER, None)]
