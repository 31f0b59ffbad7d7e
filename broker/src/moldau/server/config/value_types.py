"""What a broker key's value can be: Kafka's ConfigDef types and their Python form."""

from __future__ import annotations

# Kafka's ConfigDef.Type names, as the table and the docs spell them.
TYPES = ("boolean", "string", "int", "short", "long", "double", "list", "class", "password")

# A converted value: boolean -> bool, int/short/long -> int, double -> float, list ->
# list[str], string/class/password -> str; None when unset.
ConfigValue = bool | int | float | str | list[str] | None

# Java's bounds for the integer types, and Double.MAX_VALUE.
INT_MIN, INT_MAX = -(2**31), 2**31 - 1
LONG_MIN, LONG_MAX = -(2**63), 2**63 - 1
SHORT_MIN, SHORT_MAX = -(2**15), 2**15 - 1
DOUBLE_MAX = 1.7976931348623157e308
