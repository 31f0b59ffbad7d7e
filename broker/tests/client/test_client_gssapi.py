"""GSSAPI client properties read as Kafka's clients and librdkafka read them: the
Krb5LoginModule line (a keytab or the ticket cache), the KAFKA_OPTS JAAS file, librdkafka's
own `sasl.kerberos.*` names, and the service name rules; translated for librdkafka. No KDC
is needed here (logging in for real: broker/test_gssapi.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from moldau.client.security import ClientConfigError, gssapi_login, librdkafka_settings
from moldau.security.sasl.gssapi import GssapiClient, bind_server_host
from moldau.security.sasl.plain import PlainClient

BASE = {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "GSSAPI",
        "bootstrap.servers": "broker1:9093"}
KEYTAB_JAAS = ('com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true '
               'storeKey=true keyTab="/etc/security/alice.keytab" principal="alice@R";')
NO_ENV: dict[str, str] = {}


def test_a_keytab_line_with_the_service_name_property() -> None:
    config = {**BASE, "sasl.kerberos.service.name": "kafka", "sasl.jaas.config": KEYTAB_JAAS}
    login = gssapi_login(config, NO_ENV)
    assert (login.service_name, login.principal, login.keytab) == (
        "kafka", "alice@R", "/etc/security/alice.keytab")
    assert login.ccache.startswith("MEMORY:")
    settings = librdkafka_settings({**config, "sasl.kerberos.ticket.renew.jitter": "0.05"},
                                   NO_ENV)
    assert {k: v for k, v in settings.items() if k.startswith("sasl.kerberos")} == {
        "sasl.kerberos.service.name": "kafka", "sasl.kerberos.principal": "alice@R",
        "sasl.kerberos.keytab": "/etc/security/alice.keytab"}
    assert "sasl.jaas.config" not in settings


def test_the_ticket_cache_and_the_jaas_service_name() -> None:
    config = {**BASE, "sasl.jaas.config": "com.sun.security.auth.module.Krb5LoginModule "
                                          'required useTicketCache=true serviceName="kafka";'}
    login = gssapi_login(config, NO_ENV)
    assert (login.service_name, login.keytab, login.ticket_cache) == ("kafka", None, None)
    settings = librdkafka_settings(config, NO_ENV)
    assert settings["sasl.kerberos.service.name"] == "kafka"
    assert settings["sasl.kerberos.min.time.before.relogin"] == "0"  # kinit is the user's


def test_the_kafka_client_section_of_the_jaas_file(tmp_path: Path) -> None:
    jaas = tmp_path / "client_jaas.conf"
    jaas.write_text("KafkaClient {\n" + KEYTAB_JAAS + "\n};\n")
    environ = {"KAFKA_OPTS": f"-Djava.security.auth.login.config={jaas}"}
    login = gssapi_login({**BASE, "sasl.kerberos.service.name": "kafka"}, environ)
    assert (login.principal, login.source) == ("alice@R", f"the KafkaClient section of {jaas}")


def test_librdkafka_names_alone() -> None:
    config = {**BASE, "sasl.kerberos.keytab": "/k", "sasl.kerberos.principal": "bob@R"}
    login = gssapi_login(config, NO_ENV)
    assert (login.service_name, login.principal, login.keytab) == ("kafka", "bob@R", "/k")
    # librdkafka's service name only: its default login, the ticket cache
    login = gssapi_login({**BASE, "sasl.kerberos.service.name": "kafka"}, NO_ENV)
    assert (login.keytab, login.principal) == (None, None)


@pytest.mark.parametrize("config, message", [
    (BASE, "Could not find a 'KafkaClient' entry in the JAAS configuration. System property "
           "'java.security.auth.login.config' is not set"),
    ({**BASE, "sasl.jaas.config": KEYTAB_JAAS},
     "sasl.jaas.config: No serviceName defined in either JAAS or Kafka config (set "
     "sasl.kerberos.service.name, e.g. kafka)"),
    ({**BASE, "sasl.kerberos.service.name": "kafka",
      "sasl.jaas.config": KEYTAB_JAAS.replace('storeKey', 'serviceName="other" storeKey')},
     "sasl.jaas.config: Conflicting serviceName values found in JAAS and Kafka configs value "
     "in JAAS file other, value in Kafka config kafka"),
    ({**BASE, "sasl.kerberos.service.name": "kafka",
      "sasl.jaas.config": "com.sun.security.auth.module.Krb5LoginModule required;"},
     "sasl.jaas.config: Krb5LoginModule needs useKeyTab=true (keyTab, principal) or "
     "useTicketCache=true (after kinit): Moldau's clients never prompt for a password"),
    ({**BASE, "sasl.kerberos.service.name": "kafka", "sasl.jaas.config":
      'com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true keyTab="/k";'},
     "sasl.jaas.config: Krb5LoginModule with useKeyTab=true needs principal"),
    ({**BASE, "sasl.kerberos.service.name": "kafka", "sasl.jaas.config":
      'org.apache.kafka.common.security.plain.PlainLoginModule required username="a" '
      'password="b";'},
     "sasl.jaas.config: sasl.mechanism GSSAPI logs in with "
     "com.sun.security.auth.module.Krb5LoginModule, not "
     "org.apache.kafka.common.security.plain.PlainLoginModule"),
    ({**BASE, "sasl.kerberos.keytab": "/k"},
     "librdkafka's sasl.kerberos.* settings: sasl.kerberos.keytab needs "
     "sasl.kerberos.principal"),
], ids=["no-jaas", "no-service-name", "conflicting-service-names", "no-login",
        "keytab-without-principal", "other-module", "keytab-without-principal-librdkafka"])
def test_gssapi_configs_that_cannot_work(config: dict[str, str], message: str) -> None:
    with pytest.raises(ClientConfigError) as first:
        gssapi_login(config, NO_ENV)
    with pytest.raises(ClientConfigError) as second:
        librdkafka_settings(config, NO_ENV)
    assert str(first.value) == str(second.value) == message


def test_a_ticket_cache_file_cannot_be_handed_to_librdkafka() -> None:
    config = {**BASE, "sasl.kerberos.service.name": "kafka", "sasl.jaas.config":
              'com.sun.security.auth.module.Krb5LoginModule required useTicketCache=true '
              'ticketCache="/tmp/krb5cc_alice";'}
    assert gssapi_login(config, NO_ENV).ticket_cache == "/tmp/krb5cc_alice"
    with pytest.raises(ClientConfigError, match="librdkafka reads its ticket cache from "
                                                "KRB5CCNAME only"):
        librdkafka_settings(config, NO_ENV)


def test_the_connection_names_the_broker_host() -> None:
    client = GssapiClient("kafka", lambda: pytest.fail("no credentials wanted"))
    assert bind_server_host(client, "broker1.example.com") is client
    assert client.server_host == "broker1.example.com"
    plain = PlainClient("a", "b")
    assert bind_server_host(plain, "broker1") is plain


def test_a_client_without_a_host_says_so() -> None:
    from moldau.security.sasl.errors import SaslMechanismError

    client = GssapiClient("kafka", lambda: pytest.fail("no credentials wanted"))
    with pytest.raises(SaslMechanismError, match="needs the broker's host name"):
        client.initial_response()
