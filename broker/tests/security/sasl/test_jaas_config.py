"""`sasl.jaas.config` as Kafka's JaasConfig parses it (StreamTokenizer rules: comments,
both quotes and Java's escapes, nearly every printable character in a bare word) with
Kafka's error messages, one-module values, and quoting that reads back unchanged."""

from __future__ import annotations

import contextlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis_budget import examples

from moldau.security.sasl.jaas import (
    KRB5_LOGIN_MODULE,
    OAUTHBEARER_LOGIN_MODULE,
    PLAIN_LOGIN_MODULE,
    SCRAM_LOGIN_MODULE,
    JaasEntry,
    JaasError,
    format_jaas_config,
    parse_jaas_config,
    parse_single_login_module,
    quote_jaas_value,
)


def only(text: str) -> JaasEntry:
    [entry] = parse_jaas_config(text)
    return entry


def test_kafka_documentation_examples() -> None:
    assert only(
        'org.apache.kafka.common.security.plain.PlainLoginModule required '
        'username="admin" password="admin-secret" user_admin="admin-secret" '
        'user_alice="alice-secret";') == JaasEntry(PLAIN_LOGIN_MODULE, "required", {
            "username": "admin", "password": "admin-secret", "user_admin": "admin-secret",
            "user_alice": "alice-secret"})
    assert only(f'{SCRAM_LOGIN_MODULE} required username="alice" password="alice-secret" '
                'tokenauth="true";').options["tokenauth"] == "true"
    krb5 = only(f'{KRB5_LOGIN_MODULE} required\n    useKeyTab=true\n    storeKey=true\n'
                '    keyTab="/etc/security/keytabs/kafka_server.keytab"\n'
                '    principal="kafka/kafka1.hostname.com@EXAMPLE.COM";')
    assert krb5.options == {"useKeyTab": "true", "storeKey": "true",
                            "keyTab": "/etc/security/keytabs/kafka_server.keytab",
                            "principal": "kafka/kafka1.hostname.com@EXAMPLE.COM"}
    assert only(f"{OAUTHBEARER_LOGIN_MODULE} required unsecuredLoginStringClaim_sub=alice;"
                ).options == {"unsecuredLoginStringClaim_sub": "alice"}


@pytest.mark.parametrize("text, options", [
    ("m required k=v;", {"k": "v"}),
    ("m required k = v ;", {"k": "v"}),
    ("m required\tk=v\r\n\tk2=v2;", {"k": "v", "k2": "v2"}),
    ("m required k=a.b-c_d:e@f!g#h$i%j^k&l*m(n)o+p[q]r{s}t|u~v<w>x?y,z`;",
     {"k": "a.b-c_d:e@f!g#h$i%j^k&l*m(n)o+p[q]r{s}t|u~v<w>x?y,z`"}),
    ("m required k=123 k2=-1.5;", {"k": "123", "k2": "-1.5"}),
    ("m required k='single';", {"k": "single"}),
    ("m required k='say \"hi\"';", {"k": 'say "hi"'}),
    ('m required k="it\'s";', {"k": "it's"}),
    ('m required k="a b;c=d/e//f/*g*/";', {"k": "a b;c=d/e//f/*g*/"}),
    (r'm required k="a\"b\\c\'d";', {"k": "a\"b\\c'd"}),
    (r'm required k="\t\n\r\b\f\a\v\q";', {"k": "\t\n\r\b\f\x07\x0bq"}),
    (r'm required k="\101\60\0" k2="\477\1234";', {"k": "A0\x00", "k2": "'7S4"}),
    ('m required k="";', {"k": ""}),
    ("m required k=jörg€;", {"k": "jörg€"}),
    ('"quoted.Module" required k=v;', {"k": "v"}),
    ('m required "quoted key"=v;', {"quoted key": "v"}),
    ("m required k=v k=w;", {"k": "w"}),
    ("m required k=v// a comment ; x=y\n;", {"k": "v"}),
    ("m required /* a\ncomment */ k=v;", {"k": "v"}),
    ("m required k=v /* unterminated ; x=y", None),
    ('m required k="unterminated\n;', {"k": "unterminated"}),
    ('m required k="ends at eof', None),
])
def test_values(text: str, options: dict[str, str] | None) -> None:
    if options is None:
        with pytest.raises(JaasError, match="not terminated by semi-colon"):
            parse_jaas_config(text)
        return
    assert only(text).options == options


def test_slash_starts_a_comment_in_a_bare_value() -> None:
    # keyTab=/etc/... must be quoted: the '/' comments out the rest of the line.
    with pytest.raises(JaasError, match=r"^Value not specified for key 'keyTab' in JAAS config$"):
        parse_jaas_config("m required keyTab=/etc/kafka.keytab;")


@pytest.mark.parametrize("flag", ["required", "REQUIRED", "Requisite", "sufficient",
                                  "OPTIONAL", "'optional'"])
def test_control_flags_are_case_insensitive_and_stored_lower_case(flag: str) -> None:
    assert only(f"m {flag};").control_flag == flag.strip("'").lower()


def test_several_entries() -> None:
    entries = parse_jaas_config("a.A required x=1; b.B optional;\n c.C sufficient y=\"2\";")
    assert [(e.login_module, e.control_flag, dict(e.options)) for e in entries] == [
        ("a.A", "required", {"x": "1"}), ("b.B", "optional", {}),
        ("c.C", "sufficient", {"y": "2"})]


@pytest.mark.parametrize("text, error", [
    ("", "Login module not specified in JAAS config"),
    ("  \n\t ", "Login module not specified in JAAS config"),
    ("// only a comment", "Login module not specified in JAAS config"),
    ("m", "Login module control flag not specified in JAAS config"),
    ("m ;", "Login module control flag is not available in the JAAS config"),
    ("m =", "Login module control flag is not available in the JAAS config"),
    ("m maybe;", "Invalid login module control flag 'maybe' in JAAS config"),
    ("m required k", "Value not specified for key 'k' in JAAS config"),
    ("m required k;", "Value not specified for key 'k' in JAAS config"),
    ("m required k=;", "Value not specified for key 'k' in JAAS config"),
    ("m required k==v;", "Value not specified for key 'k' in JAAS config"),
    ("m required k=", "Value not specified for key 'k' in JAAS config"),
    ("m required k v;", "Value not specified for key 'k' in JAAS config"),
    ("m required =v;", "Value not specified for key 'null' in JAAS config"),
    ("m required ==v;", "Key not specified for value 'v' in JAAS config"),
    ("m required k=v", "JAAS config entry not terminated by semi-colon"),
    ("m required k=v; n", "Login module control flag not specified in JAAS config"),
    ("; required;", "Login module not specified in JAAS config"),
    ('"" required;', "Login module not specified in JAAS config"),
    ("m required k=v\x85;", "Value not specified for key 'null' in JAAS config"),
])
def test_errors_are_kafkas(text: str, error: str) -> None:
    with pytest.raises(JaasError) as failure:
        parse_jaas_config(text)
    assert str(failure.value) == error


def test_single_login_module() -> None:
    assert parse_single_login_module("m required;").login_module == "m"
    with pytest.raises(JaasError, match=r"^JAAS config property contains 2 login modules, "
                                        "should be 1 module$"):
        parse_single_login_module("a required; b required;")
    with pytest.raises(JaasError, match="JndiLoginModule is not allowed"):
        parse_single_login_module("com.sun.security.auth.module.JndiLoginModule required "
                                  'user.provider.url="ldap://evil";')


def test_format_reads_back() -> None:
    entry = JaasEntry(SCRAM_LOGIN_MODULE, "required",
                      {"username": "al ice", "password": 'p"w;\\x\n'})
    assert format_jaas_config(entry) == (
        f'{SCRAM_LOGIN_MODULE} required username="al ice" password="p\\"w;\\\\x\\n";')
    assert only(format_jaas_config(entry)) == entry


def test_entries_are_immutable() -> None:
    options = {"k": "v"}
    entry = JaasEntry("m", "required", options)
    options["k"] = "changed"
    assert entry.options == {"k": "v"}
    with pytest.raises(TypeError):
        entry.options["k"] = "x"  # type: ignore[index]


_VALUES = st.text(st.characters(codec="utf-8"), max_size=30)
# Characters a bare (unquoted) word may hold in sasl.jaas.config.
_WORD_CHARS = st.characters(codec="utf-8", min_codepoint=33).filter(
    lambda c: c not in "/'\";=" and not 129 <= ord(c) <= 159)


@settings(max_examples=examples(100))
@given(value=_VALUES)
def test_quoted_values_read_back(value: str) -> None:
    assert only(f"m required k={quote_jaas_value(value)};").options == {"k": value}


@settings(max_examples=examples(100))
@given(value=_VALUES.filter(lambda v: "'" not in v and "\\" not in v and "\n" not in v
                            and "\r" not in v))
def test_single_quoted_values_read_back(value: str) -> None:
    assert only(f"m required k='{value}';").options == {"k": value}


@settings(max_examples=examples(100))
@given(value=st.text(_WORD_CHARS, min_size=1, max_size=20))
def test_bare_words_read_back(value: str) -> None:
    assert only(f"m required k={value};").options == {"k": value}


@settings(max_examples=examples(200))
@given(text=st.text(st.sampled_from("ab ;=\"'\\/*\n{}\x85é"), max_size=30))
def test_any_text_parses_or_raises_jaas_error(text: str) -> None:
    with contextlib.suppress(JaasError):
        parse_jaas_config(text)
