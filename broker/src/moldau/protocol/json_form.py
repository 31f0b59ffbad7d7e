"""Kafka's JSON form of a generated message (what its generated `...JsonConverter.write`
produces, e.g. in kafka-dump-log's `--offsets-decoder` output): the fields present in
the version, by their camelCase names, in definition order; tagged fields only when they
differ from their default; bytes as base64, UUIDs in Kafka's base64 form."""

from __future__ import annotations

import base64
import uuid
from typing import Any, TypeAlias

from moldau.protocol._runtime import FieldSpec, Struct, in_range

# A value json.dumps writes: what a message's JSON form is made of.
JsonValue: TypeAlias = "bool | int | float | str | list[JsonValue] | dict[str, JsonValue] | None"


def camel_case(json_name: str) -> str:
    """Kafka's camelCaseName: the definition's name with its first letter lowered."""
    return json_name[:1].lower() + json_name[1:]


def to_json(message: Struct, version: int) -> dict[str, JsonValue]:
    out: dict[str, JsonValue] = {}
    for field in type(message).FIELDS:
        if not in_range(version, field.versions):
            continue
        value = getattr(message, field.name)
        if in_range(version, field.tagged) and value == field.default:
            continue
        out[camel_case(field.json_name)] = _value(field, value, version)
    return out


def _value(field: FieldSpec, value: Any, version: int) -> JsonValue:  # Any: per field.type
    if value is None:
        return None
    kind = field.type
    if kind == "struct":
        return to_json(value, version)
    if kind == "array":
        if field.element == "struct":
            return [to_json(item, version) for item in value]
        return [_scalar(field.element or "", item) for item in value]
    return _scalar(kind, value)


def _scalar(kind: str, value: Any) -> JsonValue:  # Any: a scalar of type `kind`
    if kind in ("bytes", "records"):
        return base64.b64encode(bytes(value)).decode("ascii")
    if kind == "uuid":
        raw = value.bytes if isinstance(value, uuid.UUID) else bytes(value)
        return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")
    return value
