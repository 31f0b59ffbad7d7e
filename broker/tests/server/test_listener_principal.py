"""The principal of a TLS client on each listener: `ssl.principal.mapping.rules` read with
the listener's own prefix first, as Kafka's channel builders read every ssl.* key (the
reference lab found Moldau applying only the broker-wide key)."""

from __future__ import annotations

import datetime

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from moldau.server.config import BrokerConfig
from moldau.server.listener import Listener
from moldau.server.listener_security import ListenerSecurity

MAPPED = "RULE:^CN=(.*?),OU=mapped,O=.*$/$1/L,DEFAULT"


def certificate_der(*subject: tuple[x509.ObjectIdentifier, str]) -> bytes:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(oid, value) for oid, value in subject])
    now = datetime.datetime.now(datetime.UTC)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
            .public_key(key.public_key()).serial_number(1)
            .not_valid_before(now).not_valid_after(now + datetime.timedelta(days=1))
            .sign(key, hashes.SHA256()))
    return cert.public_bytes(serialization.Encoding.DER)


CAROL = certificate_der((NameOID.ORGANIZATION_NAME, "Acme"),
                        (NameOID.ORGANIZATIONAL_UNIT_NAME, "mapped"),
                        (NameOID.COMMON_NAME, "Carol"))


def security(**values: str) -> ListenerSecurity:
    config = BrokerConfig.from_properties({
        "zookeeper.connect": "zk:2181",
        "listeners": "PLAIN://127.0.0.1:9092,SSL://127.0.0.1:9093,CERTS://127.0.0.1:9094",
        "listener.security.protocol.map": "PLAIN:PLAINTEXT,SSL:SSL,CERTS:SSL",
        "inter.broker.listener.name": "PLAIN", **values})
    return ListenerSecurity(config, kafka_opts="")


def listener(name: str) -> Listener:
    return Listener(name, "127.0.0.1", 0, "SSL")


def test_a_listeners_own_mapping_rules_apply_to_it_alone() -> None:
    rules = security(**{"listener.name.ssl.ssl.principal.mapping.rules": MAPPED})
    assert rules.principal(listener("SSL"), CAROL) == "User:carol"
    assert rules.principal(listener("CERTS"), CAROL) == "User:CN=Carol,OU=mapped,O=Acme"


def test_the_listeners_rules_override_the_broker_wide_ones() -> None:
    rules = security(**{"ssl.principal.mapping.rules": MAPPED,
                        "listener.name.certs.ssl.principal.mapping.rules":
                            "RULE:^CN=(.*?),.*$/tls-$1/U,DEFAULT"})
    assert rules.principal(listener("SSL"), CAROL) == "User:carol"
    assert rules.principal(listener("CERTS"), CAROL) == "User:TLS-CAROL"


def test_without_rules_the_whole_name_and_without_a_certificate_anonymous() -> None:
    rules = security()
    assert rules.principal(listener("SSL"), CAROL) == "User:CN=Carol,OU=mapped,O=Acme"
    assert rules.principal(listener("SSL"), None) == "User:ANONYMOUS"
