"""Delegation tokens on a real broker (SASL_PLAINTEXT with SCRAM, plus PLAINTEXT and
one-way SSL listeners, Kafka's AclAuthorizer with User:admin as super user): a token
created over SASL logs in with SCRAM `tokenauth=true` as its owner (Moldau's client, and
kafka-python through its SASL plug-in point), its znode is Kafka's, a token Kafka wrote
into ZooKeeper logs in a moment later, an expired or expired-by-request token no longer
does; and every refusal with Kafka's code."""

from __future__ import annotations

import base64
import dataclasses
import json
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from tls_material import TlsMaterial, make_tls_material

from moldau.client.blocking import BlockingConnection
from moldau.client.sasl_authenticate import SaslAuthenticationFailed, authenticate
from moldau.cluster.zk_client import KafkaZkClient
from moldau.cluster.zk_token_ops import encode_token_info
from moldau.devcluster.brokers import BrokerProcess, free_port
from moldau.protocol.generated.api import ApiKey
from moldau.protocol.generated.create_acls_request import CreateAclsRequest
from moldau.protocol.generated.create_delegation_token_request import (
    CreateDelegationTokenRequest,
)
from moldau.protocol.generated.describe_delegation_token_request import (
    DescribeDelegationTokenRequest,
)
from moldau.protocol.generated.metadata_request import MetadataRequest
from moldau.security.acls import AclOperation, AclPermissionType, PatternType, ResourceType
from moldau.security.delegation_tokens import TokenInformation, token_hmac
from moldau.security.principal import KafkaPrincipal
from moldau.security.sasl.scram import ScramClient
from moldau.security.sasl.scram_credentials import ScramMechanism, derive_credential
from moldau.server.handlers.services import HandlerServices

# Until the broker hands its token manager to the handlers (HandlerServices'
# delegation_tokens, and the SASL authenticator's token_authenticated session attribute),
# the token APIs answer 61 and these tests cannot pass: skipped, saying why.
pytestmark = pytest.mark.skipif(
    "delegation_tokens" not in {f.name for f in dataclasses.fields(HandlerServices)},
    reason="the broker does not wire its delegation token manager into the handlers yet")
SECRET = "delegation-secret"
SCRAM_JAAS = 'org.apache.kafka.common.security.scram.ScramLoginModule required;'
SHA256, SHA512 = ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512
USERS = {"admin": "admin-secret", "alice": "alice-secret", "bob": "bob-secret"}
Renewer = CreateDelegationTokenRequest.CreatableRenewers
Owner = DescribeDelegationTokenRequest.DescribeDelegationTokenOwner


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> TlsMaterial:
    return make_tls_material(tmp_path_factory.mktemp("tls"))


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory, zk_ensemble: Any,
           tls: TlsMaterial) -> Iterator[dict[str, Any]]:
    zk_connect = zk_ensemble.connect_string + f"/tokens-{uuid.uuid4().hex[:8]}"
    zk = KafkaZkClient(zk_connect)
    zk.start()
    for user, password in USERS.items():
        zk.update_user_config(user, lambda c, p=password: {**c, **{
            m.mechanism_name: derive_credential(m, p, 4096).to_config_value()
            for m in ScramMechanism}})
    plain, sasl, ssl_port = free_port(), free_port(), free_port()
    props = {
        "listeners": (f"PLAINTEXT://127.0.0.1:{plain},SASL_PLAINTEXT://127.0.0.1:{sasl},"
                      f"SSL://127.0.0.1:{ssl_port}"),
        "sasl.enabled.mechanisms": "SCRAM-SHA-256,SCRAM-SHA-512",
        "listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config": SCRAM_JAAS,
        "listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config": SCRAM_JAAS,
        "ssl.keystore.type": "PKCS12",
        "ssl.keystore.location": str(tls.server_p12),
        "ssl.keystore.password": tls.store_password,
        "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
        "super.users": "User:admin",
        "allow.everyone.if.no.acl.found": "true",
        "delegation.token.secret.key": SECRET,
        "delegation.token.expiry.check.interval.ms": "500",
        "num.partitions": "1",
    }
    process = BrokerProcess(str(tmp_path_factory.mktemp("tokenbroker")), 1, zk_connect,
                            port=plain, properties=props)
    process.start()
    try:
        yield {"process": process, "zk": zk, "sasl": sasl, "plain": plain, "ssl": ssl_port}
    finally:
        zk.close()
        assert process.stop() == 0, process.tail()


# --- helpers ---------------------------------------------------------------------------------


def login(user: str, mechanism: ScramMechanism = SHA512) -> Callable[[], ScramClient]:
    return lambda: ScramClient(mechanism, user, USERS[user])


def token_login(token_id: str, hmac_b64: str,
                mechanism: ScramMechanism = SHA512) -> Callable[[], ScramClient]:
    return lambda: ScramClient(mechanism, token_id, hmac_b64, extensions={"tokenauth": "true"})


def connect(broker: dict[str, Any], sasl: Callable[[], ScramClient] | None = None,
            listener: str = "sasl", **kwargs: Any) -> BlockingConnection:
    return BlockingConnection("127.0.0.1", broker[listener], timeout=10,
                              client_id="token-test", sasl=sasl, **kwargs)


def create_token(conn: BlockingConnection, renewers: tuple[str, ...] = (),
                 owner: str | None = None, max_lifetime_ms: int = -1, version: int = 3) -> Any:
    fields: dict[str, Any] = {"max_lifetime_ms": max_lifetime_ms, "renewers": [
        Renewer(principal_type=r.split(":")[0], principal_name=r.split(":", 1)[1])
        for r in renewers]}
    if owner is not None:
        fields.update(owner_principal_type="User", owner_principal_name=owner)
    return conn.request_by_name("CreateDelegationToken", version, **fields)


def b64(data: bytes) -> str:
    return base64.b64encode(bytes(data)).decode()


def topic_error(conn: BlockingConnection, topic: str) -> int:
    """Metadata for one topic (no auto-creation): 29 when the principal may not describe
    it, 3 when it may (the topic does not exist)."""
    answer = conn.request(ApiKey.METADATA, 12, MetadataRequest(
        topics=[MetadataRequest.MetadataRequestTopic(name=topic)],
        allow_auto_topic_creation=False))
    return answer.topics[0].error_code


def allow(broker: dict[str, Any], resource_type: ResourceType, name: str, principal: str,
          operation: AclOperation) -> None:
    with connect(broker, login("admin")) as admin:
        answer = admin.request_by_name("CreateAcls", 3, creations=[CreateAclsRequest.AclCreation(
            resource_type=resource_type.value, resource_name=name,
            resource_pattern_type=PatternType.LITERAL.value, principal=principal, host="*",
            operation=operation.value, permission_type=AclPermissionType.ALLOW.value)])
        assert [r.error_code for r in answer.results] == [0]
    time.sleep(0.5)  # the ACL change notification reaches the authorizer


def wait_for(check: Callable[[], bool], timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.1)
    return check()


def logs_in(broker: dict[str, Any], token_id: str, hmac_b64: str) -> bool:
    try:
        connect(broker, token_login(token_id, hmac_b64)).close()
        return True
    except SaslAuthenticationFailed:
        return False


# --- tokens that log in -----------------------------------------------------------------------


def test_a_token_logs_in_as_its_owner_with_either_scram_mechanism(broker) -> None:
    topic = f"alice-only-{uuid.uuid4().hex[:6]}"
    allow(broker, ResourceType.TOPIC, topic, "User:alice", AclOperation.DESCRIBE)
    with connect(broker, login("alice")) as alice:
        created = create_token(alice)
    assert created.error_code == 0
    assert (created.principal_name, created.token_requester_principal_name) == ("alice", "alice")
    assert created.expiry_timestamp_ms - created.issue_timestamp_ms == 86_400_000
    assert created.max_timestamp_ms - created.issue_timestamp_ms == 7 * 86_400_000
    # any broker with the secret derives the password from the id
    assert bytes(created.hmac) == token_hmac(created.token_id, SECRET)
    for mechanism in (SHA256, SHA512):
        with connect(broker, token_login(created.token_id, b64(created.hmac), mechanism)) as conn:
            assert topic_error(conn, topic) == 3  # authorized as User:alice
            # a token login may not manage tokens
            assert create_token(conn).error_code == 64
    with connect(broker, login("bob")) as bob:
        assert topic_error(bob, topic) == 29


def test_the_session_of_a_token_login_ends_with_the_token(broker) -> None:
    with connect(broker, login("alice")) as alice:
        created = create_token(alice, max_lifetime_ms=60_000)
    with connect(broker) as conn:
        session = authenticate(conn.request, token_login(created.token_id, b64(created.hmac))())
    remaining = created.expiry_timestamp_ms - time.time() * 1000
    assert 0 < session.lifetime_ms <= remaining + 1000


def test_kafka_python_produces_and_consumes_with_a_token(broker) -> None:
    """kafka-python has no tokenauth setting; its SASL plug-in point takes a SCRAM client
    that sends the extension, as Kafka's Java client does with `tokenauth=true`."""
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition
    from kafka.net import sasl as kafka_sasl
    from kafka.net.sasl.scram import SaslMechanismScram

    class TokenScram(SaslMechanismScram):
        def __init__(self, **config: Any) -> None:
            super().__init__(**config)
            client = self._scram_client

            def first_message() -> bytes:
                bare = b"n=" + client.user + b",r=" + client.nonce + b",tokenauth=true"
                client.auth_message += bare
                return b"n,," + bare

            client.first_message = first_message

    with connect(broker, login("alice")) as alice:
        created = create_token(alice)
    topic = f"token-kp-{uuid.uuid4().hex[:6]}"
    auth = {"bootstrap_servers": f"127.0.0.1:{broker['sasl']}",
            "security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "SCRAM-SHA-512",
            "sasl_plain_username": created.token_id, "sasl_plain_password": b64(created.hmac)}
    kafka_sasl.register_sasl_mechanism("SCRAM-SHA-512", TokenScram, overwrite=True)
    try:
        producer = KafkaProducer(**auth)
        producer.send(topic, b"with a token").get(timeout=30)
        producer.close()
        consumer = KafkaConsumer(**auth)
        consumer.assign([TopicPartition(topic, 0)])
        consumer.seek_to_beginning()
        got: list[bytes] = []
        deadline = time.monotonic() + 20
        while not got and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=500).values():
                got += [r.value for r in records]
        consumer.close()
        assert got == [b"with a token"]
    finally:
        kafka_sasl.register_sasl_mechanism("SCRAM-SHA-512", SaslMechanismScram, overwrite=True)


def test_the_znode_is_kafkas_and_a_token_kafka_wrote_logs_in(broker) -> None:
    zk: KafkaZkClient = broker["zk"]
    with connect(broker, login("admin")) as admin:
        created = create_token(admin, renewers=("User:bob",), owner="alice")
    assert created.error_code == 0
    data, _ = zk.kazoo.get(f"/delegation_token/tokens/{created.token_id}")
    stored = json.loads(data)
    assert stored["version"] == 3 and stored["tokenId"] == created.token_id
    assert (stored["owner"], stored["tokenRequester"], stored["renewers"]) == (
        "User%3Aalice", "User%3Aadmin", ["User%3Abob"])
    assert data == encode_token_info(TokenInformation(
        created.token_id, KafkaPrincipal("alice"), KafkaPrincipal("admin"),
        (KafkaPrincipal("bob"),), created.issue_timestamp_ms, created.max_timestamp_ms,
        created.expiry_timestamp_ms))
    # another broker (Kafka's) writes a token and its notification: it works here at once
    token_id = f"kafka-{uuid.uuid4().hex[:16]}"
    now = int(time.time() * 1000)
    zk.set_or_create_delegation_token(TokenInformation(
        token_id, KafkaPrincipal("bob"), KafkaPrincipal("bob"), (), now, now + 3_600_000,
        now + 3_600_000))
    zk.create_token_change_notification(token_id)
    password = base64.b64encode(token_hmac(token_id, SECRET)).decode()
    assert wait_for(lambda: logs_in(broker, token_id, password), timeout=3)
    # and its removal too
    zk.delete_delegation_token(token_id)
    zk.create_token_change_notification(token_id)
    assert wait_for(lambda: not logs_in(broker, token_id, password), timeout=3)


def test_an_expired_token_no_longer_logs_in_and_the_controller_removes_it(broker) -> None:
    with connect(broker, login("alice")) as alice:
        created = create_token(alice, max_lifetime_ms=1)
        time.sleep(0.05)
        assert not logs_in(broker, created.token_id, b64(created.hmac))
        renewed = alice.request_by_name("RenewDelegationToken", 2, hmac=created.hmac,
                                        renew_period_ms=-1)
        # 66 while it waits for the sweep (every 500 ms here), 62 once it is gone
        assert renewed.error_code in (66, 62)
    zk: KafkaZkClient = broker["zk"]
    assert wait_for(lambda: zk.get_delegation_token(created.token_id) is None, timeout=5)


def test_renew_and_expire_by_the_owner_and_renewers(broker) -> None:
    with connect(broker, login("alice")) as alice, connect(broker, login("bob")) as bob, \
            connect(broker, login("admin")) as admin:
        created = create_token(alice, renewers=("User:bob",))
        hmac = created.hmac
        renewed = bob.request_by_name("RenewDelegationToken", 2, hmac=hmac,
                                      renew_period_ms=3_600_000)
        assert renewed.error_code == 0
        assert abs(renewed.expiry_timestamp_ms - (time.time() * 1000 + 3_600_000)) < 10_000
        # neither the super user nor the requester's ACLs make one an owner or renewer
        refused = admin.request_by_name("RenewDelegationToken", 2, hmac=hmac, renew_period_ms=-1)
        assert (refused.error_code, refused.expiry_timestamp_ms) == (63, -1)
        assert admin.request_by_name("ExpireDelegationToken", 2, hmac=hmac,
                                     expiry_time_period_ms=-1).error_code == 63
        unknown = alice.request_by_name("RenewDelegationToken", 1, hmac=b"nope",
                                        renew_period_ms=-1)
        assert unknown.error_code == 62
        assert logs_in(broker, created.token_id, b64(hmac))
        expired = alice.request_by_name("ExpireDelegationToken", 0, hmac=hmac,
                                        expiry_time_period_ms=-1)
        assert expired.error_code == 0
        assert not logs_in(broker, created.token_id, b64(hmac))
        assert alice.request_by_name("ExpireDelegationToken", 2, hmac=hmac,
                                     expiry_time_period_ms=-1).error_code == 62


def test_describe_filters_by_owner_renewer_and_acl(broker) -> None:
    # ACLs on every token and user that name only admin: the others get no "allow
    # everyone" (allow.everyone.if.no.acl.found) and see their own tokens only
    allow(broker, ResourceType.DELEGATION_TOKEN, "*", "User:admin", AclOperation.DESCRIBE)
    allow(broker, ResourceType.USER, "*", "User:admin", AclOperation.DESCRIBE_TOKENS)
    with connect(broker, login("alice")) as alice, connect(broker, login("bob")) as bob, \
            connect(broker, login("admin")) as admin:
        mine = create_token(alice, renewers=("User:bob",)).token_id
        admins = create_token(admin).token_id

        def described(conn: BlockingConnection, owners: list[str] | None,
                      version: int = 3) -> set[str]:
            answer = conn.request_by_name("DescribeDelegationToken", version, owners=None
                                          if owners is None else [
                                              Owner(principal_type="User", principal_name=o)
                                              for o in owners])
            assert answer.error_code == 0
            return {t.token_id for t in answer.tokens}

        assert mine in described(alice, None) and admins not in described(alice, None)
        assert mine in described(bob, ["bob"], version=0)  # bob renews it
        assert described(alice, []) == set()  # an empty owner list: nothing
        assert {mine, admins} <= described(admin, None)  # the super user sees all
        [token] = [t for t in admin.request_by_name("DescribeDelegationToken", 3, owners=[
            Owner(principal_type="User", principal_name="alice")]).tokens
            if t.token_id == mine]
        assert (token.principal_name, token.token_requester_principal_name) == ("alice",
                                                                                "alice")
        assert [r.principal_name for r in token.renewers] == ["bob"]


# --- refusals --------------------------------------------------------------------------------


def test_plaintext_and_anonymous_ssl_are_refused_with_64(broker, tls: TlsMaterial) -> None:
    import ssl

    context = ssl.create_default_context(cafile=str(tls.ca_cert))
    for conn in (connect(broker, listener="plain"),
                 connect(broker, listener="ssl", ssl_context=context)):
        with conn:
            answer = create_token(conn)
            assert (answer.error_code, answer.principal_name, answer.token_id,
                    answer.issue_timestamp_ms) == (64, "ANONYMOUS", "", -1)
            assert conn.request_by_name("RenewDelegationToken", 2, hmac=b"x",
                                        renew_period_ms=-1).error_code == 64
            assert conn.request_by_name("ExpireDelegationToken", 2, hmac=b"x",
                                        expiry_time_period_ms=-1).error_code == 64
            assert conn.request_by_name("DescribeDelegationToken", 3,
                                        owners=None).error_code == 64


def test_a_token_for_another_owner_needs_create_tokens_on_that_user(broker) -> None:
    # an ACL on User:carol that names only admin: bob has none, so no "allow everyone"
    allow(broker, ResourceType.USER, "User:carol", "User:admin", AclOperation.CREATE_TOKENS)
    with connect(broker, login("bob")) as bob:
        denied = create_token(bob, owner="carol")
        assert (denied.error_code, denied.principal_name,
                denied.token_requester_principal_name) == (65, "carol", "bob")
    allow(broker, ResourceType.USER, "User:carol", "User:bob", AclOperation.CREATE_TOKENS)
    with connect(broker, login("bob")) as bob:
        granted = create_token(bob, owner="carol")
    assert granted.error_code == 0
    assert logs_in(broker, granted.token_id, b64(granted.hmac))


def test_renewers_must_be_user_principals(broker) -> None:
    with connect(broker, login("alice")) as alice:
        assert create_token(alice, renewers=("User:bob", "Group:ops")).error_code == 67
        assert create_token(alice, renewers=("User:bob",), version=0).error_code == 0
