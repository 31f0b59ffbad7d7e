"""DynamicBrokerConfig and the listeners' TLS: the settings a listener's TlsContextHolder
gets (server.properties < dynamic listener.name.<l>.ssl.*), and the validation of a
proposed per-broker change against the current certificate (Kafka's
SslFactory.validateReconfiguration inside DynamicBrokerConfig.validate). The broker-level
scenario (AdminClient, real connections) is tests/broker/test_tls_rotation.py."""

from __future__ import annotations

from pathlib import Path

import pytest
from tls_material import SERVER_NAMES, SERVER_SUBJECT, TlsMaterial, make_tls_material

from moldau.security.ssl_settings import TlsConfigError
from moldau.security.tls import TlsContextHolder
from moldau.server.config import BrokerConfig
from moldau.server.dynamic_config import DynamicBrokerConfig, DynamicConfigError

PREFIX = "listener.name.ssl."


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> TlsMaterial:
    return make_tls_material(tmp_path_factory.mktemp("dyn-tls"))


def dynamic_config(tls: TlsMaterial) -> DynamicBrokerConfig:
    static = BrokerConfig.from_properties({
        "zookeeper.connect": "localhost:2181",
        "listeners": "PLAINTEXT://127.0.0.1:9092,SSL://127.0.0.1:9093",
        "password.encoder.secret": "s",
        **tls.server_settings("PKCS12"),
    })
    return DynamicBrokerConfig(static, 1)


def inline_pem(key: Path, cert: Path) -> dict[str, str]:
    """Dynamic overrides that move the SSL listener to a PEM-in-config key store."""
    return {PREFIX + "ssl.keystore.type": "PEM", PREFIX + "ssl.keystore.location": "",
            PREFIX + "ssl.keystore.password": "",
            PREFIX + "ssl.keystore.key": key.read_text(),
            PREFIX + "ssl.keystore.certificate.chain": cert.read_text()}


def test_listener_settings_are_static_then_dynamic_with_unset_store_keys_none(
        tls: TlsMaterial) -> None:
    dynamic = dynamic_config(tls)
    settings = dynamic.listener_ssl_settings("SSL")
    assert settings["ssl.keystore.location"] == str(tls.server_p12)
    assert settings["ssl.keystore.key"] is None and settings["ssl.key.password"] is None
    assert settings["ssl.client.auth"] == "none"

    proposed = {PREFIX + "ssl.keystore.location": "/new.p12", "log.cleaner.threads": "2",
                "listener.name.other.ssl.keystore.location": "/other.p12"}
    settings = dynamic.listener_ssl_settings("SSL", proposed)
    assert settings["ssl.keystore.location"] == "/new.p12"
    assert settings["ssl.keystore.password"] == tls.store_password  # static, not overridden


def test_deleting_dynamic_store_keys_returns_to_server_properties(tls: TlsMaterial) -> None:
    """A dynamic key that server.properties does not set (here the PEM-in-config key)
    must be cleared by a reload when it is deleted, else the listener keeps it."""
    dynamic = dynamic_config(tls)
    holder = TlsContextHolder(dynamic.listener_ssl_settings("SSL"))
    key, cert = tls.issue("inline", SERVER_SUBJECT, SERVER_NAMES, server=True)
    dynamic.broker_props = inline_pem(key, cert)
    holder.reload(dynamic.listener_ssl_settings("SSL"))
    assert holder.settings["ssl.keystore.key"] == key.read_text()

    dynamic.broker_props = {}  # kafka-configs --delete-config of every key above
    holder.reload(dynamic.listener_ssl_settings("SSL"))
    assert holder.settings["ssl.keystore.key"] is None
    assert holder.settings["ssl.keystore.location"] == str(tls.server_p12)
    assert holder.generation == 2


def test_validate_checks_the_new_stores_against_the_current_certificate(
        tls: TlsMaterial) -> None:
    dynamic = dynamic_config(tls)
    holders = {"SSL": TlsContextHolder(dynamic.listener_ssl_settings("SSL"))}
    context = holders["SSL"].context

    key, cert = tls.issue("good", SERVER_SUBJECT, SERVER_NAMES, server=True)
    dynamic.validate(inline_pem(key, cert), True, holders)

    wrong = {PREFIX + "ssl.keystore.location": str(tls.server_p12),
             PREFIX + "ssl.keystore.password": "wrong"}
    with pytest.raises(DynamicConfigError, match=r"^Invalid dynamic configuration: "
                       r"listener\.name\.ssl\.ssl\.keystore\.password: cannot open"):
        dynamic.validate(wrong, True, holders)

    other = (("C", "US"), ("O", "acme"), ("OU", "brokers"), ("CN", "someone-else"))
    key, cert = tls.issue("other", other, SERVER_NAMES, server=True)
    with pytest.raises(DynamicConfigError, match=r"ssl\.allow\.dn\.changes"):
        dynamic.validate(inline_pem(key, cert), True, holders)

    # without holders (or for a listener that has none) nothing TLS is checked
    dynamic.validate(wrong, True, None)
    dynamic.validate({"listener.name.plaintext.ssl.keystore.password": "x"}, True, holders)
    # the cluster default level cannot hold listener keys: refused before any TLS check
    with pytest.raises(DynamicConfigError, match="broker id must be specified"):
        dynamic.validate(wrong, False, holders)
    assert holders["SSL"].context is context and holders["SSL"].generation == 0


def test_validate_rereads_only_what_changes_or_is_named(tls: TlsMaterial,
                                                        tmp_path: Path) -> None:
    """An unchanged listener is not reloaded, so its file is not read; naming its store
    location reloads the file (Kafka's reloadUpdatedFilesWithoutConfigChange), so it is
    checked."""
    dynamic = dynamic_config(tls)
    store = tmp_path / "store.p12"
    store.write_bytes(tls.server_p12.read_bytes())
    current = {PREFIX + "ssl.keystore.location": str(store),
               PREFIX + "ssl.keystore.password": tls.store_password}
    dynamic.broker_props = dict(current)
    holders = {"SSL": TlsContextHolder(dynamic.listener_ssl_settings("SSL"))}
    store.write_bytes(b"not a key store")  # replaced in place by something broken

    dynamic.validate({"log.cleaner.threads": "2"}, True, holders)
    with pytest.raises(DynamicConfigError, match=r"store\.p12"):
        dynamic.validate({**current, "log.cleaner.threads": "2"}, True, holders)
    with pytest.raises(TlsConfigError):
        holders["SSL"].check(dynamic.listener_ssl_settings("SSL"))
