"""The SASL settings of a broker's listeners, resolved at startup: what works, and each
setting Moldau cannot honour stopping startup with a message naming its key."""

from __future__ import annotations

from pathlib import Path

import pytest

from moldau.security.sasl.plain import PlainClient
from moldau.security.sasl.scram import ScramClient
from moldau.server.config import BrokerConfig
from moldau.server.config.errors import ConfigError
from moldau.server.sasl_listeners import inter_broker_sasl, sasl_listeners

PLAIN = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
         'username="admin" password="admin-secret" user_admin="admin-secret";')
SCRAM = ('org.apache.kafka.common.security.scram.ScramLoginModule required '
         'username="broker" password="broker-secret";')


def _config(**extra: str) -> BrokerConfig:
    props = {"zookeeper.connect": "127.0.0.1:2181", "broker.id": "1", "log.dirs": "/tmp/x",
             "listeners": "PLAINTEXT://127.0.0.1:9092,SASL_PLAINTEXT://127.0.0.1:9093",
             "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256",
             "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN,
             "listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config": SCRAM}
    props.update({k.replace("__", "."): v for k, v in extra.items()})
    return BrokerConfig.from_properties({k: v for k, v in props.items() if v != "-"})


def test_a_listener_with_jaas_lines_in_server_properties() -> None:
    listeners = sasl_listeners(_config(), "")
    listener = listeners["SASL_PLAINTEXT"]
    assert listener.mechanisms == ("PLAIN", "SCRAM-SHA-256")
    assert listener.logins["PLAIN"].options["user_admin"] == "admin-secret"
    assert listener.max_receive_size == 524288 and listener.failed_delay_ms == 100
    assert listener.reauth_ms == {"PLAIN": 0, "SCRAM-SHA-256": 0}
    assert "PLAINTEXT" not in listeners


def test_the_jaas_file_of_kafka_opts_with_listener_and_global_sections(tmp_path: Path) -> None:
    jaas = tmp_path / "kafka_server_jaas.conf"
    jaas.write_text(f"""
// the listener's own section wins over KafkaServer
sasl_plaintext.KafkaServer {{
    {PLAIN}
    {SCRAM}
}};
KafkaServer {{
    org.apache.kafka.common.security.plain.PlainLoginModule required user_x="y";
}};
""")
    config = _config(**{"listener.name.sasl_plaintext.plain.sasl.jaas.config": "-",
                        "listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config": "-"})
    listener = sasl_listeners(config, f"-Xmx1g -Djava.security.auth.login.config={jaas}")[
        "SASL_PLAINTEXT"]
    assert listener.logins["PLAIN"].options["user_admin"] == "admin-secret"
    assert listener.logins["SCRAM-SHA-256"].options["username"] == "broker"


def test_reauth_per_listener_and_mechanism() -> None:
    config = _config(**{"connections.max.reauth.ms": "60000",
                        "listener.name.sasl_plaintext.plain.connections.max.reauth.ms": "5000"})
    listener = sasl_listeners(config, "")["SASL_PLAINTEXT"]
    assert listener.reauth_ms == {"PLAIN": 5000, "SCRAM-SHA-256": 60000}


def test_inter_broker_sasl_uses_the_listener_entry_credentials() -> None:
    config = _config(**{"inter.broker.listener.name": "SASL_PLAINTEXT",
                        "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-256"})
    factory = inter_broker_sasl(config, sasl_listeners(config, ""))
    assert factory is not None
    client = factory()
    assert isinstance(client, ScramClient) and client.mechanism == "SCRAM-SHA-256"
    config = _config(**{"inter.broker.listener.name": "SASL_PLAINTEXT",
                        "sasl.mechanism.inter.broker.protocol": "PLAIN"})
    factory = inter_broker_sasl(config, sasl_listeners(config, ""))
    assert factory is not None and isinstance(factory(), PlainClient)
    assert inter_broker_sasl(_config(), sasl_listeners(_config(), "")) is None


@pytest.mark.parametrize("extra,key,fragment", [
    ({"sasl.enabled.mechanisms": "-"},  # Kafka's default, GSSAPI, needs its JAAS entry
     "listener.name.sasl_plaintext.gssapi.sasl.jaas.config", "Could not find a 'KafkaServer'"),
    ({"sasl.enabled.mechanisms": "PLAIN,DIGEST-MD5"}, "sasl.enabled.mechanisms",
     "unknown SASL mechanism DIGEST-MD5"),
    ({"listener.name.sasl_plaintext.plain.sasl.jaas.config": "-"},
     "listener.name.sasl_plaintext.plain.sasl.jaas.config",
     "Could not find a 'KafkaServer' or 'sasl_plaintext.KafkaServer' entry in the JAAS "
     "configuration. System property 'java.security.auth.login.config' is not set"),
    ({"listener.name.sasl_plaintext.plain.sasl.jaas.config":
      'org.apache.kafka.common.security.plain.PlainLoginModule required user_a="b"'},
     "listener.name.sasl_plaintext.plain.sasl.jaas.config", "semi-colon"),
    ({"listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN + " " + PLAIN},
     "listener.name.sasl_plaintext.plain.sasl.jaas.config",
     "JAAS config property contains 2 login modules, should be 1 module"),
    ({"listener.name.sasl_plaintext.plain.sasl.jaas.config":
      "com.sun.security.auth.module.JndiLoginModule required;"},
     "listener.name.sasl_plaintext.plain.sasl.jaas.config", "is not allowed"),
    ({"listener.name.sasl_plaintext.plain.sasl.server.callback.handler.class": "a.B"},
     "listener.name.sasl_plaintext.plain.sasl.server.callback.handler.class",
     "String must be one of"),
])
def test_settings_moldau_cannot_honour_stop_startup(extra: dict[str, str], key: str,
                                                    fragment: str) -> None:
    with pytest.raises(ConfigError) as raised:
        sasl_listeners(_config(**extra), "")
    assert key in str(raised.value)
    assert fragment in str(raised.value)


def test_inter_broker_mechanism_must_be_enabled_and_have_credentials() -> None:
    config = _config(**{"inter.broker.listener.name": "SASL_PLAINTEXT"})  # GSSAPI default
    with pytest.raises(ConfigError, match=r"sasl\.mechanism\.inter\.broker\.protocol"):
        inter_broker_sasl(config, sasl_listeners(config, ""))
    config = _config(**{"inter.broker.listener.name": "SASL_PLAINTEXT",
                        "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-256",
                        "listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config":
                        "org.apache.kafka.common.security.scram.ScramLoginModule required;"})
    with pytest.raises(ConfigError, match="username and password"):
        inter_broker_sasl(config, sasl_listeners(config, ""))


def test_a_missing_jaas_file_names_it(tmp_path: Path) -> None:
    config = _config(**{"listener.name.sasl_plaintext.plain.sasl.jaas.config": "-"})
    with pytest.raises(ConfigError, match="does not load"):
        sasl_listeners(config, f"-Djava.security.auth.login.config={tmp_path}/none.conf")
