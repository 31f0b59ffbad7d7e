"""One JAAS login module entry, whichever syntax it was read from, and the error every
JAAS parser here raises."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

CONTROL_FLAGS = ("required", "requisite", "sufficient", "optional")


class JaasError(ValueError):
    """JAAS configuration that Kafka or the JDK would refuse; the message says why."""


@dataclass(frozen=True)
class JaasEntry:
    """One login module line: `<login_module> <control_flag> key="value" ... ;`."""

    login_module: str
    control_flag: str  # lower case: required, requisite, sufficient or optional
    options: Mapping[str, str]

    def __post_init__(self) -> None:
        object.__setattr__(self, "options", MappingProxyType(dict(self.options)))
