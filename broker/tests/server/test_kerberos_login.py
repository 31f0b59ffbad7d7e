"""A GSSAPI listener's settings resolved at startup without a KDC: each Kerberos setting
Moldau cannot serve with stops startup with Kafka's message and the key's name, before any
KDC is asked; and the broker's TGT refresh schedule, Kafka's KerberosLogin arithmetic.
(Logging in against a real KDC: broker/test_gssapi.py.)"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from moldau.security.kerberos_login import RenewalSettings, next_refresh
from moldau.server.config import BrokerConfig
from moldau.server.config.errors import ConfigError
from moldau.server.kerberos_login import use_krb5_conf
from moldau.server.sasl_listeners import sasl_listeners

JAAS_KEY = "listener.name.sasl_plaintext.gssapi.sasl.jaas.config"


def _jaas(**options: str) -> str:
    fields = " ".join(f'{k}="{v}"' for k, v in options.items())
    return f"com.sun.security.auth.module.Krb5LoginModule required {fields};"


def _config(**extra: str) -> BrokerConfig:
    props = {"zookeeper.connect": "127.0.0.1:2181", "broker.id": "1", "log.dirs": "/tmp/x",
             "listeners": "PLAINTEXT://127.0.0.1:9092,SASL_PLAINTEXT://127.0.0.1:9093",
             "sasl.enabled.mechanisms": "GSSAPI",
             "sasl.kerberos.service.name": "kafka",
             JAAS_KEY: _jaas(useKeyTab="true", storeKey="true",
                             keyTab="/nonexistent/kafka.keytab",
                             principal="kafka/localhost@EXAMPLE.TEST")}
    props.update(extra)
    return BrokerConfig.from_properties({k: v for k, v in props.items() if v != "-"})


@pytest.mark.parametrize("extra,key,fragment", [
    ({JAAS_KEY: _jaas(useTicketCache="true")}, JAAS_KEY,
     "Krb5LoginModule needs useKeyTab=true (with keyTab and principal)"),
    ({JAAS_KEY: _jaas(useKeyTab="true", principal="kafka/h@R")}, JAAS_KEY,
     "Krb5LoginModule with useKeyTab=true needs keyTab"),
    ({"sasl.kerberos.service.name": "-"}, "sasl.kerberos.service.name",
     "No serviceName defined in either JAAS or Kafka config"),
    ({JAAS_KEY: _jaas(useKeyTab="true", keyTab="/k", principal="kafka/h@R",
                      serviceName="other")}, "sasl.kerberos.service.name",
     "Conflicting serviceName values found in JAAS and Kafka configs value in JAAS file "
     "other, value in Kafka config kafka"),
    ({"sasl.kerberos.principal.to.local.rules": "RULE:[1:$1]/LU"},
     "sasl.kerberos.principal.to.local.rules", "Invalid rule: `RULE:[1:$1]/LU`, unmatched "
     "substring: `U`"),
    ({}, JAAS_KEY, "Could not login: keyTab /nonexistent/kafka.keytab of principal "
                   "kafka/localhost@EXAMPLE.TEST is not a readable file"),
    ({"listener.name.sasl_plaintext.gssapi.sasl.server.callback.handler.class": "a.B"},
     "listener.name.sasl_plaintext.gssapi.sasl.server.callback.handler.class", ""),
])
def test_kerberos_settings_moldau_cannot_serve_with_stop_startup(
        extra: dict[str, str], key: str, fragment: str) -> None:
    with pytest.raises(ConfigError) as raised:
        sasl_listeners(_config(**extra), "")
    assert raised.value.key == key, raised.value
    assert fragment in str(raised.value)


def test_a_keytab_without_the_principal_stops_startup(tmp_path: Path) -> None:
    keytab = tmp_path / "empty.keytab"
    keytab.write_bytes(b"\x05\x02")  # a keytab file with no entries
    config = _config(**{JAAS_KEY: _jaas(useKeyTab="true", keyTab=str(keytab),
                                        principal="kafka/localhost@EXAMPLE.TEST")})
    with pytest.raises(ConfigError, match=f"Could not login: no key for "
                                          f"kafka/localhost@EXAMPLE.TEST in keytab {keytab}"):
        sasl_listeners(config, "")


SETTINGS = RenewalSettings(window_factor=0.8, jitter=0.05, min_relogin_s=60)


def test_refresh_at_the_window_factor_plus_jitter() -> None:
    # a 10 h ticket from t=0: at 80% .. 85% of its life
    assert next_refresh(0, 36000, 1, SETTINGS, draw=lambda: 0.0) == 28800
    assert next_refresh(0, 36000, 1, SETTINGS, draw=lambda: 1.0) == pytest.approx(30600)


def test_refresh_no_sooner_than_the_minimum_unless_the_ticket_ends_first() -> None:
    # a 100 s ticket: 80 s is sooner than now + 60 s, so it waits for the minimum ...
    assert next_refresh(0, 100, 30, SETTINGS, draw=lambda: 0.0) == 90
    # ... unless the ticket would expire before that: refresh now
    assert next_refresh(0, 100, 50, SETTINGS, draw=lambda: 0.0) == 50
    # a window factor past the end of the ticket: now
    late = RenewalSettings(window_factor=1.2, jitter=0, min_relogin_s=0)
    assert next_refresh(0, 100, 10, late) == 10


def test_java_security_krb5_conf_names_the_kerberos_configuration(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KRB5_CONFIG", raising=False)
    use_krb5_conf({})
    assert "KRB5_CONFIG" not in os.environ
    krb5_conf = tmp_path / "krb5.conf"
    krb5_conf.write_text("[libdefaults]\n  default_realm = EXAMPLE.TEST\n")
    use_krb5_conf({"java.security.krb5.conf": str(krb5_conf)})
    assert os.environ["KRB5_CONFIG"] == str(krb5_conf)
    with pytest.raises(ConfigError, match="KAFKA_OPTS: the Kerberos configuration file does "
                                          "not exist"):
        use_krb5_conf({"java.security.krb5.conf": str(tmp_path / "missing.conf")})
