"""Validators of single values, after Kafka's ConfigDef validators.

A validator sees a value already converted to its key's type (`values.convert`), or
None when the key is unset; a value of another Python type is a bug in the caller, so
it raises TypeError rather than ConfigError.
"""

from __future__ import annotations

from dataclasses import dataclass

from moldau.replication import protocol_versions
from moldau.security.acls import parse_super_users

from .errors import ConfigError
from .value_types import ConfigValue


def _number(key: str, value: ConfigValue) -> float:
    # bool is an int in Python, but no boolean key carries a numeric validator
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"{key}: a numeric validator got {value!r}")
    return value


@dataclass(frozen=True)
class Range:
    """Kafka's ConfigDef.Range: inclusive bounds, either side optional."""

    low: float | None = None
    high: float | None = None

    def check(self, key: str, value: ConfigValue) -> None:
        if value is None:
            return
        number = _number(key, value)
        if self.low is not None and number < self.low:
            if self.high is None:
                raise ConfigError(key, value, f"Value must be at least {self.low}")
            raise ConfigError(key, value, f"Value must be in [{self.low}, {self.high}]")
        if self.high is not None and number > self.high:
            if self.low is None:
                raise ConfigError(key, value, f"Value must be no more than {self.high}")
            raise ConfigError(key, value, f"Value must be in [{self.low}, {self.high}]")

    def __str__(self) -> str:
        if self.high is None:
            return f"[{self.low},...]"
        if self.low is None:
            return f"[...,{self.high}]"
        return f"[{self.low},...,{self.high}]"


def at_least(low: float) -> Range:
    return Range(low, None)


@dataclass(frozen=True)
class OneOf:
    """Kafka's ValidString / ValidList / CaseInsensitiveValidString; lists check each item."""

    values: tuple[str, ...]
    case_insensitive: bool = False

    def check(self, key: str, value: ConfigValue) -> None:
        if value is None:
            return
        items = value if isinstance(value, list) else [value]
        allowed = {v.lower() for v in self.values} if self.case_insensitive else set(self.values)
        for item in items:
            probe = item.lower() if self.case_insensitive and isinstance(item, str) else item
            if probe not in allowed:
                raise ConfigError(key, value, f"String must be one of: {', '.join(self.values)}")

    def __str__(self) -> str:
        return "[" + ", ".join(self.values) + "]"


@dataclass(frozen=True)
class InterBrokerProtocol:
    """Kafka's MetadataVersion validator, limited to the versions Moldau speaks."""

    def check(self, key: str, value: ConfigValue) -> None:
        if not isinstance(value, str):
            raise TypeError(f"{key}: the protocol version validator got {value!r}")
        try:
            protocol_versions.parse(value)
        except protocol_versions.UnknownProtocolVersionError as exc:
            raise ConfigError(key, value, str(exc)) from None

    def __str__(self) -> str:
        known = protocol_versions.KNOWN_VERSIONS
        return f"[{known[0]}, ..., {known[-1]}]"


@dataclass(frozen=True)
class GzipLevel:
    """Kafka's GzipCompression.LevelValidator: 1..9, or -1 (zlib's default level)."""

    def check(self, key: str, value: ConfigValue) -> None:
        if value is None:
            return
        level = _number(key, value)
        if level == -1 or 1 <= level <= 9:
            return
        raise ConfigError(key, value, "Value must be between 1 and 9, or -1")

    def __str__(self) -> str:
        return "[1,...,9] or -1"


@dataclass(frozen=True)
class Unenforced:
    """A security key Moldau cannot honour yet: any value but the default stops startup,
    since a broker that ignored it would be less safe than its operator believes."""

    default: ConfigValue
    reason: str

    def check(self, key: str, value: ConfigValue) -> None:
        if value is None or value == self.default:
            return
        raise ConfigError(key, value, f"{self.reason}; Moldau refuses to start rather than "
                          f"ignore it (remove {key} from the configuration)")

    def __str__(self) -> str:
        return "" if self.default in (None, "") else f"only {self.default}"


ACL_AUTHORIZER = "kafka.security.authorizer.AclAuthorizer"
# authorizers Kafka 3.9 in ZooKeeper mode cannot load, with why
_UNLOADABLE_AUTHORIZERS = {
    "kafka.security.auth.SimpleAclAuthorizer":
        "removed in Kafka 3.0; kafka.security.authorizer.AclAuthorizer reads the same ACLs",
    "org.apache.kafka.metadata.authorizer.StandardAuthorizer":
        "KRaft's authorizer; a ZooKeeper-mode broker uses kafka.security.authorizer.AclAuthorizer",
}


@dataclass(frozen=True)
class AuthorizerClass:
    """`authorizer.class.name`: empty (no authorizer: everything allowed) or Kafka's
    ZooKeeper-backed AclAuthorizer; any other class stops startup, as a class Kafka
    cannot load stops Kafka's (java.lang.ClassNotFoundException)."""

    def check(self, key: str, value: ConfigValue) -> None:
        if value in (None, "", ACL_AUTHORIZER):
            return
        why = _UNLOADABLE_AUTHORIZERS.get(str(value), "Moldau provides only "
                                          f"{ACL_AUTHORIZER}")
        raise ConfigError(key, value, f"java.lang.ClassNotFoundException: {value} ({why})")

    def __str__(self) -> str:
        return f'"" or {ACL_AUTHORIZER}'


@dataclass(frozen=True)
class PrincipalList:
    """`super.users`: principals (`User:alice`) separated by semicolons."""

    def check(self, key: str, value: ConfigValue) -> None:
        if value is None:
            return
        try:
            parse_super_users(str(value))
        except ValueError as exc:
            raise ConfigError(key, value, str(exc)) from None

    def __str__(self) -> str:
        return "Type:name;Type:name..."


@dataclass(frozen=True)
class HostIdentity:
    """`moldau.broker.host`: a name shared by the brokers of one server; unset (not
    empty) when the broker is a host of its own."""

    def check(self, key: str, value: ConfigValue) -> None:
        if value is None:
            return
        if not isinstance(value, str):
            raise TypeError(f"{key}: a host validator got {value!r}")
        if not value or any(c.isspace() or not c.isprintable() for c in value):
            raise ConfigError(key, value, "a host name without spaces is required; leave the "
                              "key unset for a broker that is a host of its own")

    def __str__(self) -> str:
        return "a host name"


Validator = (Range | OneOf | GzipLevel | Unenforced | InterBrokerProtocol | AuthorizerClass
             | PrincipalList | HostIdentity)
