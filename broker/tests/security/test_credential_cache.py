"""The broker's SCRAM credential cache: a user's whole config map in, Kafka's
UserConfigHandler rules out (put when a mechanism's key is there, removed when it is not,
a malformed credential logged and left out)."""

from __future__ import annotations

import logging

import pytest

from moldau.security.credential_cache import ScramCredentialCache
from moldau.security.sasl.scram_credentials import ScramMechanism, derive_credential

SHA256, SHA512 = ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512
ALICE_256 = derive_credential(SHA256, "alice-secret", 8192, salt=b"salt-1")
ALICE_512 = derive_credential(SHA512, "alice-secret", 4096, salt=b"salt-2")


def test_each_mechanism_follows_its_key() -> None:
    cache = ScramCredentialCache()
    assert cache.get(SHA256, "alice") is None
    cache.update_user("alice", {"SCRAM-SHA-256": ALICE_256.to_config_value(),
                                "SCRAM-SHA-512": ALICE_512.to_config_value(),
                                "producer_byte_rate": "1024"})
    assert cache.get(SHA256, "alice") == ALICE_256
    assert cache.get(SHA512, "alice") == ALICE_512
    assert cache.get(SHA256, "bob") is None
    # the whole map each time: a key that went away takes its credential with it
    cache.update_user("alice", {"SCRAM-SHA-512": ALICE_512.to_config_value()})
    assert cache.get(SHA256, "alice") is None
    assert cache.get(SHA512, "alice") == ALICE_512
    assert cache.users(SHA512) == ["alice"]
    cache.update_user("bob", {"SCRAM-SHA-256": ALICE_256.to_config_value()})
    cache.remove_user("alice")
    assert cache.get(SHA512, "alice") is None
    assert cache.users(SHA256) == ["bob"] and cache.users(SHA512) == []
    cache.remove_user("nobody")  # nothing to remove is fine


@pytest.mark.parametrize("bad", [
    "salt=c2FsdA==,stored_key=AAAA,server_key=AAAA",  # a field missing
    "salt=c2FsdA==,stored_key=AAAA,server_key=AAAA,iterations=many",
    "salt=not base64!,stored_key=AAAA,server_key=AAAA,iterations=4096",
    "garbage",
])
def test_a_malformed_credential_is_logged_and_left_out(bad: str,
                                                       caplog: pytest.LogCaptureFixture) -> None:
    cache = ScramCredentialCache()
    cache.update_user("alice", {"SCRAM-SHA-256": ALICE_256.to_config_value(),
                                "SCRAM-SHA-512": ALICE_512.to_config_value()})
    with caplog.at_level(logging.ERROR, logger="kafka.server.CredentialProvider"):
        cache.update_user("alice", {"SCRAM-SHA-256": bad,
                                    "SCRAM-SHA-512": ALICE_512.to_config_value()})
    # the old password of the broken mechanism no longer logs in; the other one still does
    assert cache.get(SHA256, "alice") is None
    assert cache.get(SHA512, "alice") == ALICE_512
    assert "Ignoring the SCRAM-SHA-256 credential of user alice" in caplog.text
