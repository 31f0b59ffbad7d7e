"""SASL/GSSAPI against a real MIT Kerberos KDC (tests/kdc.py) and a real broker: kcat
(Debian's, through Cyrus SASL's GSSAPI plugin), kafka-python and aiokafka (the `gssapi`
package) produce and consume over SASL_PLAINTEXT; the principal is the short name the
principal-to-local rules give (`User:alice` for `alice@EXAMPLE.TEST`, a rule for one
principal of the trusted second realm), checked through ACLs; a foreign principal no rule
maps, a ticket for a service key the broker does not hold and a token without a ticket are
refused with 58 and Kafka's generic text, and the broker serves on.

One KDC and one broker for the module. The broker's principal is `kafka/localhost`: the
SASL listener binds 127.0.0.1 and is advertised as `localhost`, the name clients use.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gssapi
import pytest
from kdc import OTHER_REALM, REALM, TestKdc

from moldau.client.blocking import BlockingConnection
from moldau.client.sasl_authenticate import SaslAuthenticationFailed
from moldau.client.security import ClientConfigError, client_security
from moldau.devcluster.brokers import BrokerProcess, free_port
from moldau.protocol.generated.api import ApiKey
from moldau.protocol.generated.metadata_request import MetadataRequest
from moldau.protocol.generated.sasl_authenticate_request import SaslAuthenticateRequest
from moldau.protocol.generated.sasl_handshake_request import SaslHandshakeRequest
from moldau.security.kerberos_names import ShortNamer
from moldau.security.sasl.errors import SaslMechanismError
from moldau.security.sasl.gssapi import (
    GssapiClient,
    GssapiServer,
    acceptor_credentials,
    keytab_credentials,
    ticket_cache_credentials,
)

BIN = Path(sys.executable).parent  # the console scripts of the tools
GENERIC = ("Authentication failed during authentication due to invalid credentials with "
           "SASL mechanism GSSAPI")
KRB5_JAAS = ('com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true '
             'storeKey=true keyTab="{keytab}" principal="{principal}";')
# carol of the second realm gets a name of her own; nobody else from there is mapped
RULES = r"RULE:[1:$1@$0](carol@OTHER\.TEST)s/@OTHER\.TEST/-from-other/,DEFAULT"


@dataclass
class Realm:
    kdc: TestKdc
    directory: Path

    def keytab(self, name: str) -> Path:
        return self.directory / f"{name}.keytab"

    def ccache(self, principal: str) -> Path:
        """A fresh ticket cache holding `principal`'s TGT (from its keytab)."""
        short = principal.split("@")[0].replace("/", "_")
        path = self.directory / f"{short}-{uuid.uuid4().hex[:6]}.ccache"
        return self.kdc.kinit(principal, self.keytab(short), path)


@pytest.fixture(scope="module")
def realm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Realm]:
    directory = tmp_path_factory.mktemp("kdc")
    kdc = TestKdc(directory)
    kdc.start()
    try:
        for principal in ("kafka/localhost", "kafka/127.0.0.1", "alice", "bob",
                          f"carol@{OTHER_REALM}", f"dave@{OTHER_REALM}"):
            name = principal.split("@")[0].replace("/", "_")
            kdc.principal_with_keytab(principal, directory / f"{name}.keytab")
        yield Realm(kdc, directory)
    finally:
        kdc.stop()


@dataclass
class Broker:
    process: BrokerProcess
    plaintext: str  # 127.0.0.1:<port>, User:ANONYMOUS (a super user here)
    sasl_port: int

    @property
    def sasl(self) -> str:
        return f"localhost:{self.sasl_port}"


@pytest.fixture(scope="module")
def broker(realm: Realm, tmp_path_factory: pytest.TempPathFactory,
           zk_ensemble) -> Iterator[Broker]:
    plain, sasl = free_port(), free_port()
    keytab = realm.keytab("kafka_localhost")
    props = {
        "listeners": f"PLAINTEXT://127.0.0.1:{plain},SASL_PLAINTEXT://127.0.0.1:{sasl}",
        "advertised.listeners": f"PLAINTEXT://127.0.0.1:{plain},"
                                f"SASL_PLAINTEXT://localhost:{sasl}",
        "sasl.enabled.mechanisms": "GSSAPI",
        "listener.name.sasl_plaintext.gssapi.sasl.jaas.config": KRB5_JAAS.format(
            keytab=keytab, principal=f"kafka/localhost@{REALM}"),
        "sasl.kerberos.service.name": "kafka",
        "sasl.kerberos.principal.to.local.rules": RULES,
        "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
        "super.users": "User:alice;User:ANONYMOUS",
        "num.partitions": "1", "offsets.topic.replication.factor": "1",
    }
    # the realm's krb5.conf as Kafka's JVM gets it, -Djava.security.krb5.conf
    env = {key: value for key, value in realm.kdc.env().items() if key != "KRB5_CONFIG"}
    env["KAFKA_OPTS"] = f"-Djava.security.krb5.conf={realm.kdc.krb5_conf}"
    process = BrokerProcess(str(tmp_path_factory.mktemp("gssapi-broker")), 1,
                            f"{zk_ensemble.connect_string}/gssapi-{uuid.uuid4().hex[:8]}",
                            port=plain, properties=props, env=env)
    process.start(wait=60)
    yield Broker(process, f"127.0.0.1:{plain}", sasl)
    assert process.stop() == 0, process.tail()


@pytest.fixture
def kerberos_env(realm: Realm, monkeypatch: pytest.MonkeyPatch) -> Realm:
    """This process as a Kerberos client of the realm (the Python clients read the
    environment: KRB5_CONFIG, KRB5CCNAME)."""
    for key, value in realm.kdc.env().items():
        monkeypatch.setenv(key, value)
    return realm


def _use_ticket_cache(monkeypatch: pytest.MonkeyPatch, ccache: Path) -> None:
    monkeypatch.setenv("KRB5CCNAME", f"FILE:{ccache}")


def _gssapi_connection(broker: Broker, credentials, host: str = "localhost"
                       ) -> BlockingConnection:
    """Moldau's blocking client, authenticated with GSSAPI towards kafka/<host>."""
    return BlockingConnection(host, broker.sasl_port, timeout=10, sasl=lambda: GssapiClient(
        "kafka", credentials, server_host=host))


def _assert_still_serving(broker: Broker, realm: Realm) -> None:
    keytab = str(realm.keytab("alice"))
    credentials = keytab_credentials(f"alice@{REALM}", keytab, "MEMORY:still-serving")
    with _gssapi_connection(broker, lambda: credentials) as conn:
        assert conn.request(ApiKey.METADATA, 1, MetadataRequest(topics=[])).brokers


# ---------------------------------------------------------------------------- the mechanism


def test_the_mechanism_pair_in_process(kerberos_env: Realm) -> None:
    """Moldau's client and server sides against each other, with real Kerberos tickets:
    the principal becomes the short name, and the wrapped layer messages check out."""
    realm = kerberos_env
    acceptor = acceptor_credentials(f"kafka/localhost@{REALM}",
                                    str(realm.keytab("kafka_localhost")))
    alice = keytab_credentials(f"alice@{REALM}", str(realm.keytab("alice")), "MEMORY:pair")
    server = GssapiServer(acceptor, ShortNamer(REALM, RULES.split(",")))
    client = GssapiClient("kafka", lambda: alice, server_host="localhost")
    token: bytes | None = client.initial_response()
    rounds = 0
    while not client.complete:
        assert token is not None
        token = client.evaluate(server.evaluate(token))
        rounds += 1
    assert token is not None
    assert server.evaluate(token) is None and server.complete  # the last step: no answer
    assert (server.authorization_id, server.principal) == ("alice", f"alice@{REALM}")
    assert rounds == 2  # AP-REQ -> AP-REP, empty -> the layer offer, then the choice
    with pytest.raises(SaslMechanismError, match="already complete"):
        server.evaluate(b"")


def test_the_server_refuses_a_token_after_the_context_that_is_not_empty(
        kerberos_env: Realm) -> None:
    realm = kerberos_env
    acceptor = acceptor_credentials(f"kafka/localhost@{REALM}",
                                    str(realm.keytab("kafka_localhost")))
    alice = keytab_credentials(f"alice@{REALM}", str(realm.keytab("alice")), "MEMORY:pair")
    server = GssapiServer(acceptor, ShortNamer(REALM))
    client = GssapiClient("kafka", lambda: alice, server_host="localhost")
    server.evaluate(client.initial_response())  # the AP-REP
    with pytest.raises(SaslMechanismError, match="expecting no response data"):
        server.evaluate(b"unexpected")
    assert not server.complete


def _to_the_layer_offer(realm: Realm) -> tuple[GssapiServer, Any, bytes]:
    """A server and a raw initiator context (Any: a gssapi.SecurityContext) taken through
    the context establishment, and the server's unwrapped layer offer."""
    acceptor = acceptor_credentials(f"kafka/localhost@{REALM}",
                                    str(realm.keytab("kafka_localhost")))
    alice = keytab_credentials(f"alice@{REALM}", str(realm.keytab("alice")), "MEMORY:pair")
    server = GssapiServer(acceptor, ShortNamer(REALM))
    context = gssapi.SecurityContext(
        name=gssapi.Name("kafka@localhost", gssapi.NameType.hostbased_service), creds=alice,
        usage="initiate", mech=gssapi.MechType.kerberos,
        flags=gssapi.RequirementFlag.mutual_authentication)
    context.step(server.evaluate(context.step()))  # AP-REQ, AP-REP
    offer = context.unwrap(server.evaluate(b"")).message
    return server, context, offer


def test_the_offer_is_no_security_layer_and_an_authzid_is_ignored(kerberos_env: Realm) -> None:
    server, context, offer = _to_the_layer_offer(kerberos_env)
    assert offer == bytes([0x01, 0x01, 0x00, 0x00])  # no layer; 65536 as the JDK says
    choice = bytes([0x01, 0x00, 0x00, 0x00]) + b"mallory"  # asks to act as mallory
    assert server.evaluate(context.wrap(choice, False).message) is None  # no answer
    assert server.complete and server.authorization_id == "alice"


def test_a_security_layer_choice_other_than_none_is_refused(kerberos_env: Realm) -> None:
    server, context, _ = _to_the_layer_offer(kerberos_env)
    with pytest.raises(SaslMechanismError, match="Client selected unsupported protection: 4"):
        server.evaluate(context.wrap(bytes([0x04, 0x01, 0x00, 0x00]), False).message)
    assert not server.complete


# ---------------------------------------------------------------------------- real clients


@pytest.mark.skipif(shutil.which("kcat") is None, reason="kcat is not installed")
def test_kcat_produces_and_consumes_with_a_keytab(broker: Broker, realm: Realm) -> None:
    """librdkafka logs in with its own kinit from the keytab, then Cyrus SASL's GSSAPI
    plugin authenticates to kafka/localhost."""
    topic = f"gssapi-kcat-{uuid.uuid4().hex[:6]}"
    env = dict(os.environ, **realm.kdc.env(realm.directory / f"kcat-{topic}.ccache"))
    common = ["-b", broker.sasl, "-X", "security.protocol=SASL_PLAINTEXT",
              "-X", "sasl.mechanisms=GSSAPI", "-X", "sasl.kerberos.service.name=kafka",
              "-X", f"sasl.kerberos.keytab={realm.keytab('alice')}",
              "-X", f"sasl.kerberos.principal=alice@{REALM}"]
    lines = "".join(f"kcat-{i}\n" for i in range(10))
    produced = subprocess.run(["kcat", *common, "-P", "-t", topic], input=lines, text=True,
                              capture_output=True, timeout=60, env=env)
    assert produced.returncode == 0, produced.stderr
    consumed = subprocess.run(["kcat", *common, "-C", "-t", topic, "-o", "beginning", "-c",
                               "10", "-e", "-q"], capture_output=True, text=True,
                              timeout=60, env=env)
    assert consumed.returncode == 0, consumed.stderr
    assert consumed.stdout.splitlines() == [f"kcat-{i}" for i in range(10)]


def test_kafka_python_and_aiokafka_with_a_ticket_cache(
        broker: Broker, kerberos_env: Realm, monkeypatch: pytest.MonkeyPatch) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
    from kafka import KafkaConsumer, KafkaProducer
    from kafka import TopicPartition as KTopicPartition

    _use_ticket_cache(monkeypatch, kerberos_env.ccache(f"alice@{REALM}"))
    auth = {"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "GSSAPI",
            "sasl_kerberos_service_name": "kafka"}
    topic = f"gssapi-py-{uuid.uuid4().hex[:6]}"
    producer = KafkaProducer(bootstrap_servers=broker.sasl, **auth)
    for i in range(5):
        producer.send(topic, f"kp{i}".encode())
    producer.flush(30)
    producer.close()

    async def with_aiokafka() -> list[bytes]:
        aproducer = AIOKafkaProducer(bootstrap_servers=broker.sasl, **auth)
        await aproducer.start()
        try:
            for i in range(5):
                await aproducer.send_and_wait(topic, f"ak{i}".encode())
        finally:
            await aproducer.stop()
        consumer = AIOKafkaConsumer(bootstrap_servers=broker.sasl, **auth)
        await consumer.start()
        try:
            consumer.assign([TopicPartition(topic, 0)])
            await consumer.seek_to_beginning()
            got: list[bytes] = []
            deadline = time.monotonic() + 15
            while len(got) < 10 and time.monotonic() < deadline:
                batches = await consumer.getmany(timeout_ms=2000)
                got += [r.value for records in batches.values() for r in records]
            return got
        finally:
            await consumer.stop()

    expected = [f"kp{i}".encode() for i in range(5)] + [f"ak{i}".encode() for i in range(5)]
    assert asyncio.run(with_aiokafka()) == expected
    consumer = KafkaConsumer(bootstrap_servers=broker.sasl, consumer_timeout_ms=10000, **auth)
    consumer.assign([KTopicPartition(topic, 0)])
    consumer.seek_to_beginning()
    got = [m.value for _, m in zip(range(10), consumer, strict=False)]
    consumer.close()
    assert got == expected


# ---------------------------------------------------------------------------- principals


def _allow_writes(broker: Broker, principal: str, topic: str) -> None:
    """An ACL (through the PLAINTEXT listener, whose User:ANONYMOUS is a super user)."""
    from confluent_kafka.admin import (
        AclBinding,
        AclOperation,
        AclPermissionType,
        AdminClient,
        NewTopic,
        ResourcePatternType,
        ResourceType,
    )

    admin = AdminClient({"bootstrap.servers": broker.plaintext})
    for future in admin.create_topics([NewTopic(topic, 1, 1)]).values():
        future.result(30)
    bindings = [AclBinding(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, principal,
                           "*", operation, AclPermissionType.ALLOW)
                for operation in (AclOperation.WRITE, AclOperation.DESCRIBE)]
    for future in admin.create_acls(bindings).values():
        future.result(30)


def _produce(broker: Broker, topic: str) -> str:
    """Produce one record with kafka-python as the ticket cache's principal: "ok" or the
    error's class name."""
    from kafka import KafkaProducer
    from kafka.errors import KafkaError

    producer = KafkaProducer(bootstrap_servers=broker.sasl, security_protocol="SASL_PLAINTEXT",
                             sasl_mechanism="GSSAPI", sasl_kerberos_service_name="kafka",
                             max_block_ms=10000, retries=0)
    try:
        producer.send(topic, b"hello").get(timeout=15)
        return "ok"
    except KafkaError as exc:
        return type(exc).__name__
    finally:
        producer.close(timeout=5)


def test_principals_are_short_names_from_the_rules(
        broker: Broker, kerberos_env: Realm, monkeypatch: pytest.MonkeyPatch) -> None:
    """bob@EXAMPLE.TEST is User:bob (DEFAULT), carol@OTHER.TEST is User:carol-from-other
    (her rule): each writes where an ACL names exactly that principal, and nowhere else."""
    suffix = uuid.uuid4().hex[:6]
    bob_topic, carol_topic = f"bob-{suffix}", f"carol-{suffix}"
    _allow_writes(broker, "User:bob", bob_topic)
    _allow_writes(broker, "User:carol-from-other", carol_topic)
    _use_ticket_cache(monkeypatch, kerberos_env.ccache(f"bob@{REALM}"))
    assert _produce(broker, bob_topic) == "ok"
    assert _produce(broker, carol_topic) == "TopicAuthorizationFailedError"
    _use_ticket_cache(monkeypatch, kerberos_env.ccache(f"carol@{OTHER_REALM}"))
    assert _produce(broker, carol_topic) == "ok"
    assert _produce(broker, bob_topic) == "TopicAuthorizationFailedError"


def test_a_foreign_principal_without_a_rule_is_refused(broker: Broker,
                                                      kerberos_env: Realm) -> None:
    """dave@OTHER.TEST holds a valid cross-realm ticket for kafka/localhost, but no rule
    gives him a short name."""
    ccache = kerberos_env.ccache(f"dave@{OTHER_REALM}")
    credentials = ticket_cache_credentials(f"FILE:{ccache}")
    with pytest.raises(SaslAuthenticationFailed) as refused:
        _gssapi_connection(broker, lambda: credentials)
    assert (refused.value.error_code, refused.value.message) == (58, GENERIC)
    _assert_still_serving(broker, kerberos_env)


# ---------------------------------------------------------------------------- refusals


def test_a_ticket_for_a_key_the_broker_does_not_hold_is_58(broker: Broker,
                                                          kerberos_env: Realm) -> None:
    """A client that names the broker `127.0.0.1` gets a ticket for kafka/127.0.0.1, a
    principal the KDC knows but whose key is not in the broker's keytab: the classic
    wrong-keytab setup."""
    alice = keytab_credentials(f"alice@{REALM}", str(kerberos_env.keytab("alice")),
                               "MEMORY:wrong-key")
    with pytest.raises(SaslAuthenticationFailed) as refused:
        _gssapi_connection(broker, lambda: alice, host="127.0.0.1")
    assert (refused.value.error_code, refused.value.message) == (58, GENERIC)
    _assert_still_serving(broker, kerberos_env)


@pytest.mark.skipif(shutil.which("kcat") is None, reason="kcat is not installed")
def test_kcat_with_the_wrong_service_key_gets_the_generic_text(broker: Broker,
                                                              realm: Realm) -> None:
    env = dict(os.environ, **realm.kdc.env(realm.directory / "kcat-wrong.ccache"))
    listed = subprocess.run(
        ["kcat", "-b", f"127.0.0.1:{broker.sasl_port}", "-L", "-m", "3",
         "-X", "security.protocol=SASL_PLAINTEXT", "-X", "sasl.mechanisms=GSSAPI",
         "-X", "sasl.kerberos.service.name=kafka",
         "-X", f"sasl.kerberos.keytab={realm.keytab('alice')}",
         "-X", f"sasl.kerberos.principal=alice@{REALM}"],
        capture_output=True, text=True, timeout=60, env=env)
    assert listed.returncode != 0
    assert GENERIC in listed.stderr, listed.stderr


def test_a_token_without_a_ticket_is_58(broker: Broker, kerberos_env: Realm) -> None:
    """What a client without a ticket could send: no AP-REQ, just bytes."""
    for token in (b"", b"\x60\x03not-a-ticket"):
        with BlockingConnection("localhost", broker.sasl_port, timeout=10) as conn:
            handshake = conn.request(ApiKey.SASL_HANDSHAKE, 1,
                                     SaslHandshakeRequest(mechanism="GSSAPI"))
            assert (handshake.error_code, handshake.mechanisms) == (0, ["GSSAPI"])
            answer = conn.request(ApiKey.SASL_AUTHENTICATE, 1,
                                  SaslAuthenticateRequest(auth_bytes=token))
            assert (answer.error_code, answer.error_message) == (58, GENERIC)
    _assert_still_serving(broker, kerberos_env)


def test_a_client_without_a_ticket_is_stopped_before_it_connects(kerberos_env: Realm) -> None:
    config = {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "GSSAPI",
              "sasl.kerberos.service.name": "kafka",
              "sasl.jaas.config": "com.sun.security.auth.module.Krb5LoginModule required "
                                  "useTicketCache=true;"}
    with pytest.raises(ClientConfigError, match=r"no Kerberos ticket in the default ticket "
                                                r"cache \(KRB5CCNAME\) \(run kinit\?\)"):
        client_security(config)


def test_a_keytab_the_kdc_refuses_stops_the_client(kerberos_env: Realm) -> None:
    """A keytab whose keys are stale (the principal was re-keyed since it was exported)."""
    realm = kerberos_env
    stale = realm.directory / "erin-stale.keytab"
    realm.kdc.principal_with_keytab("erin", stale)
    realm.kdc.export_keytab("erin", realm.directory / "erin-new.keytab")  # draws new keys
    config = {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "GSSAPI",
              "sasl.kerberos.service.name": "kafka",
              "sasl.jaas.config": KRB5_JAAS.format(keytab=stale,
                                                   principal=f"erin@{REALM}")}
    with pytest.raises(ClientConfigError, match=f"Kerberos login of erin@{REALM} from "
                                                f"keytab {stale} failed"):
        client_security(config)


# ---------------------------------------------------------------------------- Moldau's tools


def _tool(realm: Realm, script: str, *args: str, ccache: Path | None = None,
          kafka_opts: str = "") -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, **realm.kdc.env(ccache), KAFKA_OPTS=kafka_opts)
    return subprocess.run([str(BIN / script), *args],
                          capture_output=True, text=True, timeout=120, env=env)


def test_moldau_tools_log_in_with_a_keytab_and_with_a_jaas_file(
        broker: Broker, realm: Realm, tmp_path: Path) -> None:
    """--command-config with Kafka's Krb5LoginModule line (a keytab), and the KafkaClient
    section of a JAAS file named in KAFKA_OPTS (the ticket cache kinit filled)."""
    topic = f"gssapi-tool-{uuid.uuid4().hex[:6]}"
    keytab_config = tmp_path / "keytab.properties"
    keytab_config.write_text(
        "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=GSSAPI\n"
        "sasl.kerberos.service.name=kafka\nsasl.jaas.config=" + KRB5_JAAS.format(
            keytab=realm.keytab("alice"), principal=f"alice@{REALM}") + "\n")
    created = _tool(realm, "kafka-topics.sh", "--bootstrap-server", broker.sasl,
                    "--command-config", str(keytab_config), "--create", "--topic", topic)
    assert (created.returncode, created.stdout) == (0, f"Created topic {topic}.\n"), \
        created.stderr
    jaas = tmp_path / "client_jaas.conf"
    jaas.write_text("KafkaClient {\n  com.sun.security.auth.module.Krb5LoginModule required\n"
                    "  useTicketCache=true;\n};\n")
    cache_config = tmp_path / "cache.properties"
    cache_config.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=GSSAPI\n"
                            "sasl.kerberos.service.name=kafka\n")
    listed = _tool(realm, "kafka-topics.sh", "--bootstrap-server", broker.sasl,
                   "--command-config", str(cache_config), "--list",
                   ccache=realm.ccache(f"alice@{REALM}"),
                   kafka_opts=f"-Djava.security.auth.login.config={jaas}")
    assert listed.returncode == 0, listed.stderr
    assert topic in listed.stdout.splitlines()


def test_moldau_tools_without_a_ticket_say_so(broker: Broker, realm: Realm,
                                              tmp_path: Path) -> None:
    config = tmp_path / "cache.properties"
    config.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=GSSAPI\n"
                      "sasl.kerberos.service.name=kafka\nsasl.jaas.config="
                      "com.sun.security.auth.module.Krb5LoginModule required "
                      "useTicketCache=true;\n")
    listed = _tool(realm, "kafka-topics.sh", "--bootstrap-server", broker.sasl,
                   "--command-config", str(config), "--list",
                   ccache=tmp_path / "empty.ccache")
    assert listed.returncode != 0
    assert "no Kerberos ticket in the default ticket cache (KRB5CCNAME) (run kinit?)" in \
        listed.stderr
    assert "Traceback" not in listed.stderr
