"""Kafka's client security properties as moldau.client.security reads them
(`client_security`: TLS context and SASL mechanism factory) and translates them for
librdkafka (`librdkafka_settings`), every refusal with its message. The translated
settings are handed to a real confluent-kafka Producer, which refuses what librdkafka
cannot use (unknown keys, PEM it cannot load)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import pytest
from tls_material import TlsMaterial, make_tls_material

from moldau.client.security import (
    ClientConfigError,
    client_security,
    librdkafka_settings,
)

PLAIN_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
              'username="alice" password="alice-secret";')
SCRAM_JAAS = ('org.apache.kafka.common.security.scram.ScramLoginModule required '
              'username="alice" password="s3cr\\"et";')
NO_ENV: dict[str, str] = {}
NO_JAAS = ("Could not find a 'KafkaClient' entry in the JAAS configuration. System "
           "property 'java.security.auth.login.config' is not set")


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> TlsMaterial:
    return make_tls_material(tmp_path_factory.mktemp("client-security-tls"))


def sasl(mechanism: str = "PLAIN", jaas: str = PLAIN_JAAS,
         protocol: str = "SASL_PLAINTEXT", **more: str) -> dict[str, str]:
    return {"security.protocol": protocol, "sasl.mechanism": mechanism,
            "sasl.jaas.config": jaas, **more}


def refused(config: Mapping[str, str], environ: Mapping[str, str] = NO_ENV) -> str:
    """The message client_security refuses a config with (librdkafka_settings must
    refuse it the same way)."""
    with pytest.raises(ClientConfigError) as first:
        client_security(config, environ)
    with pytest.raises(ClientConfigError) as second:
        librdkafka_settings(config, environ)
    assert str(first.value) == str(second.value)
    return str(first.value)


def jaas_file(tmp_path: Path, text: str) -> dict[str, str]:
    path = tmp_path / "client_jaas.conf"
    path.write_text(text)
    return {"KAFKA_OPTS": f"-Xmx1g -Djava.security.auth.login.config={path}"}


def librdkafka_accepts(settings: Mapping[str, str]) -> None:
    """A confluent-kafka producer takes the settings (it loads the PEM material when it
    is made); with no bootstrap servers it connects nowhere."""
    from confluent_kafka import Producer

    Producer({**settings, "log_level": 0})


# ---------------------------------------------------------------------- security.protocol


def test_plaintext_is_the_default() -> None:
    security = client_security({}, NO_ENV)
    assert (security.protocol, security.ssl_context, security.sasl_mechanism,
            security.sasl) == ("PLAINTEXT", None, None, None)


def test_the_protocol_is_case_insensitive_as_in_kafka(tls: TlsMaterial) -> None:
    security = client_security({"security.protocol": "ssl",
                                "ssl.truststore.location": str(tls.ca_cert)}, NO_ENV)
    assert security.protocol == "SSL" and security.ssl_context is not None
    assert security.sasl is None


def test_an_unknown_protocol_is_refused_with_kafka_s_message() -> None:
    assert refused({"security.protocol": "TLS"}) == (
        "Invalid value TLS for configuration security.protocol: String must be one of "
        "(case insensitive): PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL")


def test_bad_tls_settings_are_refused(tls: TlsMaterial) -> None:
    config = {"security.protocol": "SASL_SSL", "ssl.truststore.type": "JKS",
              "ssl.truststore.location": str(tls.jks), "sasl.mechanism": "PLAIN",
              "sasl.jaas.config": PLAIN_JAAS}
    assert "cannot open the JKS store" in refused(config)


# ---------------------------------------------------------------------- SASL logins


def test_plain_from_sasl_jaas_config() -> None:
    security = client_security(sasl(), NO_ENV)
    assert (security.protocol, security.sasl_mechanism) == ("SASL_PLAINTEXT", "PLAIN")
    assert security.ssl_context is None and security.sasl is not None
    first, second = security.sasl(), security.sasl()
    assert first is not second  # a fresh mechanism client per connection
    assert first.initial_response() == b"\0alice\0alice-secret"


def test_scram_over_ssl_from_sasl_jaas_config(tls: TlsMaterial) -> None:
    security = client_security(sasl("SCRAM-SHA-512", SCRAM_JAAS, "SASL_SSL",
                                     **{"ssl.truststore.location": str(tls.ca_cert)}),
                               NO_ENV)
    assert security.ssl_context is not None and security.sasl is not None
    client = security.sasl()
    assert client.mechanism == "SCRAM-SHA-512"
    assert client.initial_response().startswith(b"n,,n=alice,r=")


def test_tokenauth_becomes_the_scram_extension() -> None:
    jaas = SCRAM_JAAS.replace(";", ' tokenauth="TRUE";')
    security = client_security(sasl("SCRAM-SHA-256", jaas), NO_ENV)
    assert security.sasl is not None
    assert security.sasl().initial_response().endswith(b",tokenauth=true")


def test_librdkafka_username_and_password() -> None:
    security = client_security({"security.protocol": "SASL_PLAINTEXT",
                                "sasl.mechanisms": "PLAIN", "sasl.username": "bob",
                                "sasl.password": "bob-secret"}, NO_ENV)
    assert security.sasl is not None
    assert security.sasl().initial_response() == b"\0bob\0bob-secret"
    assert refused({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
                    "sasl.username": "bob"}) == (
        "sasl.password must be set with sasl.username/sasl.password (librdkafka's SASL "
        "login)")


def test_the_kafka_client_section_of_the_kafka_opts_jaas_file(tmp_path: Path) -> None:
    environ = jaas_file(tmp_path, "KafkaClient {\n  org.apache.kafka.common.security.scram."
                        'ScramLoginModule required\n  username="carol"\n  '
                        'password="carol-secret";\n};\n')
    config = {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-256"}
    security = client_security(config, environ)
    assert security.sasl is not None
    assert security.sasl().initial_response().startswith(b"n,,n=carol,r=")
    assert librdkafka_settings(config, environ)["sasl.username"] == "carol"


def test_no_jaas_anywhere_is_kafka_s_message() -> None:
    assert refused({"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN"}) == NO_JAAS


def test_a_jaas_file_without_a_kafka_client_section(tmp_path: Path) -> None:
    environ = jaas_file(tmp_path, 'KafkaServer {\n  org.apache.kafka.common.security.plain.'
                        'PlainLoginModule required username="a" password="b";\n};\n')
    path = tmp_path / "client_jaas.conf"
    assert refused({"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN"}, environ) \
        == ("Could not find a 'KafkaClient' entry in the JAAS configuration. System "
            f"property 'java.security.auth.login.config' is {path}")


def test_an_unreadable_jaas_file(tmp_path: Path) -> None:
    environ = {"KAFKA_OPTS": f"-Djava.security.auth.login.config={tmp_path}/missing.conf"}
    assert refused({"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN"}, environ) \
        .startswith(f"Cannot read the JAAS configuration file {tmp_path}/missing.conf")


@pytest.mark.parametrize("config, message", [
    ({"security.protocol": "SASL_SSL"},
     "Could not find a 'KafkaClient' entry in the JAAS configuration. System property "
     "'java.security.auth.login.config' is not set"),
    (sasl("OAUTHBEARER"),
     "sasl.jaas.config: sasl.mechanism OAUTHBEARER logs in with "
     "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule, not "
     "org.apache.kafka.common.security.plain.PlainLoginModule"),
    (sasl("plain"),
     "Invalid sasl.mechanism plain: Moldau's tools speak PLAIN, SCRAM-SHA-256, "
     "SCRAM-SHA-512, OAUTHBEARER, GSSAPI (mechanism names are case-sensitive)"),
    (sasl(jaas=PLAIN_JAAS + " " + SCRAM_JAAS),
     "JAAS config property contains 2 login modules, should be 1 module"),
    (sasl(jaas=PLAIN_JAAS.rstrip(";")), "JAAS config entry not terminated by semi-colon"),
    (sasl(jaas='org.apache.kafka.common.security.plain.PlainLoginModule required '
               'username="alice";'),
     "sasl.jaas.config: org.apache.kafka.common.security.plain.PlainLoginModule gives no "
     "username and password; a PLAIN or SCRAM login needs "
     "org.apache.kafka.common.security.plain.PlainLoginModule or "
     "org.apache.kafka.common.security.scram.ScramLoginModule with username=\"...\" "
     "password=\"...\""),
    (sasl(jaas='com.sun.security.auth.module.JndiLoginModule required;'),
     "com.sun.security.auth.module.JndiLoginModule is not allowed. Update System property "
     "'org.apache.kafka.disallowed.login.modules' to allow "
     "com.sun.security.auth.module.JndiLoginModule"),
    ({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
      "sasl.username": "alice", "sasl.password": "a\x00b"},
     "sasl.username/sasl.password: SASL/PLAIN password must not contain a NUL character"),
], ids=["default-gssapi", "oauthbearer", "lower-case", "two-modules", "no-semicolon",
        "no-password", "disallowed-module", "nul-in-password"])
def test_sasl_configs_that_cannot_work(config: dict[str, str], message: str) -> None:
    assert refused(config) == message


# ---------------------------------------------------------------------- librdkafka


def test_the_checker_s_translation() -> None:
    assert librdkafka_settings(sasl(
        "SCRAM-SHA-512", SCRAM_JAAS, "SASL_SSL",
        **{"ssl.truststore.type": "PEM", "ssl.truststore.location": "/etc/ca.pem",
           "ssl.endpoint.identification.algorithm": ""}), NO_ENV) == {
        "security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "alice", "sasl.password": 's3cr"et',
        "ssl.ca.location": "/etc/ca.pem", "ssl.endpoint.identification.algorithm": "none"}


def test_java_only_properties_are_dropped_and_the_rest_passed_on() -> None:
    config = {"key.serializer": "org.apache.kafka.common.serialization.StringSerializer",
              "buffer.memory": "33554432", "sasl.login.refresh.window.factor": "0.8",
              "ssl.protocol": "TLSv1.3", "acks": "all", "linger.ms": "5",
              "sasl.jaas.config": PLAIN_JAAS}
    settings = librdkafka_settings(config, NO_ENV)
    assert settings == {"acks": "all", "linger.ms": "5"}  # PLAINTEXT: no SASL login
    librdkafka_accepts(settings)


def test_pkcs12_stores_become_pem_text(tls: TlsMaterial) -> None:
    settings = librdkafka_settings({
        "security.protocol": "SSL",
        "ssl.truststore.type": "PKCS12", "ssl.truststore.location": str(tls.truststore_p12),
        "ssl.truststore.password": tls.store_password,
        "ssl.keystore.type": "PKCS12", "ssl.keystore.location": str(tls.client_p12),
        "ssl.keystore.password": tls.store_password, "ssl.key.password": "unused"}, NO_ENV)
    assert sorted(settings) == ["security.protocol", "ssl.ca.pem", "ssl.certificate.pem",
                                "ssl.key.pem"]
    assert settings["ssl.ca.pem"] == tls.ca_cert.read_text()
    assert settings["ssl.key.pem"].startswith("-----BEGIN PRIVATE KEY-----")
    librdkafka_accepts(settings)


def test_pem_files_are_given_by_path(tls: TlsMaterial) -> None:
    settings = librdkafka_settings({
        "security.protocol": "SSL", "ssl.truststore.location": str(tls.ca_cert),
        "ssl.keystore.type": "PEM", "ssl.keystore.location": str(tls.server_keystore_pem),
        "ssl.key.password": tls.key_password}, NO_ENV)
    assert settings == {"security.protocol": "SSL", "ssl.ca.location": str(tls.ca_cert),
                        "ssl.certificate.location": str(tls.server_keystore_pem),
                        "ssl.key.location": str(tls.server_keystore_pem),
                        "ssl.key.password": tls.key_password}
    librdkafka_accepts(settings)


def test_librdkafka_style_configs_pass_as_they_are(tls: TlsMaterial) -> None:
    config = {**tls.confluent_config(), "security.protocol": "SASL_SSL",
              "sasl.mechanisms": "SCRAM-SHA-256", "sasl.username": "alice",
              "sasl.password": "alice-secret"}
    assert librdkafka_settings(config, NO_ENV) == config
    librdkafka_accepts(config)


def test_cipher_suites_in_openssl_names() -> None:
    config = {"security.protocol": "SSL",
              "ssl.cipher.suites": "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384, "
                                   "TLS_AES_128_GCM_SHA256,ECDHE-ECDSA-AES128-GCM-SHA256"}
    assert librdkafka_settings(config, NO_ENV)["ssl.cipher.suites"] == (
        "ECDHE-RSA-AES256-GCM-SHA384:ECDHE-ECDSA-AES128-GCM-SHA256")
    only_tls13 = {**config, "ssl.cipher.suites": "TLS_AES_128_GCM_SHA256"}
    assert "ssl.cipher.suites" not in librdkafka_settings(only_tls13, NO_ENV)


def test_a_delegation_token_login_cannot_go_through_librdkafka() -> None:
    jaas = SCRAM_JAAS.replace(";", ' tokenauth="true";')
    with pytest.raises(ClientConfigError) as failed:
        librdkafka_settings(sasl("SCRAM-SHA-256", jaas), NO_ENV)
    assert str(failed.value) == (
        'sasl.jaas.config: tokenauth="true" (a delegation token login) needs the SCRAM '
        "tokenauth extension, which librdkafka cannot send")
