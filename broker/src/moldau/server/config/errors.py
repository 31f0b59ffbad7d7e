"""The error every invalid broker setting raises."""

from __future__ import annotations


class ConfigError(ValueError):
    """An invalid broker configuration; the message names the key and the bad value."""

    def __init__(self, key: str, value: object, reason: str) -> None:
        super().__init__(f"Invalid value {value} for configuration {key}: {reason}")
        self.key = key
        self.value = value
        self.reason = reason
