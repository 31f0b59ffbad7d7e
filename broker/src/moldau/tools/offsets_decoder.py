"""kafka-dump-log's `--offsets-decoder`: the records of `__consumer_offsets` as Kafka
3.9 prints them: the key as `{"type":"<key version>","data":{...}}`, the value as
`{"version":"<value version>","data":{...}}` in Kafka's JSON form, a tombstone as
`<DELETE>`, and a consumer group's member subscriptions and assignments decoded from
their embedded consumer-protocol bytes."""

from __future__ import annotations

import json
import struct

from moldau.protocol._runtime import Message
from moldau.protocol.generated.consumer_protocol_assignment import ConsumerProtocolAssignment
from moldau.protocol.generated.consumer_protocol_subscription import (
    ConsumerProtocolSubscription,
)
from moldau.protocol.generated.group_metadata_key import GroupMetadataKey
from moldau.protocol.generated.group_metadata_value import GroupMetadataValue
from moldau.protocol.generated.offset_commit_key import OffsetCommitKey
from moldau.protocol.generated.offset_commit_value import OffsetCommitValue
from moldau.protocol.json_form import JsonValue, to_json

_VERSION = struct.Struct(">h")
# key version -> (key message, value message); 0-1 offset commits, 2 group metadata
_RECORD_TYPES: dict[int, tuple[type[Message], type[Message]]] = {
    0: (OffsetCommitKey, OffsetCommitValue),
    1: (OffsetCommitKey, OffsetCommitValue),
    2: (GroupMetadataKey, GroupMetadataValue),
}
_EMBEDDED: dict[str, type[Message]] = {"subscription": ConsumerProtocolSubscription,
                                       "assignment": ConsumerProtocolAssignment}


def _text(node: dict[str, JsonValue]) -> str:
    return json.dumps(node, separators=(",", ":"), ensure_ascii=False)


def _versioned(data: bytes) -> tuple[int, bytes]:
    if len(data) < 2:
        raise ValueError(f"{len(data)} bytes hold no version")
    return _VERSION.unpack_from(data)[0], data[2:]


def _decode_members(value: GroupMetadataValue, data: dict[str, JsonValue]) -> None:
    """Replace each member's subscription and assignment bytes by their JSON form when the
    group speaks the consumer protocol (bytes that do not decode stay as they are)."""
    members = data.get("members")
    if value.protocol_type != "consumer" or not isinstance(members, list):
        return
    for member, node in zip(value.members, members, strict=False):
        if not isinstance(node, dict):  # to_json writes each member as an object
            continue
        for field, message in _EMBEDDED.items():
            try:
                version, body = _versioned(bytes(getattr(member, field)))
                node[field] = to_json(message.decode(body, version), version)
            except Exception:  # Kafka keeps the original bytes too
                pass


def parse(offset: int, key: bytes | None, value: bytes | None) -> tuple[str | None, str | None]:
    """(key text, payload text) of one record; None where Kafka prints nothing."""
    if key is None:
        return (f"Error at offset {offset}, skipping. Failed to decode message at offset "
                f"{offset} using offset topic decoder (message had a missing key)", None)
    try:
        key_version, key_body = _versioned(key)
        if key_version not in _RECORD_TYPES:
            return f"Unknown record type {key_version} at offset {offset}, skipping.", None
        key_message, value_message = _RECORD_TYPES[key_version]
        key_text = _text({"type": str(key_version),
                          "data": to_json(key_message.decode(key_body, key_version),
                                          key_version)})
        if value is None:
            return key_text, "<DELETE>"
        value_version, value_body = _versioned(value)
        decoded = value_message.decode(value_body, value_version)
        data = to_json(decoded, value_version)
        if isinstance(decoded, GroupMetadataValue):
            _decode_members(decoded, data)
        return key_text, _text({"version": str(value_version), "data": data})
    except Exception as exc:  # one bad record must not end the dump
        return f"Error at offset {offset}, skipping. {exc}", None
