"""Config values as Kafka's JVM code prints them: ConfigDef.convertToString (with Java's
Double.toString) for DescribeConfigs and ZooKeeper, and a Scala `Set(...)` for the names
in Kafka's error messages."""

from __future__ import annotations

import decimal
from collections.abc import Iterable


def java_double(value: float) -> str:
    """Java's Double.toString, which Kafka's config rendering uses."""
    if value != value:
        return "NaN"
    if value in (float("inf"), float("-inf")):
        return "Infinity" if value > 0 else "-Infinity"
    if value == 0:
        return "0.0"
    if 1e-3 <= abs(value) < 1e7:
        text = repr(float(value))
        return text if "." in text else text + ".0"
    # shortest round-trip digits, in Java's d.dddE<n> form
    sign, digits, exponent = decimal.Decimal(repr(float(value))).as_tuple()
    text = "".join(str(d) for d in digits).rstrip("0") or "0"
    power = len(digits) - 1 + int(exponent)
    mantissa = text[0] + "." + (text[1:] or "0")
    return f"{'-' if sign else ''}{mantissa}E{power}"


def render(name: str, value: object) -> str | None:
    """A typed value as Kafka's ConfigDef.convertToString renders it (None stays None)."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list | tuple):
        return ",".join(str(v) for v in value)
    if isinstance(value, float):
        return java_double(value)
    return str(value)


def scala_set(names: Iterable[str]) -> str:
    return "Set(" + ", ".join(sorted(names)) + ")"
