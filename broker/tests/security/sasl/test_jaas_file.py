"""JAAS login configuration files as the JDK's ConfigFile reads them (sections, comments,
double-quoted values, `${prop}` expansion, its error texts with line numbers), the
KAFKA_OPTS system properties that name them, Kafka's choice of section, the login
modules Kafka refuses and the options its login modules read."""

from __future__ import annotations

import contextlib
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis_budget import examples

from moldau.security.sasl.jaas import (
    DIGEST_LOGIN_MODULE,
    DISALLOWED_LOGIN_MODULES,
    KRB5_LOGIN_MODULE,
    PLAIN_LOGIN_MODULE,
    SCRAM_LOGIN_MODULE,
    JaasEntry,
    JaasError,
    check_login_modules,
    client_credentials,
    disallowed_login_modules,
    expand_properties,
    find_context,
    jaas_file_from_kafka_opts,
    load_jaas_file,
    parse_jaas_file,
    plain_users,
    quote_jaas_value,
    system_properties_from_kafka_opts,
)

KAFKA_SERVER_JAAS = """\
// The broker's JAAS file, as in Kafka's security documentation.
KafkaServer {
    org.apache.kafka.common.security.plain.PlainLoginModule required
    username="admin"
    password="admin-secret"
    user_admin="admin-secret"
    user_alice="alice-secret";

    org.apache.kafka.common.security.scram.ScramLoginModule required;
};

/* One listener has its own section:
   the broker prefers it for that listener. */
sasl_ssl.KafkaServer {
    com.sun.security.auth.module.Krb5LoginModule required
    useKeyTab=true
    storeKey=true
    keyTab="/etc/security/keytabs/kafka_server.keytab"
    principal="kafka/kafka1.hostname.com@EXAMPLE.COM";
};

Client {
   org.apache.zookeeper.server.auth.DigestLoginModule required
   username="kafka"
   password="kafka-secret";
};
"""


def test_kafka_documentation_file() -> None:
    sections = parse_jaas_file(KAFKA_SERVER_JAAS)
    assert list(sections) == ["KafkaServer", "sasl_ssl.KafkaServer", "Client"]
    plain, scram = sections["KafkaServer"]
    assert plain == JaasEntry(PLAIN_LOGIN_MODULE, "required", {
        "username": "admin", "password": "admin-secret", "user_admin": "admin-secret",
        "user_alice": "alice-secret"})
    assert scram == JaasEntry(SCRAM_LOGIN_MODULE, "required", {})
    [krb5] = sections["sasl_ssl.KafkaServer"]
    assert krb5.login_module == KRB5_LOGIN_MODULE
    assert krb5.options["principal"] == "kafka/kafka1.hostname.com@EXAMPLE.COM"
    assert krb5.options["useKeyTab"] == "true"
    assert sections["Client"] == [JaasEntry(DIGEST_LOGIN_MODULE, "required",
                                            {"username": "kafka", "password": "kafka-secret"})]


@pytest.mark.parametrize("text, sections", [
    ("", {}),
    ("// nothing\n/* at all */\n", {}),
    ("Empty { };", {"Empty": []}),
    ('"Quoted Name" { m OPTIONAL; };', {"Quoted Name": [JaasEntry("m", "optional", {})]}),
    ("A{m required k=\"v\";};B{n sufficient;};",
     {"A": [JaasEntry("m", "required", {"k": "v"})], "B": [JaasEntry("n", "sufficient", {})]}),
    ('A { m required k="a\\"b\\\\c" k2=x_y$z-1.2*; };',
     {"A": [JaasEntry("m", "required", {"k": 'a"b\\c', "k2": "x_y$z-1.2*"})]}),
    ('A { m required k="v" k="w"; };', {"A": [JaasEntry("m", "required", {"k": "w"})]}),
    ('A { m required k=""; };', {"A": [JaasEntry("m", "required", {"k": ""})]}),
    ('A { m required\r\n k="v";\r\n };\r\n', {"A": [JaasEntry("m", "required", {"k": "v"})]}),
])
def test_files(text: str, sections: dict[str, list[JaasEntry]]) -> None:
    assert parse_jaas_file(text) == sections


@pytest.mark.parametrize("text, error", [
    ("A { m required k=1; };", "Line 1: expected [option value], found [1]"),
    ("A { m required k='v'; };", "Line 1: expected [option value], found [v]"),
    ("A { m required k=\"v\" }; ", "Line 1: expected [option key]"),
    ("A { m required\n  k\n  \"v\"; };", "Line 3: expected [=], found [v]"),
    ("\n\nA {\n m required k=\"v\";\n };\n B { m; };",
     "Line 6: expected [controlFlag]"),
    ("A { m bogus; };", "Invalid control flag, BOGUS"),
    ("A { m required; }; A { n required; };", "Can not specify multiple entries for A"),
    ("A { m required; }", "expected [;], read [end of file]"),
    ("A { m required;", "expected [module class name], read [end of file]"),
    ("A", "expected [{], read [end of file]"),
    ("A m required; };", "Line 1: expected [{], found [m]"),
    ("{ m required; };", "Line 1: expected [application name], found [{]"),
    ("A { ; };", "Line 1: expected [module class name]"),
    ("A { m required k; };", "Line 1: expected [=]"),
    ("A { m required k=\"${missing}\"; };", "Line 1: unable to expand property missing"),
    ("A { m required\n k=\"${empty}\"; };", "Line 2: system property [${empty}] expanded "
                                            "to empty value"),
])
def test_errors_are_the_jdks_and_name_the_line(text: str, error: str) -> None:
    with pytest.raises(JaasError) as failure:
        parse_jaas_file(text, {"empty": ""})
    assert str(failure.value) == f"Configuration Error:\n\t{error}"


def test_property_expansion() -> None:
    text = 'A { m required keyTab="${kafka.home}${/}kafka.keytab" x="${{literal}}"; };'
    [entry] = parse_jaas_file(text, {"kafka.home": "/opt/kafka"})["A"]
    assert entry.options == {"keyTab": "/opt/kafka/kafka.keytab", "x": "${{literal}}"}


@pytest.mark.parametrize("value, expanded", [
    ("plain", "plain"),
    ("${a}", "1"),
    ("x${a}y${b}z", "x1y2z"),
    ("${/}", "/"),
    ("${a", "${a"),
    ("x${{a}}y${a}", "x${{a}}y1"),
    ("${{a", "${{a"),
    ("$a {a}", "$a {a}"),
])
def test_expand_properties(value: str, expanded: str) -> None:
    assert expand_properties(value, {"a": "1", "b": "2"}) == expanded


def test_block_comments_keep_line_numbers() -> None:
    with pytest.raises(JaasError, match="Line 4: expected"):
        parse_jaas_file("/* one\ntwo\nthree */\nA { m required k=5; };")


def test_load_jaas_file(tmp_path: Path) -> None:
    path = tmp_path / "kafka_server_jaas.conf"
    path.write_text(KAFKA_SERVER_JAAS, encoding="utf-8")
    assert list(load_jaas_file(str(path))) == ["KafkaServer", "sasl_ssl.KafkaServer", "Client"]
    path.write_text("A { m required k=1; };", encoding="utf-8")
    with pytest.raises(JaasError, match=f"^{path}: Configuration Error:\n\tLine 1"):
        load_jaas_file(str(path))
    with pytest.raises(JaasError, match="Cannot read the JAAS configuration file"):
        load_jaas_file(str(tmp_path / "missing.conf"))


@settings(max_examples=examples(100))
@given(value=st.text(st.characters(codec="utf-8"), max_size=30).filter(
    lambda v: "${" not in v))
def test_quoted_values_read_back_from_a_file(value: str) -> None:
    sections = parse_jaas_file(f"A {{ m required k={quote_jaas_value(value)}; }};")
    assert sections["A"][0].options == {"k": value}


@settings(max_examples=examples(200))
@given(text=st.text(st.sampled_from("ab1 ;=\"'\\/*\n{}.-$"), max_size=30))
def test_any_file_parses_or_raises_jaas_error(text: str) -> None:
    with contextlib.suppress(JaasError):
        parse_jaas_file(text)


# -- KAFKA_OPTS -------------------------------------------------------------------------


@pytest.mark.parametrize("opts, path", [
    ("", None),
    ("-Xmx1G -Xms1G", None),
    ("-Djava.security.auth.login.config=/etc/kafka/kafka_server_jaas.conf",
     "/etc/kafka/kafka_server_jaas.conf"),
    ("-Xmx1G  -Djava.security.auth.login.config=/a.conf -Dzookeeper.sasl.client=false",
     "/a.conf"),
    ('"-Djava.security.auth.login.config=/my dir/jaas.conf"', "/my dir/jaas.conf"),
    ("-Djava.security.auth.login.config='/my dir/jaas.conf'", "/my dir/jaas.conf"),
    ('-Djava.security.auth.login.config="/x.conf"', "/x.conf"),
    ("-Djava.security.auth.login.config==/only.conf", "/only.conf"),
    ("-Djava.security.auth.login.config=file:/etc/kafka/jaas.conf", "/etc/kafka/jaas.conf"),
    ("-Djava.security.auth.login.config=file:///etc/my%20jaas.conf", "/etc/my jaas.conf"),
    ("-Djava.security.auth.login.config=/a -Djava.security.auth.login.config=/b", "/b"),
    ("-Djava.security.auth.login.config=", None),
    ("-Djava.security.auth.login.config.extra=/a", None),
])
def test_jaas_file_from_kafka_opts(opts: str, path: str | None) -> None:
    assert jaas_file_from_kafka_opts(opts) == path


def test_system_properties_from_kafka_opts() -> None:
    opts = ("-server -Xmx1G -Djava.security.krb5.conf=/etc/krb5.conf "
            "-Dzookeeper.sasl.client -Dzookeeper.sasl.clientconfig=ZkClient "
            "-Dweird=a=b '-Dquoted=x y' -Dlast=1 -Dlast=2 -D -Xss1m")
    assert system_properties_from_kafka_opts(opts) == {
        "java.security.krb5.conf": "/etc/krb5.conf", "zookeeper.sasl.client": "",
        "zookeeper.sasl.clientconfig": "ZkClient", "weird": "a=b", "quoted": "x y",
        "last": "2"}


def test_unbalanced_quotes_in_kafka_opts() -> None:
    with pytest.raises(JaasError, match="KAFKA_OPTS"):
        jaas_file_from_kafka_opts('-Djava.security.auth.login.config="/a.conf')


# -- Kafka's choice of section, refused modules, options ----------------------------------


def test_find_context_prefers_the_listener_section() -> None:
    sections = parse_jaas_file(KAFKA_SERVER_JAAS)
    name, entries = find_context(sections, "KafkaServer", "SASL_SSL")
    assert name == "sasl_ssl.KafkaServer" and entries[0].login_module == KRB5_LOGIN_MODULE
    name, entries = find_context(sections, "KafkaServer", "SASL_PLAINTEXT")
    assert name == "KafkaServer" and len(entries) == 2
    assert find_context(sections, "Client")[0] == "Client"


def test_find_context_errors_are_kafkas() -> None:
    with pytest.raises(JaasError) as failure:
        find_context({}, "KafkaServer", "INTERNAL", "/etc/kafka/jaas.conf")
    assert str(failure.value) == (
        "Could not find a 'KafkaServer' or 'internal.KafkaServer' entry in the JAAS "
        "configuration. System property 'java.security.auth.login.config' is "
        "/etc/kafka/jaas.conf")
    with pytest.raises(JaasError) as failure:
        find_context({}, "KafkaClient")
    assert str(failure.value) == (
        "Could not find a 'KafkaClient' entry in the JAAS configuration. System property "
        "'java.security.auth.login.config' is not set")


@pytest.mark.parametrize("module", DISALLOWED_LOGIN_MODULES)
def test_disallowed_login_modules_are_refused(module: str) -> None:
    entries = [JaasEntry(PLAIN_LOGIN_MODULE, "required", {}),
               JaasEntry(f" {module} ", "required", {})]
    with pytest.raises(JaasError) as failure:
        check_login_modules(entries)
    assert str(failure.value) == (
        f"{module} is not allowed. Update System property "
        f"'org.apache.kafka.disallowed.login.modules' to allow {module}")


def test_disallowed_list_from_system_properties() -> None:
    assert disallowed_login_modules({}) == DISALLOWED_LOGIN_MODULES
    custom = disallowed_login_modules(
        {"org.apache.kafka.disallowed.login.modules": " a.B , c.D"})
    assert custom == ("a.B", "c.D")
    check_login_modules([JaasEntry("com.sun.security.auth.module.JndiLoginModule",
                                   "required", {})], custom)
    with pytest.raises(JaasError, match=r"c\.D is not allowed"):
        check_login_modules([JaasEntry("c.D", "required", {})], custom)


def test_plain_users_and_client_credentials() -> None:
    [plain, scram] = parse_jaas_file(KAFKA_SERVER_JAAS)["KafkaServer"]
    assert plain_users(plain) == {"admin": "admin-secret", "alice": "alice-secret"}
    assert client_credentials(plain) == ("admin", "admin-secret")
    assert plain_users(scram) == {}
    assert client_credentials(scram) is None
    assert client_credentials(JaasEntry("m", "required", {"username": "u"})) is None
