"""`control.plane.listener.name`: Kafka's validation and messages, checked before anything
starts, and the listener and client security the controller uses towards the brokers."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from tls_material import make_tls_material

from moldau.server.config import BrokerConfig, ConfigError
from moldau.server.listener_security import ListenerSecurity

KEY = "control.plane.listener.name"
BASE = ("zookeeper.connect=localhost:2181\n"
        "listeners=INTERNAL://:9092,CONTROL://:9093,EXTERNAL://:9094\n"
        "listener.security.protocol.map=INTERNAL:PLAINTEXT,CONTROL:SSL,EXTERNAL:SSL\n"
        "inter.broker.listener.name=INTERNAL\n")


def load(text: str) -> BrokerConfig:
    return BrokerConfig.from_properties(BASE + text)


def test_unset_the_controller_uses_the_inter_broker_listener() -> None:
    config = load("")
    assert config.control_plane_listener_name is None
    assert config.controller_listener_name == "INTERNAL"
    assert not config.warnings  # a known key now, where it was "isn't a known config"


def test_set_the_controller_uses_it_and_its_name_is_normalised() -> None:
    config = load(f"{KEY}=control\n")
    assert config.control_plane_listener_name == "CONTROL"
    assert config.controller_listener_name == "CONTROL"
    assert config.inter_broker_listener_name == "INTERNAL"  # replication stays there
    assert not config.warnings


@pytest.mark.parametrize(("text", "message"), [
    (f"{KEY}=ADMIN\n",
     "Invalid value ADMIN for configuration control.plane.listener.name: Listener with ADMIN "
     "defined in control.plane.listener.name not found in listener.security.protocol.map."),
    # in the map, not a listener (advertised.listeners defaults to listeners)
    ("listener.security.protocol.map=INTERNAL:PLAINTEXT,CONTROL:SSL,EXTERNAL:SSL,ADMIN:SSL\n"
     f"{KEY}=admin\n",
     "Invalid value admin for configuration control.plane.listener.name: "
     "control.plane.listener.name must be a listener name defined in advertised.listeners. "
     "The valid options based on currently configured listeners are INTERNAL,CONTROL,EXTERNAL"),
    # a listener, not advertised
    ("advertised.listeners=INTERNAL://b1:9092,EXTERNAL://b1.example.com:9094\n"
     f"{KEY}=CONTROL\n",
     "Invalid value CONTROL for configuration control.plane.listener.name: "
     "control.plane.listener.name must be a listener name defined in advertised.listeners. "
     "The valid options based on currently configured listeners are INTERNAL,EXTERNAL"),
    (f"{KEY}=internal\n",
     "Invalid value internal for configuration control.plane.listener.name: "
     "control.plane.listener.name, when defined, should have a different value from the "
     "inter broker listener name. Currently they both have the value INTERNAL"),
    (f"{KEY}=\n",
     "Invalid value  for configuration control.plane.listener.name: Listener with  defined "
     "in control.plane.listener.name not found in listener.security.protocol.map."),
])
def test_kafka_rules_and_messages(text: str, message: str) -> None:
    with pytest.raises(ConfigError) as info:
        load(text)
    assert info.value.key == KEY
    assert str(info.value) == message


def test_the_inter_broker_listener_by_protocol_counts_too() -> None:
    """security.inter.broker.protocol names the inter-broker listener as well."""
    with pytest.raises(ConfigError, match="Currently they both have the value SSL"):
        BrokerConfig.from_properties("zookeeper.connect=localhost:2181\n"
                                     "listeners=PLAINTEXT://:9092,SSL://:9093\n"
                                     "security.inter.broker.protocol=SSL\n"
                                     f"{KEY}=SSL\n")


def test_a_bad_value_stops_the_broker_before_it_starts(tmp_path: Path) -> None:
    """The process exits at once naming the key: no ZooKeeper connection, no listener."""
    path = tmp_path / "server.properties"
    path.write_text(BASE + f"log.dirs={tmp_path / 'data'}\n{KEY}=INTERNAL\n",
                    encoding="latin-1")
    done = subprocess.run([sys.executable, "-m", "moldau.server.main", str(path)],
                          capture_output=True, text=True, timeout=60,
                          env={"LOG_DIR": str(tmp_path / "logs"), "PATH": "/usr/bin:/bin"})
    assert done.returncode == 1
    assert ("control.plane.listener.name, when defined, should have a different value from "
            "the inter broker listener name") in done.stderr
    assert not (tmp_path / "data").exists()  # nothing was started


def test_controller_client_security_is_the_control_plane_listeners(tmp_path: Path) -> None:
    """The controller connects with the control-plane listener's protocol (its TLS
    context from that listener's ssl.* keys); everything else keeps the inter-broker
    listener's."""
    tls = make_tls_material(tmp_path)
    own = "".join(f"listener.name.control.{k}={v}\n"
                  for k, v in tls.server_settings("PEM", "required").items())
    config = load(f"{KEY}=CONTROL\n" + own)
    security = ListenerSecurity(config, "")
    controller = security.controller_client()
    assert (controller.protocol, controller.sasl) == ("SSL", None)
    assert controller.ssl_context is not None
    inter_broker = security.inter_broker_client()
    assert (inter_broker.protocol, inter_broker.ssl_context) == ("PLAINTEXT", None)
    unset = ListenerSecurity(load(""), "").controller_client()
    assert (unset.protocol, unset.ssl_context) == ("PLAINTEXT", None)


def test_a_sasl_control_plane_uses_its_own_jaas_entry_and_the_inter_broker_mechanism() -> None:
    """Kafka's controller channel: sasl.mechanism.inter.broker.protocol on the
    control-plane listener, with that listener's JAAS entry (username and password)."""
    from moldau.security.sasl.plain import PlainClient

    config = BrokerConfig.from_properties({
        "zookeeper.connect": "localhost:2181",
        "listeners": "INTERNAL://:9092,CONTROL://:9093",
        "listener.security.protocol.map": "INTERNAL:PLAINTEXT,CONTROL:SASL_PLAINTEXT",
        "inter.broker.listener.name": "INTERNAL", KEY: "CONTROL",
        "sasl.enabled.mechanisms": "PLAIN", "sasl.mechanism.inter.broker.protocol": "PLAIN",
        "listener.name.control.plain.sasl.jaas.config":
            'org.apache.kafka.common.security.plain.PlainLoginModule required '
            'username="ctl" password="ctl-secret" user_ctl="ctl-secret";'})
    security = ListenerSecurity(config, "")
    controller = security.controller_client()
    assert (controller.protocol, controller.sasl_mechanism) == ("SASL_PLAINTEXT", "PLAIN")
    assert controller.sasl is not None and isinstance(controller.sasl(), PlainClient)
    assert security.inter_broker_client().sasl is None  # INTERNAL is PLAINTEXT


def test_the_channel_leaves_out_a_broker_without_the_listener_and_says_so_once(
        caplog: pytest.LogCaptureFixture) -> None:
    """A registration without a CONTROL endpoint is not reachable, so not live; the error
    names the listener and comes once per registration, not at every broker change."""
    from moldau.cluster.zk_data import BrokerRegistration, EndPoint
    from moldau.replication.protocol_versions import versions_for
    from moldau.server.controller_channel import NetworkControllerChannel

    config = load(f"{KEY}=CONTROL\nbroker.id=1\n")
    # no partition states or metadata: no request goes anywhere here
    security = ListenerSecurity(config, "").controller_client
    channel = NetworkControllerChannel(1, config, versions_for("3.9"), security, None, None,
                                       lambda: None)
    own = BrokerRegistration(1, [EndPoint("INTERNAL", "h1", 9092, "PLAINTEXT"),
                                 EndPoint("CONTROL", "h1", 9093, "SSL")], epoch=10)
    stray = BrokerRegistration(4, [EndPoint("INTERNAL", "h4", 9092, "PLAINTEXT")], epoch=11)
    with caplog.at_level("ERROR", logger="kafka.controller.ControllerChannelManager"):
        assert channel.set_live_brokers([own, stray]) == [own]
        assert channel.set_live_brokers([own, stray]) == [own]
    errors = [r.getMessage() for r in caplog.records]
    assert len(errors) == 1, errors
    assert ("End point with listener name CONTROL not found for broker 4 (it registered "
            "INTERNAL)") in errors[0]
    # registered again (a new session): said again
    stray.epoch = 12
    with caplog.at_level("ERROR", logger="kafka.controller.ControllerChannelManager"):
        assert channel.set_live_brokers([own, stray]) == [own]
    assert len(caplog.records) == 2


def test_a_sasl_control_plane_without_the_mechanism_stops_startup() -> None:
    """Stricter than Kafka, which starts and fails each controller connection instead."""
    from moldau.server.startup_error import StartupError

    config = BrokerConfig.from_properties({
        "zookeeper.connect": "localhost:2181",
        "listeners": "INTERNAL://:9092,CONTROL://:9093",
        "listener.security.protocol.map": "INTERNAL:PLAINTEXT,CONTROL:SASL_PLAINTEXT",
        "inter.broker.listener.name": "INTERNAL", KEY: "CONTROL",
        "sasl.enabled.mechanisms": "PLAIN", "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-256",
        "listener.name.control.plain.sasl.jaas.config":
            'org.apache.kafka.common.security.plain.PlainLoginModule required user_a="b";'})
    with pytest.raises(StartupError) as info:
        ListenerSecurity(config, "")
    assert ("sasl.mechanism.inter.broker.protocol must be included in sasl.enabled.mechanisms"
            in str(info.value))
    assert "listener CONTROL enables PLAIN" in str(info.value)
