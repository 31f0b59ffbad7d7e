"""The preflight's checks of GSSAPI and OAUTHBEARER listeners (roles/preflight): an
inventory that names a realm and a keytab source, and OAUTHBEARER settings that Kafka
takes, passes to the next play; each incomplete one stops in preflight, naming the
variable. The hosts do not exist (see test_inventory_validation.py)."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
from test_enable_authorizer import render_server_properties
from test_inventory_validation import VALID, run_site

KERBEROS = {"kerberos_realm": "EXAMPLE.TEST", "kerberos_kdc_host": "nohost-zk1"}


def inventory(listeners: dict[str, Any], **settings: Any) -> dict[str, Any]:
    inv = copy.deepcopy(VALID)
    inv["all"]["vars"]["broker_listeners"] = listeners
    inv["all"]["vars"].update(settings)
    return inv


PLAINTEXT = {"port": 9092, "protocol": "PLAINTEXT"}


def sasl(*mechanisms: str, port: int = 9094, **more: Any) -> dict[str, Any]:
    return {"port": port, "protocol": "SASL_PLAINTEXT", "mechanisms": list(mechanisms), **more}


GSSAPI_INTER = {"KERBEROS": {"port": 9094, "protocol": "SASL_PLAINTEXT", "mechanisms": ["GSSAPI"]}}
OAUTH_SIGNED = {"port": 9095, "protocol": "SASL_PLAINTEXT", "mechanisms": ["OAUTHBEARER"],
                "oauthbearer": {"jwks_endpoint_url": "https://idp.example.test/keys",
                                "expected_audience": ["kafka"]}}

def per_broker(settings: dict[str, dict[str, Any]], **common: Any) -> dict[str, Any]:
    """VALID with each broker's own settings: the preflight checks every host in the same
    task, so one run shows the refusals of one check for three brokers at once."""
    inv = inventory({"PLAINTEXT": PLAINTEXT}, **common)
    for host, own in settings.items():
        inv["all"]["children"]["brokers"]["hosts"][host].update(own)
    return inv


# each case: an inventory, and the messages its run must print (one per broker)
CASES: dict[str, tuple[dict[str, Any], list[str]]] = {
    "mechanisms and oauthbearer settings": (
        per_broker({
            "nohost-b1": {"broker_listeners": {
                "OAUTH": {**OAUTH_SIGNED, "oauthbearer": {"jwks_endpoint_url": "keys.json"}}}},
            "nohost-b2": {"broker_listeners": {
                "SASL": sasl("SCRAM-SHA-512",
                             oauthbearer={"jwks_endpoint_url": "file:/etc/jwks.json"})}},
            "nohost-b3": {"broker_listeners": {"SASL": sasl("SCRAM-SHA-1")}}},
            broker_sasl_admin_password="admin-secret"),
        ["listener OAUTH of nohost-b1: oauthbearer must be a mapping",
         "jwks_endpoint_url a file: or http(s):// URL",
         "listener SASL of nohost-b2: oauthbearer settings belong to a listener with the "
         "OAUTHBEARER mechanism",
         "listener SASL of nohost-b3: unknown mechanisms ['SCRAM-SHA-1']"]),
    "gssapi without a realm": (
        inventory(GSSAPI_INTER, broker_inter_broker_listener="KERBEROS",
                  broker_sasl_inter_broker_mechanism="GSSAPI"),
        ["kerberos_realm"]),
    "gssapi without a keytab source": (
        per_broker({
            "nohost-b1": {},
            "nohost-b2": {"kerberos_kdcs": ["kdc.example.test"],
                          "kerberos_broker_keytab_src": "/nonexistent/kafka.keytab"},
            "nohost-b3": {"kerberos_kdc_host": "kdc9"}},
            broker_listeners={**GSSAPI_INTER, "PLAINTEXT": PLAINTEXT},
            kerberos_realm="EXAMPLE.TEST"),
        ["nohost-b1 has a GSSAPI listener: set kerberos_kdc_host (a lab KDC the kerberos role "
         "runs) or, for an existing realm, kerberos_broker_keytab_src (this broker's keytab on "
         "the control node) and kerberos_kdcs",
         "nohost-b2 has a GSSAPI listener: kerberos_broker_keytab_src "
         "/nonexistent/kafka.keytab is not a file on the control node",
         "nohost-b3 has a GSSAPI listener: kerberos_kdc_host 'kdc9' is not a host of the "
         "inventory"]),
    "signed oauthbearer between brokers": (
        inventory({"OAUTH": OAUTH_SIGNED}, broker_inter_broker_listener="OAUTH",
                  broker_sasl_inter_broker_mechanism="OAUTHBEARER"),
        ["log in to each other with unsecured tokens only"]),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_incomplete_sasl_settings_stop_in_preflight(tmp_path: Path, case: str) -> None:
    inv, messages = CASES[case]
    result = run_site(tmp_path, inv)
    out = result.stdout + result.stderr
    assert result.returncode != 0, out
    flat = " ".join(out.split())
    for message in messages:
        assert message in flat, out
    assert "PLAY [OS tuning]" not in out, "the play went past the inventory check:\n" + out


def test_gssapi_between_brokers_and_oauthbearer_pass(tmp_path: Path) -> None:
    # GSSAPI needs no inter-broker or admin password; an unsecured OAUTHBEARER listener
    # beside a signed one
    inv = inventory({**GSSAPI_INTER, "OAUTH": OAUTH_SIGNED,
                     "DEV": sasl("OAUTHBEARER", port=9096)},
                    broker_inter_broker_listener="KERBEROS",
                    broker_sasl_inter_broker_mechanism="GSSAPI", **KERBEROS)
    out = run_site(tmp_path, inv).stdout
    assert "PLAY [OS tuning]" in out, out


def test_server_properties_carries_gssapi_and_oauthbearer_as_kafka_operators_write_them() -> None:
    kerberos = {"KERBEROS": {"port": 9094, "protocol": "SASL_PLAINTEXT", "mechanisms": ["GSSAPI"]}}
    oauth = {"OAUTH": OAUTH_SIGNED}
    listeners = [{"key": name, "value": value} for name, value in {**kerberos, **oauth}.items()]
    text = render_server_properties(
        broker_listeners={**kerberos, **oauth}, broker_inter_broker_listener="KERBEROS",
        broker_sasl_listeners=listeners, broker_kerberos_listeners=listeners[:1],
        broker_sasl_between_brokers=True, broker_sasl_inter_broker_mechanism="GSSAPI",
        broker_sasl_inter_broker_username="broker", broker_sasl_inter_broker_password="",
        broker_sasl_plain_users=[], broker_kerberos_host="b1.example.test",
        broker_kerberos_keytab="/etc/moldau/kafka.keytab",
        broker_kerberos_principal="kafka/b1.example.test@EXAMPLE.TEST",
        broker_kerberos_service_name="kafka",
        broker_kerberos_principal_to_local_rules=["RULE:[2:$1](kafka)s/.*/kafka/", "DEFAULT"])
    lines = text.splitlines()
    assert ("advertised.listeners=KERBEROS://b1.example.test:9094,OAUTH://10.0.0.1:9095"
            in lines)
    assert ("listener.name.kerberos.gssapi.sasl.jaas.config=com.sun.security.auth.module."
            "Krb5LoginModule required useKeyTab=true storeKey=true "
            'keyTab="/etc/moldau/kafka.keytab" principal="kafka/b1.example.test@EXAMPLE.TEST";'
            in lines)
    assert "sasl.mechanism.inter.broker.protocol=GSSAPI" in lines
    assert "sasl.kerberos.service.name=kafka" in lines
    assert "sasl.kerberos.principal.to.local.rules=RULE:[2:$1](kafka)s/.*/kafka/,DEFAULT" in lines
    assert ("listener.name.oauth.oauthbearer.sasl.jaas.config=org.apache.kafka.common."
            "security.oauthbearer.OAuthBearerLoginModule required;" in lines)
    assert ("listener.name.oauth.oauthbearer.sasl.server.callback.handler.class=org.apache."
            "kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler" in lines)
    assert ("listener.name.oauth.sasl.oauthbearer.jwks.endpoint.url="
            "https://idp.example.test/keys" in lines)
    assert "listener.name.oauth.sasl.oauthbearer.expected.audience=kafka" in lines
