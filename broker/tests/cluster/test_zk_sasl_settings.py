"""Which SASL login to ZooKeeper KAFKA_OPTS selects (Kafka's JaasUtils.isZkSaslEnabled and
ZooKeeper's client), Kafka's refusal of `zookeeper.set.acl` without an identity, the ACL
policy shared by SASL and x509 identities, and the server side of a SASL ensemble. No
ZooKeeper here: tests/cluster/test_zk_sasl.py runs the real thing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from kazoo.handlers.threading import KazooTimeoutError

from moldau.cluster import zk_acls
from moldau.cluster.zk_ensemble import ZkServerSasl, ZooKeeperEnsemble
from moldau.cluster.zk_kerberos import ZkKerberosLogin
from moldau.cluster.zk_sasl import (
    SaslOutcome,
    ZkAuthenticationError,
    ZkSaslConfigError,
    ZkSaslLogin,
    settings_from_environment,
    settings_from_kafka_opts,
    start_admitted,
)
from moldau.security.sasl.jaas import load_jaas_file, plain_users

DIGEST = "org.apache.zookeeper.server.auth.DigestLoginModule"
KRB5 = "com.sun.security.auth.module.Krb5LoginModule"
SECTIONS = f"""
KafkaServer {{
  org.apache.kafka.common.security.plain.PlainLoginModule required
  username="admin" password="admin-secret" user_admin="admin-secret";
}};
Client {{
  {DIGEST} required username="kafka" password="${{zk.password}}";
}};
ZkOther {{
  {DIGEST} required username="other" password="other-secret";
}};
"""


@pytest.fixture
def jaas(tmp_path: Path) -> Path:
    path = tmp_path / "kafka_server_jaas.conf"
    path.write_text(SECTIONS)
    return path


def opts(jaas: Path, *extra: str) -> str:
    return " ".join([f"-Djava.security.auth.login.config={jaas}", "-Dzk.password=kafka-secret",
                     *extra])


def test_the_client_section_logs_in_with_digest_md5(jaas: Path) -> None:
    settings = settings_from_kafka_opts(opts(jaas))
    assert settings.login == ZkSaslLogin("kafka", "kafka-secret", "Client", str(jaas))
    assert settings.login.kazoo_options() == {"mechanism": "DIGEST-MD5", "username": "kafka",
                                              "password": "kafka-secret"}
    assert "kafka-secret" not in repr(settings.login)
    assert "kafka-secret" not in settings.login.describe()


def test_zookeeper_sasl_clientconfig_names_another_section(jaas: Path) -> None:
    login = settings_from_kafka_opts(opts(jaas, "-Dzookeeper.sasl.clientconfig=ZkOther")).login
    assert login is not None and (login.username, login.context) == ("other", "ZkOther")


@pytest.mark.parametrize("kafka_opts", ["", "-Xmx1G -Dfoo=bar"])
def test_no_jaas_file_means_no_sasl(kafka_opts: str) -> None:
    assert settings_from_kafka_opts(kafka_opts).login is None


def test_a_jaas_file_without_the_section_means_no_sasl(tmp_path: Path) -> None:
    path = tmp_path / "jaas.conf"
    path.write_text("KafkaClient { org.apache.kafka.common.security.plain.PlainLoginModule "
                    'required username="a" password="b"; };')
    assert settings_from_kafka_opts(f"-Djava.security.auth.login.config={path}").login is None
    missing = settings_from_kafka_opts(opts(path, "-Dzookeeper.sasl.clientconfig=Nope"))
    assert missing.login is None


def test_sasl_client_false_beside_the_section_is_kafkas_error(jaas: Path) -> None:
    with pytest.raises(ZkSaslConfigError) as caught:
        settings_from_kafka_opts(opts(jaas, "-Dzookeeper.sasl.client=false"))
    message = str(caught.value)
    assert message.startswith("Exception while determining if ZooKeeper is secure [")
    assert f"java.security.auth.login.config={jaas}" in message
    assert "zookeeper.sasl.client=false" in message
    assert "zookeeper.sasl.clientconfig=default:Client" in message


def test_sasl_client_false_turns_sasl_off_for_zookeepers_own_client(jaas: Path) -> None:
    settings = settings_from_kafka_opts(opts(jaas, "-Dzookeeper.sasl.client=false"),
                                        zookeeper_client_rules=True)
    assert settings.login is None


def test_sasl_client_false_without_the_section_is_fine(tmp_path: Path) -> None:
    path = tmp_path / "jaas.conf"
    path.write_text("KafkaServer { org.apache.kafka.common.security.plain.PlainLoginModule "
                    'required user_a="b"; };')
    settings = settings_from_kafka_opts(
        f"-Djava.security.auth.login.config={path} -Dzookeeper.sasl.client=false")
    assert settings.login is None


def test_kerberos_in_the_client_section_names_zookeepers_principal(tmp_path: Path) -> None:
    path = tmp_path / "jaas.conf"
    path.write_text(f'Client {{ {KRB5} required useKeyTab=true keyTab="/etc/kafka.keytab" '
                    'principal="kafka/broker1@EXAMPLE.COM"; };')
    opts = f"-Djava.security.auth.login.config={path}"
    login = settings_from_kafka_opts(opts).login
    assert isinstance(login, ZkKerberosLogin)
    assert (login.principal, login.keytab, login.context) == (
        "kafka/broker1@EXAMPLE.COM", "/etc/kafka.keytab", "Client")
    # ZooKeeper's SaslServerPrincipal: the canonical host name, the client's realm
    assert login.target_principal("127.0.0.1") == "zookeeper/localhost@EXAMPLE.COM"
    assert login.describe() == ("SASL GSSAPI as 'kafka/broker1@EXAMPLE.COM' from keyTab "
                                f"/etc/kafka.keytab (JAAS section 'Client' of {path})")

    renamed = settings_from_kafka_opts(
        f"{opts} -Dzookeeper.sasl.client.username=zk -Dzookeeper.server.realm=ZK.COM "
        "-Dzookeeper.sasl.client.canonicalize.hostname=false").login
    assert isinstance(renamed, ZkKerberosLogin)
    assert renamed.target_principal("127.0.0.1") == "zk/127.0.0.1@ZK.COM"
    whole = settings_from_kafka_opts(f"{opts} -Dzookeeper.server.principal=zoo/zk1.acme@ACME"
                                     ).login
    assert isinstance(whole, ZkKerberosLogin)
    assert whole.target_principal("127.0.0.1") == "zoo/zk1.acme@ACME"


@pytest.mark.parametrize(("options", "words"), [
    ('useTicketCache=true', "Krb5LoginModule needs useKeyTab=true"),
    ('useKeyTab=true principal="kafka/b1@EXAMPLE.COM"', "needs keyTab"),
    ('useKeyTab=true keyTab="/etc/kafka.keytab"', "needs principal"),
])
def test_a_kerberos_section_moldau_cannot_log_in_with_fails_closed(
        tmp_path: Path, options: str, words: str) -> None:
    path = tmp_path / "jaas.conf"
    path.write_text(f"Client {{ {KRB5} required {options}; }};")
    with pytest.raises(ZkSaslConfigError, match=words) as caught:
        settings_from_kafka_opts(f"-Djava.security.auth.login.config={path}")
    assert str(path) in str(caught.value) and "'Client'" in str(caught.value)


@pytest.mark.parametrize(("section", "words"), [
    (f'{DIGEST} required username="kafka";', "both a username and a password"),
    ('com.example.CustomLoginModule required username="a" password="b";',
     "com.example.CustomLoginModule"),
])
def test_a_client_section_moldau_cannot_use_names_the_problem(
        tmp_path: Path, section: str, words: str) -> None:
    path = tmp_path / "jaas.conf"
    path.write_text(f"Client {{ {section} }};")
    with pytest.raises(ZkSaslConfigError, match=words):
        settings_from_kafka_opts(f"-Djava.security.auth.login.config={path}")


def test_kafkas_password_modules_also_give_zookeeper_a_login(tmp_path: Path) -> None:
    # ZooKeeper's client takes any username/password the login leaves in the subject
    path = tmp_path / "jaas.conf"
    path.write_text("Client { org.apache.kafka.common.security.plain.PlainLoginModule "
                    'required username="kafka" password="p"; };')
    login = settings_from_kafka_opts(f"-Djava.security.auth.login.config={path}").login
    assert login is not None and login.username == "kafka"


def test_an_unreadable_jaas_file_is_kafkas_loading_error(tmp_path: Path) -> None:
    missing = tmp_path / "missing.conf"
    with pytest.raises(ZkSaslConfigError, match="Exception while loading Zookeeper JAAS "
                       "login context") as caught:
        settings_from_kafka_opts(f"-Djava.security.auth.login.config={missing}")
    assert str(missing) in str(caught.value)


def test_the_environment_is_read_from_kafka_opts(jaas: Path) -> None:
    login = settings_from_environment({"KAFKA_OPTS": opts(jaas)}).login
    assert login is not None and login.username == "kafka"
    assert settings_from_environment({}).login is None


# -- zookeeper.set.acl --------------------------------------------------------------------


def test_set_acl_needs_a_zookeeper_identity(jaas: Path) -> None:
    with pytest.raises(zk_acls.ZkAclConfigError) as caught:
        zk_acls.check_secure_acls({"zookeeper.set.acl": True}, settings_from_kafka_opts(""))
    assert str(caught.value).startswith(
        "zookeeper.set.acl is true, but ZooKeeper client TLS configuration identifying at "
        "least zookeeper.ssl.client.enable, zookeeper.clientCnxnSocket, and "
        "zookeeper.ssl.keystore.location was not present and the verification of the JAAS "
        "login file failed [java.security.auth.login.config=null, "
        "zookeeper.sasl.client=default:true, zookeeper.sasl.clientconfig=default:Client]")
    zk_acls.check_secure_acls({"zookeeper.set.acl": True}, settings_from_kafka_opts(opts(jaas)))
    zk_acls.check_secure_acls({"zookeeper.set.acl": "true", "zookeeper.ssl.client.enable":
                               "true", "zookeeper.ssl.keystore.location": "/k.p12"})
    zk_acls.check_secure_acls({"zookeeper.set.acl": False})


@pytest.mark.parametrize(("path", "expected"), [
    ("/brokers/ids", {("auth", "", 31), ("world", "anyone", 1)}),
    ("/config/topics/t", {("auth", "", 31), ("world", "anyone", 1)}),
    ("/config/users", {("auth", "", 31)}),
    ("/config/users/alice", {("auth", "", 31)}),
    ("/config/brokers/<default>", {("auth", "", 31)}),
    ("/delegation_token/tokens/t1", {("auth", "", 31)}),
    ("/delegation_token", {("auth", "", 31), ("world", "anyone", 1)}),
    ("/config/usersfoo", {("auth", "", 31), ("world", "anyone", 1)}),
    ("/consumers", {("world", "anyone", 31)}),
])
def test_kafkas_default_acls(path: str, expected: set[tuple[str, str, int]]) -> None:
    assert {(a.id.scheme, a.id.id, a.perms) for a in zk_acls.acls_for(path)} == expected


# -- the server side of a SASL ensemble ---------------------------------------------------


def test_a_sasl_ensemble_writes_zookeepers_settings(tmp_path: Path) -> None:
    sasl = ZkServerSasl({"kafka": 'se"cret', "admin": "a"})
    ensemble = ZooKeeperEnsemble(tmp_path, size=1, sasl=sasl)
    ensemble.write_configs()
    node = ensemble.node_dirs[0]
    cfg = (node / "zoo.cfg").read_text().splitlines()
    assert "authProvider.sasl=org.apache.zookeeper.server.auth.SASLAuthenticationProvider" in cfg
    assert {"enforce.auth.enabled=true", "enforce.auth.schemes=sasl"} <= set(cfg)
    server = load_jaas_file(str(node / "jaas.conf"))["Server"]
    assert [e.login_module for e in server] == [DIGEST]
    assert plain_users(server[0]) == {"kafka": 'se"cret', "admin": "a"}
    assert (node / "jaas.conf").stat().st_mode & 0o777 == 0o600
    assert ensemble._sasl_jvm_flags(node) == [
        f"-Djava.security.auth.login.config={node / 'jaas.conf'}"]
    reloaded = ZooKeeperEnsemble.load(tmp_path)
    assert reloaded.sasl == sasl and reloaded.client_ports == ensemble.client_ports


def test_optional_sasl_does_not_enforce(tmp_path: Path) -> None:
    ensemble = ZooKeeperEnsemble(tmp_path, size=1, sasl=ZkServerSasl({"a": "b"},
                                                                      required=False))
    ensemble.write_configs()
    cfg = (ensemble.node_dirs[0] / "zoo.cfg").read_text()
    assert "authProvider.sasl=" in cfg and "enforce.auth" not in cfg



class _TimedOutStart:
    """kazoo's start() when the SASL exchange fails between its wake-up on CONNECTED and
    its look at the state (`refused`): the client is closed and start() says time-out at
    once. Without `refused`, a plain time-out."""

    def __init__(self, outcome: SaslOutcome, refused: bool) -> None:
        self.outcome = outcome
        self.refused = refused

    def start(self, timeout: float) -> None:
        if self.refused:
            self.outcome.failure = "the server refused the login (wrong user or password?)"
        raise KazooTimeoutError("Connection time-out")


@pytest.mark.parametrize("refused", [True, False])
def test_a_refusal_racing_kazoos_start_is_still_a_refusal(refused: bool) -> None:
    outcome = SaslOutcome()
    zk: Any = _TimedOutStart(outcome, refused)
    expected = ZkAuthenticationError if refused else KazooTimeoutError
    with pytest.raises(expected) as caught:
        start_admitted(zk, "127.0.0.1:2181", ZkSaslLogin("kafka", "x", "Client", "<t>"),
                       outcome, timeout=5)
    if refused:
        assert "wrong user or password" in str(caught.value)
