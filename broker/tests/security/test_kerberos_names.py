"""Principal-to-local rules read and applied as Kafka's KerberosShortNamer does; the
examples are the cases of Kafka's own KerberosNameTest, plus the realm rules an operator
writes for a second realm."""

from __future__ import annotations

import pytest

from moldau.security.kerberos_names import (
    KerberosName,
    KerberosNameError,
    NoMatchingRule,
    ShortNamer,
)


def test_names_split_into_service_host_and_realm() -> None:
    name = KerberosName.parse("App.service-name/example.com@REALM.COM")
    assert (name.service, name.host, name.realm) == ("App.service-name", "example.com",
                                                     "REALM.COM")
    assert KerberosName.parse("alice@REALM.COM") == KerberosName("alice", None, "REALM.COM")
    assert KerberosName.parse("alice") == KerberosName("alice", None, None)
    assert str(KerberosName.parse("kafka/localhost@R")) == "kafka/localhost@R"
    with pytest.raises(KerberosNameError, match="Malformed Kerberos name: a/b/c@R"):
        KerberosName.parse("a/b/c@R")


def test_kafka_parse_examples() -> None:
    namer = ShortNamer("REALM.COM", [r"RULE:[1:$1](App\..*)s/App\.(.*)/$1/g",
                                     r"RULE:[2:$1](App\..*)s/App\.(.*)/$1/g", "DEFAULT"])
    assert namer.short_name("App.service-name/example.com@REALM.COM") == "service-name"
    assert namer.short_name("App.service-name@REALM.COM") == "service-name"
    assert namer.short_name("user/host@REALM.COM") == "user"


@pytest.mark.parametrize("flag,convert", [("L", str.lower), ("U", str.upper)])
def test_kafka_case_examples(flag: str, convert) -> None:
    namer = ShortNamer("REALM.COM", [
        f"RULE:[1:$1]/{flag}", f"RULE:[2:$1](Test.*)s/ABC///{flag}",
        f"RULE:[2:$1](ABC.*)s/ABC/XYZ/g/{flag}", rf"RULE:[2:$1](App\..*)s/App\.(.*)/$1/g/{flag}",
        f"RULE:[2:$1]/{flag}", "DEFAULT"])
    assert namer.short_name("User@REALM.COM") == convert("user")
    assert namer.short_name("TestABC/host@FOO.COM") == convert("test")
    assert namer.short_name("ABC_User_ABC/host@FOO.COM") == convert("xyz_user_xyz")
    assert namer.short_name("App.SERVICE-name/example.com@REALM.COM") == convert("service-name")
    assert namer.short_name("User/root@REALM.COM") == convert("user")


@pytest.mark.parametrize("rule", [
    "default", "DEFAUL", "DEFAULT/L", "DEFAULT/g", "rule:[1:$1]", "rule:[1:$1]/L/U",
    "rule:[1:$1]/U/L", "rule:[1:$1]/LU", "RULE:[1:$1/L", "RULE:[1:$1]/l",
    "RULE:[2:$1](ABC.*)s/ABC/XYZ/L/g",
    "RULE:[:$1]",  # no component count (Java fails to read the number)
    "RULE:[1:$1](a(b)",  # a regex that does not compile
    "RULE:[1:$1]s/(a)/$2/",  # a reference to a group the pattern does not have
])
def test_kafka_invalid_rules(rule: str) -> None:
    with pytest.raises(KerberosNameError, match="Invalid rule"):
        ShortNamer("REALM.COM", [rule])


def test_unmatched_tail_is_named() -> None:
    with pytest.raises(KerberosNameError, match="unmatched substring: `/L`"):
        ShortNamer("REALM.COM", ["DEFAULT/L"])


def test_default_maps_the_default_realm_only() -> None:
    namer = ShortNamer("EXAMPLE.TEST")
    assert namer.short_name("alice@EXAMPLE.TEST") == "alice"
    assert namer.short_name("kafka/broker1.example.test@EXAMPLE.TEST") == "kafka"
    assert namer.short_name("already-short") == "already-short"
    with pytest.raises(NoMatchingRule,
                       match=r"No rules apply to carol@OTHER.TEST, rules \[DEFAULT\]"):
        namer.short_name("carol@OTHER.TEST")


def test_a_rule_for_a_second_realm() -> None:
    namer = ShortNamer("EXAMPLE.TEST", ["RULE:[1:$1@$0](.*@OTHER\\.TEST)s/@.*//", "DEFAULT"])
    assert namer.short_name("carol@OTHER.TEST") == "carol"
    assert namer.short_name("alice@EXAMPLE.TEST") == "alice"
    with pytest.raises(NoMatchingRule):
        namer.short_name("mallory@THIRD.TEST")


def test_format_and_replacement_references() -> None:
    namer = ShortNamer("R", ["RULE:[2:$2-$1]", r"RULE:[1:$1](x.*)s/x(y)?z/a$1b\$/"])
    assert namer.short_name("kafka/host1@R") == "host1-kafka"
    assert namer.short_name("xz@R") == "ab$"  # group 1 took no part: empty, as in Java
    # Java reads `$12` with one group as group 1 followed by "2"
    assert ShortNamer("R", ["RULE:[1:$1]s/(a)/$12/"]).short_name("a@R") == "a2"


def test_format_errors_surface_at_mapping_time() -> None:
    namer = ShortNamer("R", ["RULE:[1:$3]"])
    with pytest.raises(KerberosNameError, match="index 3 from \\$3 is outside of the valid "
                                                "range 0 to 1"):
        namer.short_name("alice@R")


def test_a_result_with_slash_or_at_is_refused() -> None:
    namer = ShortNamer("R", ["RULE:[2:$1/$2]"])
    with pytest.raises(NoMatchingRule, match="Non-simple name kafka/h after auth_to_local "
                                             "rule RULE:\\[2:\\$1/\\$2\\]"):
        namer.short_name("kafka/h@R")


def test_first_applying_rule_wins_and_substitution_is_first_only_without_g() -> None:
    namer = ShortNamer("R", ["RULE:[1:$1](b.*)s/b/c/", "RULE:[1:$1]s/a/x/g", "DEFAULT"])
    assert namer.short_name("bob@R") == "cob"
    assert namer.short_name("banana@R") == "canana"
    assert namer.short_name("alpaca@R") == "xlpxcx"
