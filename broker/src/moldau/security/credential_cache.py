"""The broker's SCRAM credentials, by mechanism and user (Kafka's CredentialCache as its
CredentialProvider fills it): what a SCRAM login is checked against, without a ZooKeeper
read per login. The broker fills it from `/config/users` at startup and after each change
notification (server/user_configs.py); it runs on the event loop, so it takes no locks."""

from __future__ import annotations

import logging
from collections.abc import Mapping

from moldau.security.sasl.scram_credentials import (
    CredentialFormatError,
    ScramCredential,
    ScramMechanism,
)

log = logging.getLogger("kafka.server.CredentialProvider")


class ScramCredentialCache:
    def __init__(self) -> None:
        self._by_mechanism: dict[ScramMechanism, dict[str, ScramCredential]] = {
            mechanism: {} for mechanism in ScramMechanism}

    def get(self, mechanism: ScramMechanism, user: str) -> ScramCredential | None:
        return self._by_mechanism[mechanism].get(user)

    def update_user(self, user: str, config: Mapping[str, str]) -> None:
        """Kafka's UserConfigHandler: `config` is the user's whole config map; each
        mechanism's credential is put when its key is there and removed when it is not.
        A malformed credential is logged and its mechanism left without one (rather than
        the previous credential kept, as Kafka does): the stored config no longer holds
        the old password, so it must not log in any more."""
        for mechanism, credentials in self._by_mechanism.items():
            text = config.get(mechanism.mechanism_name)
            if text is None:
                credentials.pop(user, None)
                continue
            try:
                credentials[user] = ScramCredential.from_config_value(text)
            except CredentialFormatError as exc:
                credentials.pop(user, None)
                log.error("Ignoring the %s credential of user %s: %s",
                          mechanism.mechanism_name, user, exc)

    def remove_user(self, user: str) -> None:
        for credentials in self._by_mechanism.values():
            credentials.pop(user, None)

    def users(self, mechanism: ScramMechanism) -> list[str]:
        """The users with a credential for `mechanism`, sorted."""
        return sorted(self._by_mechanism[mechanism])
