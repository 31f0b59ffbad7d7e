"""The ACL pair's certificates without a lab: the principal names `acls.tls-principals`
grants ACLs to are the names of the certificates the lab makes (Kafka's run of the
scenario showed they are Kafka's too). A name that drifted from its certificate would
deny on both brokers alike, and the scenario would pass without testing anything."""

from __future__ import annotations

from pathlib import Path

from cryptography.hazmat.primitives.serialization import Encoding, pkcs12

from compat import acl_tls
from compat.scenarios.acls_logins import CERTIFICATE_PRINCIPALS, UNMAPPED_CAROL
from moldau.security.principal import principal_from_certificate


def certificate_der(store: Path) -> bytes:
    loaded = pkcs12.load_pkcs12(store.read_bytes(), acl_tls.STORE_PASSWORD.encode())
    assert loaded.cert is not None
    return loaded.cert.certificate.public_bytes(Encoding.DER)


def test_the_granted_names_are_the_certificates_names(tmp_path: Path) -> None:
    pki = acl_tls.LabPki.create(tmp_path)
    for client, principal in CERTIFICATE_PRINCIPALS.items():
        der = certificate_der(pki.keystore(client))
        assert "User:" + principal_from_certificate(der, acl_tls.MAPPING_RULES) == principal
    carol = certificate_der(pki.keystore("carol"))
    assert "User:" + principal_from_certificate(carol, "DEFAULT") == UNMAPPED_CAROL


def test_the_listener_settings_name_the_stores(tmp_path: Path) -> None:
    pki = acl_tls.LabPki.create(tmp_path)
    broker = pki.broker_properties()
    assert Path(broker["ssl.keystore.location"]).exists()
    assert broker["listener.name.ssl.ssl.principal.mapping.rules"] == acl_tls.MAPPING_RULES
    assert broker["listener.name.strict.ssl.principal.mapping.rules"] == acl_tls.MAPPED_RULE
    assert "ssl.keystore.location" not in pki.client_properties(None)
    assert pki.sasl_ssl_properties("alice", "carol")["security.protocol"] == "SASL_SSL"
