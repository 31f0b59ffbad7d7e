"""/config/<type>/<name> (an entity's config overrides) and the /config/changes
notifications that tell every broker to reread one."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import NamedTuple

from .zk_json import java_properties_order, json_bytes, parse_json, parse_object


def encode_entity_config(config: Mapping[str, str]) -> bytes:
    """ConfigEntityZNode.encode: {"version":1,"config":{...}} with the config in the order
    of the java.util.Properties Kafka fills from it."""
    props = {str(k): str(v) for k, v in config.items()}
    ordered = {k: props[k] for k in java_properties_order(list(props))}
    return json_bytes({"version": 1, "config": ordered})


def decode_entity_config(data: bytes | None) -> dict[str, str]:
    """ConfigEntityZNode.decode: {} for null/empty data or a missing config object."""
    obj = parse_json(data)
    config = obj.get("config") if isinstance(obj, dict) else None
    if not isinstance(config, dict):
        return {}
    return {k: v if isinstance(v, str) else json.dumps(v) for k, v in config.items()}


class ConfigChangeNotification(NamedTuple):
    """One /config/changes child: its sequence name and the entity whose config changed."""

    seq_name: str
    entity_type: str
    entity_name: str


def encode_config_change(entity_path: str) -> bytes:
    """ConfigEntityChangeNotificationSequenceZNode.encode: version 2, "topics/foo" or
    "users/alice/clients/app" (sanitized names)."""
    return json_bytes({"version": 2, "entity_path": entity_path})


def decode_config_change(data: bytes) -> tuple[str, str]:
    """(entity type, entity name) of a change notification, version 1 or 2."""
    obj = parse_object(data, "config change notification")
    version = int(obj.get("version", 1))
    if version == 1:
        return str(obj["entity_type"]), str(obj["entity_name"])
    if version == 2:
        entity_type, sep, name = str(obj["entity_path"]).partition("/")
        if not sep or not name:
            raise ValueError(f"invalid entity_path in config change notification: {data!r}")
        return entity_type, name
    raise ValueError(f"unsupported config change notification version {version}: {data!r}")
