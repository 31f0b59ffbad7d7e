"""Kafka's AclAuthorizer on a real broker with real clients: Kafka in Action's chapter-10
story with certificate principals (SASL comes later), the ACL APIs through
confluent-kafka's AdminClient, the audit log, and bad input refused with nothing written.

One broker: PLAINTEXT (User:ANONYMOUS) and SSL with client certificates mapped to
`User:<CN>`; `super.users=User:Franz`."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)
from tls_material import TlsMaterial, make_tls_material

from moldau.client.blocking import BlockingConnection
from moldau.devcluster.brokers import BrokerProcess, free_port
from moldau.protocol.generated.api import ApiKey
from moldau.protocol.generated.describe_acls_request import DescribeAclsRequest

TOPIC = "clueful_secrets"
GROUP = "clueful_readers"


class Principals:
    def __init__(self, tls: TlsMaterial, bootstrap: str, plaintext: str) -> None:
        self.tls = tls
        self.bootstrap = bootstrap
        self.plaintext = plaintext

    def config(self, name: str | None) -> dict[str, str]:
        """librdkafka settings for the certificate of `name` (CN), or the anonymous
        PLAINTEXT listener for None."""
        if name is None:
            return {"bootstrap.servers": self.plaintext}
        key, cert = self.tls.issue(name.lower(), (("C", "US"), ("O", "acme"), ("OU", "eng"),
                                                  ("CN", name)))
        return {"bootstrap.servers": self.bootstrap, "security.protocol": "SSL",
                "ssl.ca.location": str(self.tls.ca_cert),
                "ssl.certificate.location": str(cert), "ssl.key.location": str(key)}


@pytest.fixture(scope="module")
def acl_broker(tmp_path_factory: pytest.TempPathFactory,
               zk_ensemble) -> Iterator[tuple[BrokerProcess, Principals]]:
    tls = make_tls_material(tmp_path_factory.mktemp("acl-tls"))
    plain, secure = free_port(), free_port()
    props = {
        "listeners": f"PLAINTEXT://127.0.0.1:{plain},SSL://127.0.0.1:{secure}",
        **tls.server_settings("PKCS12", client_auth="required"),
        "ssl.principal.mapping.rules": "RULE:^CN=(.*?),OU=.*$/$1/,DEFAULT",
        "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
        "super.users": "User:Franz",
        "num.partitions": "1", "offsets.topic.replication.factor": "1",
    }
    broker = BrokerProcess(str(tmp_path_factory.mktemp("acl-broker")), 1,
                           f"{zk_ensemble.connect_string}/acls-{uuid.uuid4().hex[:8]}",
                           port=plain, properties=props)
    broker.start(wait=60)
    yield broker, Principals(tls, f"127.0.0.1:{secure}", f"127.0.0.1:{plain}")
    assert broker.stop() == 0


def admin(principals: Principals, name: str | None) -> AdminClient:
    return AdminClient(principals.config(name))


def produce(principals: Principals, name: str | None, values: list[bytes]) -> list[KafkaError]:
    """Produce `values` to TOPIC as `name`; the delivery errors."""
    errors: list[KafkaError] = []
    producer = Producer({**principals.config(name), "message.timeout.ms": 5000,
                         "enable.idempotence": False})
    for value in values:
        producer.produce(TOPIC, value, on_delivery=lambda err, _msg: err and errors.append(err))
    producer.flush(20)
    return errors


def consume(principals: Principals, name: str | None, count: int,
            timeout: float = 20.0) -> tuple[list[bytes], list[KafkaError]]:
    consumer = Consumer({**principals.config(name), "group.id": GROUP,
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([TOPIC])
    values: list[bytes] = []
    errors: list[KafkaError] = []
    deadline = time.monotonic() + timeout
    try:
        while len(values) < count and not errors and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            if msg.error() is not None:
                errors.append(msg.error())
            else:
                values.append(msg.value())
    finally:
        consumer.close()
    return values, errors


def binding(principal: str, operation: AclOperation, resource: ResourceType = ResourceType.TOPIC,
            name: str = TOPIC) -> AclBinding:
    return AclBinding(resource, name, ResourcePatternType.LITERAL, principal, "*", operation,
                      AclPermissionType.ALLOW)


def listed_topics(principals: Principals, name: str | None) -> set[str]:
    return set(admin(principals, name).list_topics(timeout=10).topics)


def test_chapter_10_super_user_grants_and_others_are_refused(acl_broker) -> None:
    broker, principals = acl_broker
    franz = admin(principals, "Franz")
    franz.create_topics([NewTopic(TOPIC, 1, 1)])[TOPIC].result(timeout=20)
    # Franz, a super user, needs no ACL
    assert produce(principals, "Franz", [b"from Franz"]) == []
    # an authorized principal is granted Read and Write on the topic, Read on the group
    results = franz.create_acls([
        binding("User:Hemingway", AclOperation.WRITE),
        binding("User:Hemingway", AclOperation.READ),
        binding("User:Hemingway", AclOperation.READ, ResourceType.GROUP, GROUP)])
    for future in results.values():
        future.result(timeout=20)
    assert produce(principals, "Hemingway", [b"from Hemingway"]) == []
    values, errors = consume(principals, "Hemingway", 2)
    assert (values, errors) == ([b"from Franz", b"from Hemingway"], [])
    # Hemingway may describe the topic (READ implies DESCRIBE); Nobody may not even see it
    assert TOPIC in listed_topics(principals, "Hemingway")
    assert TOPIC not in listed_topics(principals, "Nobody")
    assert TOPIC not in listed_topics(principals, None)
    for name in ("Nobody", None):  # a stranger's and an anonymous client's writes fail
        errors = produce(principals, name, [b"intruder"])
        assert errors and {e.code() for e in errors} == {KafkaError.TOPIC_AUTHORIZATION_FAILED}
    _, errors = consume(principals, "Nobody", 1, timeout=10)
    assert errors and errors[0].code() in (KafkaError.GROUP_AUTHORIZATION_FAILED,
                                           KafkaError.TOPIC_AUTHORIZATION_FAILED)
    # nothing the intruders sent was written
    values, _ = consume(principals, "Franz", 2)
    assert values == [b"from Franz", b"from Hemingway"]
    log = Path(broker.log_dir, "kafka-authorizer.log")
    deadline = time.monotonic() + 5
    while "User:Nobody is Denied" not in log.read_text() and time.monotonic() < deadline:
        time.sleep(0.1)
    # the producer learns from Metadata that it may not describe the topic
    assert ("Principal = User:Nobody is Denied Operation = Describe from host = 127.0.0.1 on "
            f"resource = Topic:LITERAL:{TOPIC} for request = Metadata with resourceRefCount = 1"
            ) in log.read_text()


def test_acl_admin_is_for_the_cluster_alterer_and_describe_follows_deletes(acl_broker) -> None:
    broker, principals = acl_broker
    franz = admin(principals, "Franz")
    name = f"notes-{uuid.uuid4().hex[:6]}"
    wanted = binding("User:Kafka", AclOperation.DESCRIBE, name=name)
    everything = AclBindingFilter(ResourceType.TOPIC, name, ResourcePatternType.ANY, None,
                                  None, AclOperation.ANY, AclPermissionType.ANY)
    # a principal without ALTER on the cluster cannot create ACLs, nor (without
    # DESCRIBE on it) list them
    nobody = admin(principals, "Nobody")
    with pytest.raises(KafkaException) as refused:
        nobody.create_acls([wanted])[wanted].result(timeout=20)
    assert refused.value.args[0].code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED
    # (librdkafka 2.0 returns an empty list for a refused DescribeAcls: ask directly)
    conn = BlockingConnection("127.0.0.1", broker.port, timeout=10)
    try:
        refusal = conn.request(ApiKey.DESCRIBE_ACLS, 3, DescribeAclsRequest(
            resource_type_filter=1, resource_name_filter=None, pattern_type_filter=1,
            principal_filter=None, host_filter=None, operation=1, permission_type=1))
    finally:
        conn.close()
    assert refusal.error_code == KafkaError.CLUSTER_AUTHORIZATION_FAILED
    franz.create_acls([wanted])[wanted].result(timeout=20)
    assert franz.describe_acls(everything).result(timeout=20) == [wanted]
    deleted = franz.delete_acls([everything])[everything].result(timeout=20)
    assert deleted == [wanted]
    assert franz.describe_acls(everything).result(timeout=20) == []


@pytest.mark.parametrize("bad,code", [
    # a resource name with "/" cannot be a znode name
    (AclBinding(ResourceType.TOPIC, "a/b", ResourcePatternType.LITERAL, "User:x", "*",
                AclOperation.READ, AclPermissionType.ALLOW), KafkaError.INVALID_REQUEST),
    # the cluster resource has one name
    (AclBinding(ResourceType.BROKER, "my-cluster", ResourcePatternType.LITERAL, "User:x",
                "*", AclOperation.ALTER, AclPermissionType.ALLOW), KafkaError.INVALID_REQUEST),
])
def test_bad_acls_are_refused_and_nothing_is_written(acl_broker, bad: AclBinding,
                                                      code: int) -> None:
    _, principals = acl_broker
    franz = admin(principals, "Franz")
    before = franz.describe_acls(AclBindingFilter(
        ResourceType.ANY, None, ResourcePatternType.ANY, None, None, AclOperation.ANY,
        AclPermissionType.ANY)).result(timeout=20)
    with pytest.raises(KafkaException) as refused:
        franz.create_acls([bad])[bad].result(timeout=20)
    assert refused.value.args[0].code() == code
    after = franz.describe_acls(AclBindingFilter(
        ResourceType.ANY, None, ResourcePatternType.ANY, None, None, AclOperation.ANY,
        AclPermissionType.ANY)).result(timeout=20)
    assert sorted(map(str, after)) == sorted(map(str, before))
