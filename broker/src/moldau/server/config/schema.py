"""What one broker key is (ConfigKey), and the short builders the key table is written in."""

from __future__ import annotations

from dataclasses import dataclass

from .validators import Validator
from .value_types import TYPES, ConfigValue

# implemented: the broker honours it; accepted: a Kafka file may set it and still loads,
# but Moldau does not act on it (the note says why); rejected: setting it is an error.
STATUSES = ("implemented", "accepted", "rejected")
# the note of a key Kafka does not have (named moldau.*); Kafka's tools do not know it
EXTENSION = "Moldau extension"
KRAFT = "KRaft-only; Moldau runs in ZooKeeper mode"


@dataclass(frozen=True)
class ConfigKey:
    """One broker key: Kafka's definition plus Moldau's status and a short note."""

    name: str
    type: str
    default: ConfigValue
    validator: Validator | None
    importance: str
    status: str
    note: str = ""
    extension: bool = False  # a Moldau key, not Kafka's (EXTENSION)

    def __post_init__(self) -> None:
        assert self.type in TYPES, self.type
        assert self.status in STATUSES, self.status
        assert self.importance in ("high", "medium", "low"), self.importance
        assert self.status == "implemented" or self.note, f"{self.name} needs a note"
        assert self.extension == self.name.startswith("moldau."), self.name


_IMPORTANCE = {"H": "high", "M": "medium", "L": "low"}


def _key(name: str, type_: str, default: ConfigValue, imp: str, status: str, note: str = "",
         v: Validator | None = None) -> ConfigKey:
    return ConfigKey(name, type_, default, v, _IMPORTANCE[imp], status, note)


def impl(name: str, type_: str, default: ConfigValue, imp: str, v: Validator | None = None,
         note: str = "") -> ConfigKey:
    """An implemented key; `imp` is H, M or L (Kafka's importance)."""
    return _key(name, type_, default, imp, "implemented", note, v)


def acc(name: str, type_: str, default: ConfigValue, imp: str, note: str,
        v: Validator | None = None) -> ConfigKey:
    """An accepted key: the note says why Moldau does not act on it."""
    return _key(name, type_, default, imp, "accepted", note, v)


def rej(name: str, type_: str, note: str = KRAFT) -> ConfigKey:
    """A rejected key (no default: it never gets a value)."""
    return _key(name, type_, None, "H", "rejected", note)


def ext(name: str, type_: str, imp: str, note: str, v: Validator | None = None) -> ConfigKey:
    """A Moldau extension: implemented, unset by default, named moldau.*. Kafka's
    DescribeConfigs lists a key it does not know only when the file sets it, and so
    does Moldau for these."""
    return ConfigKey(name, type_, None, v, _IMPORTANCE[imp], "implemented",
                     f"{EXTENSION}: {note}", extension=True)
