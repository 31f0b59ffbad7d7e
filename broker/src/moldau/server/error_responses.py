"""The answer to a request whose handler failed, for every API: what Kafka's
AbstractRequest.getErrorResponse writes per request class, derived here from the
generated message definitions.

A response with a top-level `error_code` (in the version asked) carries the error there,
and only there unless BOTH_LEVELS names the API and version. Otherwise each array of
results mirrors the request's array it answers: every topic, partition, group or
resource the request named comes back under its key (name, topic id, partition index,
group id, resource type and name) with the error in its own `error_code`, and the other
fields at their defaults (offsets -1 and the like). Which
request array a result array answers is found by the key fields they share: Metadata's
`topics` answer the request's `topics`, not its `brokers`. Keys named differently on the
two sides (a request's `partition` is a response's `partition_index`) are aliases below.
"""

from __future__ import annotations

from moldau.protocol._runtime import FieldSpec, Message, Struct, in_range
from moldau.protocol.generated.api import APIS, ApiKey

# the fields that say which topic, partition, group or resource an entry is about
KEY_FIELDS = frozenset({"name", "topic", "topic_id", "topic_name", "partition",
                        "partition_index", "partition_id", "index", "group_id", "key",
                        "resource_type", "resource_name", "transactional_id"})
ALIASES = {"partition": ("partition_index", "partition_id", "index"),
           "partition_index": ("partition", "partition_id", "index"),
           "partition_id": ("partition", "partition_index"),
           "index": ("partition", "partition_index"),
           "topic": ("name", "topic_name"), "name": ("topic", "topic_name"),
           "topic_name": ("topic", "name")}
# offsets and times a failed entry has not got: -1, as Kafka's error responses say
# (INVALID_OFFSET, INVALID_HIGH_WATERMARK, ...), where the definitions' default is 0
UNKNOWN_WHEN_FAILED = frozenset({"base_offset", "log_start_offset", "log_append_time_ms",
                                 "high_watermark", "last_stable_offset", "low_watermark"})
# the APIs (and versions) whose error response carries the error at the top and in every
# entry the request named as well: Fetch before v13 (older clients read only the
# partitions), ElectLeaders and AlterPartitionReassignments (their request classes'
# getErrorResponse answers each partition)
BOTH_LEVELS: dict[int, tuple[int, int]] = {ApiKey.FETCH: (7, 12),
                                           ApiKey.ELECT_LEADERS: (1, 32767),
                                           ApiKey.ALTER_PARTITION_REASSIGNMENTS: (0, 32767)}
# a request array of plain values names entries by this key of the result's struct
PRIMITIVE_KEYS = {"string": ("name", "group_id", "key", "topic", "transactional_id"),
                  "int32": ("partition_index", "partition_id", "partition")}


def error_response(api_key: int, version: int, request: Message, code: int) -> Message:
    """A response of this API and version answering every part of `request` with the
    error `code`."""
    response = APIS[api_key].response()
    _fill(response, request, version, code,
          entries_too=in_range(version, BOTH_LEVELS.get(api_key)))
    return response


def _active(cls: type[Struct], version: int) -> list[FieldSpec]:
    return [f for f in cls.FIELDS if in_range(version, f.versions)]


def _fill(out: Struct, source: Struct | None, version: int, code: int,
          entries_too: bool = False) -> None:
    """The error into `out`: its own error_code where it has one (then its entries only
    when `entries_too`), else each entry mirroring `source`'s."""
    fields = _active(type(out), version)
    if any(f.name == "error_code" for f in fields):
        out.error_code = code  # type: ignore[attr-defined]
        for field in fields:
            if field.name in UNKNOWN_WHEN_FAILED:
                setattr(out, field.name, -1)
        if not entries_too:
            return
    if source is None:
        return
    source_arrays = [f for f in _active(type(source), version) if f.type == "array"]
    for field in fields:
        if field.type != "array" or field.element != "struct" or field.struct is None:
            continue
        mirrored = _best_match(field, source_arrays, version)
        if mirrored is None:
            continue
        items = getattr(source, mirrored.name) or []
        setattr(out, field.name, [_entry(field.struct, item, mirrored, version, code)
                                  for item in items])


def _key_names(cls: type[Struct], version: int) -> set[str]:
    return {f.name for f in _active(cls, version) if f.name in KEY_FIELDS}


def _shared(out_keys: set[str], source_keys: set[str]) -> int:
    return sum(1 for k in out_keys
               if k in source_keys or any(a in source_keys for a in ALIASES.get(k, ())))


def _best_match(field: FieldSpec, candidates: list[FieldSpec], version: int
                ) -> FieldSpec | None:
    """The request array the result array `field` answers: the one sharing the most key
    fields (the first on a tie), or None when none shares any."""
    assert field.struct is not None
    out_keys = _key_names(field.struct, version)
    best, score = None, 0
    for candidate in candidates:
        if candidate.element == "struct" and candidate.struct is not None:
            shared = _shared(out_keys, _key_names(candidate.struct, version))
        else:
            keys = PRIMITIVE_KEYS.get(candidate.element or "", ())
            shared = 1 if any(k in out_keys for k in keys) else 0
        if shared > score:
            best, score = candidate, shared
    return best


def _entry(cls: type[Struct], item: object, mirrored: FieldSpec, version: int,
           code: int) -> Struct:
    """The result entry answering `item`, an element of the request array `mirrored`:
    a struct, or a plain value (a name, a partition index) when the array holds those."""
    entry = cls()
    out_fields = _active(cls, version)
    if mirrored.element != "struct":  # a plain value names the entry
        names = {f.name for f in out_fields}
        key = next(k for k in PRIMITIVE_KEYS[mirrored.element or ""] if k in names)
        setattr(entry, key, item)
    else:
        for field in out_fields:
            if field.name not in KEY_FIELDS:
                continue
            for name in (field.name, *ALIASES.get(field.name, ())):
                if hasattr(item, name):
                    setattr(entry, field.name, getattr(item, name))
                    break
    _fill(entry, item if isinstance(item, Struct) else None, version, code)
    return entry
