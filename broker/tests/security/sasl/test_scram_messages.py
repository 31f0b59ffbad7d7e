"""The SCRAM message grammar as Kafka's ScramMessages and ScramFormatter define it: name
escaping, extensions, and messages rendered the way Kafka renders them."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis_budget import examples

from moldau.security.sasl.errors import SaslMechanismError
from moldau.security.sasl.scram_messages import (
    ClientFinalMessage,
    ClientFirstMessage,
    ServerFinalMessage,
    ServerFirstMessage,
    parse_extensions,
    sasl_name,
    username_from_sasl_name,
)


@pytest.mark.parametrize("username, escaped", [
    ("alice", "alice"), ("a,b", "a=2Cb"), ("a=b", "a=3Db"), ("=,=", "=3D=2C=3D"),
    ("=2C", "=3D2C"), ("", ""),
])
def test_sasl_name_escaping(username: str, escaped: str) -> None:
    assert sasl_name(username) == escaped
    assert username_from_sasl_name(escaped) == username


@pytest.mark.parametrize("name", ["a=b", "a=", "=2c", "a=3d", "=="])
def test_stray_equals_is_an_invalid_name(name: str) -> None:
    with pytest.raises(ValueError, match="Invalid username"):
        username_from_sasl_name(name)


@settings(max_examples=examples(100))
@given(st.text(max_size=20))
def test_escaping_round_trips(username: str) -> None:
    assert username_from_sasl_name(sasl_name(username)) == username


def test_extensions() -> None:
    assert parse_extensions("") == {}
    assert parse_extensions("a=1,b=x=y,a=2") == {"a": "2", "b": "x=y"}
    first = ClientFirstMessage.parse(b"n,,n=u,r=n1,tokenauth=TRUE,z=1")
    assert first.token_auth and first.extensions == {"tokenauth": "TRUE", "z": "1"}
    assert not ClientFirstMessage.parse(b"n,,n=u,r=n1,tokenauth=yes").token_auth
    assert first.bare() == "n=u,r=n1,tokenauth=TRUE,z=1"


def test_client_first_rendering() -> None:
    assert ClientFirstMessage("u", "n1").to_bytes() == b"n,,n=u,r=n1"
    assert ClientFirstMessage("u", "n1", "u", {"tokenauth": "true"}).to_bytes() == (
        b"n,a=u,n=u,r=n1,tokenauth=true")
    parsed = ClientFirstMessage.parse(b"n,a=x,m=ignored,n=u,r=n1")
    assert (parsed.authorization_id, parsed.sasl_name, parsed.nonce) == ("x", "u", "n1")
    assert parsed.bare() == "n=u,r=n1"  # Kafka drops the reserved m= part


def test_other_messages_round_trip() -> None:
    server_first = ServerFirstMessage("n1n2", b"salt", 4096)
    assert server_first.to_bytes() == b"r=n1n2,s=c2FsdA==,i=4096"
    assert ServerFirstMessage.parse(server_first.to_bytes()) == server_first
    assert ServerFirstMessage.parse(b"r=n,s=,i=1") == ServerFirstMessage("n", b"", 1)
    final = ClientFinalMessage(b"n,,", "n1n2", b"\x01\x02")
    assert final.to_bytes() == b"c=biws,r=n1n2,p=AQI="
    assert ClientFinalMessage.parse(final.to_bytes()) == final
    assert ServerFinalMessage.parse(b"v=AQI=") == ServerFinalMessage(b"\x01\x02")
    assert ServerFinalMessage.parse(b"e=other-error") == ServerFinalMessage(None, "other-error")
    assert ServerFinalMessage(None, "x").to_bytes() == b"e=x"


@pytest.mark.parametrize("parse", [ClientFirstMessage.parse, ServerFirstMessage.parse,
                                   ClientFinalMessage.parse, ServerFinalMessage.parse])
def test_garbage_is_a_mechanism_error(parse: object) -> None:
    with pytest.raises(SaslMechanismError, match=r"^Invalid SCRAM "):
        parse(b"garbage")  # type: ignore[operator]
