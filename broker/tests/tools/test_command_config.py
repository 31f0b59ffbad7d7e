"""--command-config with TLS: the tools reach a broker's SSL listener (client certificate
required) with a Kafka client properties file: PKCS12 stores with passwords, PEM stores,
librdkafka's PEM names; a damaged JKS store, a wrong password and an untrusted broker each fail
with a one-line error, and nothing is created."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from broker_process import mutual_tls_broker
from tls_material import TlsMaterial, make_tls_material

from .toolrun import run


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> TlsMaterial:
    return make_tls_material(tmp_path_factory.mktemp("tools-tls"))


@pytest.fixture(scope="module")
def ssl_bootstrap(tmp_path_factory, zk_ensemble: Any, tls: TlsMaterial) -> Iterator[str]:
    broker, bootstrap = mutual_tls_broker(tmp_path_factory, zk_ensemble.connect_string, tls,
                                          "tools-ssl")
    yield bootstrap
    assert broker.stop() == 0


def properties(path: Path, values: dict[str, str]) -> str:
    path.write_text("".join(f"{k}={v}\n" for k, v in values.items()))
    return str(path)


def topics(bootstrap: str, config: str, *args: str) -> Any:
    return run("kafka-topics.sh", "--bootstrap-server", bootstrap, "--command-config", config,
               *args)


def test_kafka_and_librdkafka_style_client_configs(ssl_bootstrap: str, tls: TlsMaterial,
                                                   tmp_path: Path) -> None:
    pkcs12 = properties(tmp_path / "pkcs12.properties", {
        "security.protocol": "SSL",
        "ssl.truststore.type": "PKCS12", "ssl.truststore.location": str(tls.truststore_p12),
        "ssl.truststore.password": tls.store_password,
        "ssl.keystore.type": "PKCS12", "ssl.keystore.location": str(tls.client_p12),
        "ssl.keystore.password": tls.store_password})
    created = topics(ssl_bootstrap, pkcs12, "--create", "--topic", "over-tls")
    assert (created.code, created.out) == (0, "Created topic over-tls.\n"), created.err
    pem = properties(tmp_path / "pem.properties", {
        "security.protocol": "SSL", "ssl.truststore.location": str(tls.ca_cert),
        **{k: v for k, v in tls.client_settings().items() if k.startswith("ssl.keystore")}})
    assert "over-tls" in topics(ssl_bootstrap, pem, "--list").out.splitlines()
    librdkafka = properties(tmp_path / "librdkafka.properties", tls.confluent_config())
    assert "over-tls" in topics(ssl_bootstrap, librdkafka, "--list").out.splitlines()


def test_bad_tls_configs_fail_with_one_line_and_create_nothing(
        ssl_bootstrap: str, tls: TlsMaterial, tmp_path: Path) -> None:
    good = {"security.protocol": "SSL", "ssl.truststore.location": str(tls.ca_cert),
            "ssl.keystore.type": "PKCS12", "ssl.keystore.location": str(tls.client_p12),
            "ssl.keystore.password": tls.store_password}
    cases = {
        "jks": ({**good, "ssl.truststore.type": "JKS", "ssl.truststore.location": str(tls.jks)},
                "cannot open the JKS store"),
        "password": ({**good, "ssl.keystore.password": "wrong"}, "ssl.keystore.password"),
        "untrusted": ({**good, "ssl.truststore.location": str(tls.client_cert)}, ""),
        # SASL_SSL without a login: Kafka's default mechanism, GSSAPI, finds no JAAS entry
        "sasl": ({**good, "security.protocol": "SASL_SSL"},
                 "Could not find a 'KafkaClient' entry in the JAAS configuration"),
    }
    for name, (values, needle) in cases.items():
        config = properties(tmp_path / f"{name}.properties", values)
        out = topics(ssl_bootstrap, config, "--create", "--topic", f"bad-{name}")
        # as Kafka's TopicCommand: one line on stdout, and its ERROR log line on stderr
        assert out.code == 1, (name, out.out, out.err)
        lines = out.out.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("Error while executing topic command : ")
        assert needle in lines[0] and "ERROR" in out.err, (name, out.out, out.err)
    listed = topics(ssl_bootstrap, properties(tmp_path / "good.properties", good), "--list")
    assert not [t for t in listed.out.splitlines() if t.startswith("bad-")]


def test_missing_client_certificate_is_kafkas_ssl_handshake_failure(
        ssl_bootstrap: str, tls: TlsMaterial, tmp_path: Path) -> None:
    """The listener requires a client certificate and the config has none: with TLS 1.3
    the refusal comes after the handshake, as the connection's end; Kafka 3.9 reports it
    as SslAuthenticationException "SSL handshake failed" (issue 41 item 7)."""
    config = properties(tmp_path / "no-keystore.properties", {
        "security.protocol": "SSL", "ssl.truststore.location": str(tls.ca_cert)})
    out = topics(ssl_bootstrap, config, "--list")
    assert (out.code, out.out) == (1, "Error while executing topic command : SSL handshake "
                                      "failed\n")
    assert "ERROR org.apache.kafka.common.errors.SslAuthenticationException: SSL handshake " \
           "failed" in out.err
