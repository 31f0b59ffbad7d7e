"""Hypothesis strategies for the generated message classes, derived from their FIELDS.

`message(cls, version)` draws instances that are valid for that version of the wire format:

- a field the version lacks is left out of the constructor call, so it keeps its default;
- a field is None only where the version makes it nullable;
- a tagged field is sometimes left at its default (not written) and sometimes drawn;
- integers cover the full range of their type, strings are arbitrary Unicode text,
  floats are finite, records are opaque random bytes;
- arrays and nested structs stay small, so one example encodes in well under a millisecond;
- in flexible versions every struct sometimes carries unknown tagged fields, with tag
  numbers the version does not know, which the codec must carry through unchanged.

`non_default(spec)` gives a value that differs from a field's default (for the rules about
fields a version lacks).
"""

from __future__ import annotations

import functools
from uuid import UUID

from hypothesis import strategies as st

from moldau.protocol._runtime import FieldSpec, in_range

MAX_ITEMS = 2  # array sizes; nesting goes four levels deep in FetchResponse
MAX_TEXT = 8
MAX_BYTES = 12

INT_RANGES = {
    "int8": (-(2**7), 2**7 - 1),
    "int16": (-(2**15), 2**15 - 1),
    "uint16": (0, 2**16 - 1),
    "int32": (-(2**31), 2**31 - 1),
    "int64": (-(2**63), 2**63 - 1),
}


def is_flexible(cls, version: int) -> bool:
    return in_range(version, cls.FLEXIBLE_VERSIONS)


def is_tagged(spec: FieldSpec, version: int, flexible: bool) -> bool:
    return flexible and in_range(version, spec.versions) and in_range(version, spec.tagged)


def known_tags(struct_cls, version: int, flexible: bool) -> set[int]:
    return {f.tag for f in struct_cls.FIELDS if is_tagged(f, version, flexible)}


def primitive(kind: str) -> st.SearchStrategy:
    """Values of a non-null primitive type."""
    if kind in INT_RANGES:
        low, high = INT_RANGES[kind]
        return st.integers(low, high)
    if kind == "bool":
        return st.booleans()
    if kind == "float64":
        return st.floats(allow_nan=False, allow_infinity=False)
    if kind == "uuid":
        return st.uuids(allow_nil=True)
    if kind == "string":
        return st.text(max_size=MAX_TEXT)
    if kind in ("bytes", "records"):
        return st.binary(max_size=MAX_BYTES)
    raise AssertionError(f"no strategy for type {kind}")


def unknown_tag_lists(taken: set[int]) -> st.SearchStrategy:
    """Sorted (tag, raw value) pairs with tags the decoder will not recognise."""
    tags = st.integers(0, 300).filter(lambda t: t not in taken) | st.integers(10_000, 2**31 - 1)
    entries = st.lists(
        st.tuples(tags, st.binary(max_size=6)), max_size=2, unique_by=lambda item: item[0]
    )
    return entries.map(lambda items: sorted(items) or None)


def field_value(spec: FieldSpec, version: int, flexible: bool, unknown_tags: bool, tagged: bool):
    if spec.type == "struct":
        base = struct(spec.struct, version, flexible, unknown_tags, tagged)
    elif spec.type == "array":
        if spec.element == "struct":
            element = struct(spec.struct, version, flexible, unknown_tags, tagged)
        else:
            element = primitive(spec.element)
        base = st.lists(element, max_size=MAX_ITEMS)
    else:
        base = primitive(spec.type)
    if in_range(version, spec.nullable):
        return st.none() | base
    return base


@functools.cache
def struct(struct_cls, version: int, flexible: bool, unknown_tags: bool = True,
           tagged: bool = True):
    """Instances of a struct (or message) class at one version of its message; with
    tagged=False, tagged fields stay at their defaults (nothing in the tag sections)."""
    required = {}
    optional = {}
    for spec in struct_cls.FIELDS:
        if not in_range(version, spec.versions):
            continue  # the version lacks it: the constructor default stays
        value = field_value(spec, version, flexible, unknown_tags, tagged)
        if is_tagged(spec, version, flexible):
            if tagged:
                optional[spec.name] = value
        else:
            required[spec.name] = value
    kwargs = st.fixed_dictionaries(required, optional=optional)
    if not (flexible and unknown_tags):
        return kwargs.map(lambda kw: struct_cls(**kw))
    taken = known_tags(struct_cls, version, flexible)
    return st.tuples(kwargs, unknown_tag_lists(taken)).map(
        lambda pair: _with_unknown(struct_cls(**pair[0]), pair[1])
    )


def _with_unknown(obj, tags):
    obj._unknown_tags = tags
    return obj


def message(cls, version: int, *, unknown_tags: bool = True, tagged: bool = True):
    return struct(cls, version, is_flexible(cls, version), unknown_tags, tagged)


# --- deterministic helpers ------------------------------------------------------------------


def non_default(spec: FieldSpec):
    """A value that differs from the field's default and is valid in itself."""
    kind = spec.type
    default = spec.default
    if kind in INT_RANGES:
        low, high = INT_RANGES[kind]
        return default + 1 if default < high else low
    if kind == "bool":
        return not default
    if kind == "float64":
        return default + 1.5
    if kind == "uuid":
        return UUID(int=0x1234)
    if kind == "string":
        return "x" if default != "x" else "y"
    if kind in ("bytes", "records"):
        return b"\x01"
    if kind == "array":
        if spec.element == "struct":
            return [spec.struct()]
        return [non_default_element(spec.element)]
    if kind == "struct":
        value = spec.struct()
        first = value.FIELDS[0]
        setattr(value, first.name, non_default(first))
        return value
    raise AssertionError(kind)


def non_default_element(kind: str):
    return {"string": "e", "bytes": b"e", "uuid": UUID(int=7), "bool": True,
            "float64": 1.0}.get(kind, 1)

