"""A key's value between text and its type: parsing as Kafka's ConfigDef.parseType does,
and the two renderings Kafka prints (the startup dump, DescribeConfigs)."""

from __future__ import annotations

from .errors import ConfigError
from .schema import ConfigKey
from .value_types import INT_MAX, INT_MIN, LONG_MAX, LONG_MIN, SHORT_MAX, SHORT_MIN, ConfigValue


def _to_int(key: str, value: str, low: int, high: int, tname: str) -> int:
    text = value.strip()
    try:
        number = int(text, 10)
    except ValueError:
        raise ConfigError(key, value, f"Not a number of type {tname}") from None
    if not low <= number <= high:
        raise ConfigError(key, value, f"Not a number of type {tname}")
    return number


def convert(key: ConfigKey, value: object) -> ConfigValue:
    """Convert a raw value (string or Python value) to the key's type, as ConfigDef.parseType."""
    if value is None:
        return None
    name, t = key.name, key.type
    if not isinstance(value, str):
        if t == "list" and isinstance(value, list | tuple):
            return [str(v).strip() for v in value]
        if t == "boolean" and isinstance(value, bool):
            return value
        value = str(value).lower() if isinstance(value, bool) else str(value)
    if t == "boolean":
        text = value.strip().lower()
        if text not in ("true", "false"):
            raise ConfigError(name, value, "Expected value to be either true or false")
        return text == "true"
    if t == "int":
        return _to_int(name, value, INT_MIN, INT_MAX, "INT")
    if t == "short":
        return _to_int(name, value, SHORT_MIN, SHORT_MAX, "SHORT")
    if t == "long":
        return _to_int(name, value, LONG_MIN, LONG_MAX, "LONG")
    if t == "double":
        try:
            return float(value.strip())
        except ValueError:
            raise ConfigError(name, value, "Not a number of type DOUBLE") from None
    if t == "list":
        text = value.strip()
        return [item.strip() for item in text.split(",")] if text else []
    return value.strip()  # string, class, password


def show_value(key: ConfigKey, value: ConfigValue) -> str:
    """Java-style rendering used by the KafkaConfig values dump."""
    if value is None:
        return "null"
    if key.type == "password":
        return "[hidden]"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return "[" + ", ".join(value) + "]"
    return str(value)


def describe_value(key: ConfigKey, value: ConfigValue) -> str | None:
    """DescribeConfigs rendering: sensitive values are null, lists comma-joined."""
    if value is None or key.type == "password":
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return ",".join(value)
    return str(value)
