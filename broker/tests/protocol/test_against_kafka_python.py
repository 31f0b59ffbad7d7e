"""Golden bytes from an independent implementation: kafka-python's protocol classes.

kafka-python 3.x builds its message classes from its own copy of Kafka's JSON definitions
(kafka.protocol.{metadata,producer,consumer,admin}, and kafka.protocol.sasl) with its own
encoder and decoder, and keeps older hand-written classes in kafka.protocol.old. For every
message and version both sides define, the test draws values from our schema, converts
them field by field (matched by their names in the JSON), and checks both directions:
our bytes equal kafka-python's, and each side decodes the other's bytes to the same values.

kafka-python's JSON is newer than Kafka 3.9's: a version is compared only where it is
valid in both and the wire layouts agree (same fields in the same order, types,
nullability, tags and flexibility); other versions are skipped with the first difference
as the reason and counted in test_coverage.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import struct as _struct
from uuid import UUID

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis_budget import examples

from moldau.protocol import generated as messages
from moldau.protocol._runtime import ZERO_UUID, in_range
from moldau.protocol.generated.api import APIS

try:
    from . import strategies
except ImportError:
    import strategies

kafka_protocol = pytest.importorskip("kafka.protocol", reason="kafka-python is not installed")
from kafka.protocol.api_data import ApiData  # noqa: E402
from kafka.protocol.api_message import ApiMessage  # noqa: E402
from kafka.protocol.old import types as old_types  # noqa: E402
from kafka.protocol.old.api import Request as OldRequest  # noqa: E402
from kafka.protocol.old.api import Response as OldResponse  # noqa: E402
from kafka.protocol.schemas.fields.codecs import BitField  # noqa: E402

CROSS = settings(
    max_examples=examples(10),
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def kafka_python_classes() -> dict[str, type]:
    """kafka-python's JSON-driven request, response and data classes, by message name."""
    found = {}
    for info in pkgutil.walk_packages(kafka_protocol.__path__, "kafka.protocol."):
        if ".old" in info.name or info.name.endswith(("generate_stubs", "parser")):
            continue
        module = importlib.import_module(info.name)
        for obj in vars(module).values():
            if (
                inspect.isclass(obj)
                and issubclass(obj, (ApiMessage, ApiData))
                and obj.__dict__.get("_json") is not None
                and getattr(obj, "_class_version", None) is None
            ):
                found[obj._json["name"]] = obj
    return found


KP = kafka_python_classes()
OURS = {name: getattr(messages, name) for name in messages.__all__}


def declared_versions(kp_cls) -> tuple[int, int]:
    """The validVersions of kafka-python's JSON (its classes accept 0 and up regardless)."""
    text = kp_cls._json["validVersions"]
    low, _, high = text.partition("-")
    return int(low), int(high or low)


def is_kp_flexible(kp_cls, version: int) -> bool:
    return kp_cls.flexible_version_q(version)


# --- matching fields and comparing wire layouts ------------------------------------------


def kp_fields(kp_struct) -> list:
    # The name map holds the field objects that carry kafka-python's nested data classes.
    return list(kp_struct.fields.values())


def kp_field(kp_struct, spec):
    """kafka-python's field for one of ours, by JSON name. kafka-python renames the
    authorized-operations bitfields to `authorized_operations` (json_patch)."""
    for field in kp_fields(kp_struct):
        if field._name == spec.json_name:
            return field
    if spec.json_name.endswith("AuthorizedOperations"):
        for field in kp_fields(kp_struct):
            if field._name == "authorized_operations":
                return field
    return None


def kp_type(field) -> str:
    text = field._json["type"]
    inner = text[2:] if text.startswith("[]") else text
    if inner[:1].isupper():
        inner = "struct"
    if inner == "bitfield":
        inner = "int32"  # the same four bytes, decoded to a set of bits
    return "array:" + inner if text.startswith("[]") else inner


def our_type(spec) -> str:
    return "array:" + spec.element if spec.type == "array" else spec.type


def layout_difference(struct_cls, kp_struct, version: int, flexible: bool, where: str):
    """None when both sides put the same fields on the wire at this version, else a reason."""
    ours = [f for f in struct_cls.FIELDS if in_range(version, f.versions)]
    theirs = [f for f in kp_fields(kp_struct) if f.for_version_q(version)]
    matched = []
    for spec in ours:
        field = kp_field(kp_struct, spec)
        if field is None or not field.for_version_q(version):
            return f"{where}.{spec.json_name} is missing in kafka-python's v{version}"
        matched.append(field)
    extra = [f._name for f in theirs if f not in matched]
    if extra:
        return f"{where}: kafka-python's v{version} has extra fields {extra}"
    untagged = [s for s in ours if not strategies.is_tagged(s, version, flexible)]
    kp_untagged = [f for f in theirs if not (flexible and f.tagged_field_q(version))]
    if [kp_field(kp_struct, s) for s in untagged] != kp_untagged:
        return f"{where}: field order differs at v{version}"
    for spec, field in zip(ours, matched, strict=True):
        name = f"{where}.{spec.json_name}"
        if our_type(spec) != kp_type(field):
            return f"{name}: type {our_type(spec)} vs {kp_type(field)}"
        if in_range(version, spec.nullable) != field.nullable_for_version_q(version):
            return f"{name}: nullability differs at v{version}"
        tagged = strategies.is_tagged(spec, version, flexible)
        if tagged != (flexible and field.tagged_field_q(version)):
            return f"{name}: tagged in one schema only at v{version}"
        if tagged and spec.tag != field.tag:
            return f"{name}: tag {spec.tag} vs {field.tag}"
        if field._flexible_versions is not None and spec.name != "client_id":
            return f"{name}: kafka-python overrides flexibleVersions"
        if spec.struct is not None:
            reason = layout_difference(spec.struct, field, version, flexible, name)
            if reason:
                return reason
    return None


def comparison(name: str, version: int) -> str | None:
    """None when (name, version) can be compared, else why not."""
    ours, kp_cls = OURS[name], KP[name]
    low, high = declared_versions(kp_cls)
    if not low <= version <= high:
        return f"kafka-python's {name} schema defines v{low}-{high} only"
    if strategies.is_flexible(ours, version) != is_kp_flexible(kp_cls, version):
        return f"{name} v{version}: flexible in one schema only"
    return layout_difference(ours, kp_cls._struct, version, is_kp_flexible(kp_cls, version), name)


COMMON = sorted(set(KP) & set(OURS))
ALL_PAIRS = [
    (name, v)
    for name in COMMON
    for v in range(OURS[name].VALID_VERSIONS[0], OURS[name].VALID_VERSIONS[1] + 1)
]
VERDICTS = {pair: comparison(*pair) for pair in ALL_PAIRS}
OUTSIDE = [p for p, why in VERDICTS.items() if why and "defines" in why]
IN_BOTH = [p for p in ALL_PAIRS if p not in OUTSIDE]
COMPARED = [p for p in IN_BOTH if VERDICTS[p] is None]


# --- converting values between the two object models ----------------------------------------


def to_kp(obj, kp_struct, version: int, data_class=None):
    defaults = type(obj)()
    kwargs = {}
    for spec in type(obj).FIELDS:
        if not in_range(version, spec.versions):
            continue
        value = getattr(obj, spec.name)
        if in_range(version, spec.tagged) and value == getattr(defaults, spec.name):
            # A tagged field at its default is not written. kafka-python's defaults for
            # tagged uuid and struct fields are None, so it would write ours: leave it out.
            continue
        field = kp_field(kp_struct, spec)
        kwargs[field.name] = value_to_kp(value, spec, field, version)
    if data_class is not None:
        return data_class(version=version, **kwargs)
    return kp_struct.data_class(**kwargs)


def value_to_kp(value, spec, field, version):
    if value is None:
        return None
    if spec.type == "struct":
        return to_kp(value, field, version)
    if spec.type == "array":
        if spec.element == "struct":
            return [to_kp(item, field, version) for item in value]
        return list(value)
    if field._json["type"] == "bitfield":
        return BitField.from_32_bit_field(value & 0xFFFFFFFF)
    if spec.type == "records":
        return bytes(value)
    return value


def from_kp(kobj, struct_cls, kp_struct, version: int):
    obj = struct_cls()
    for spec in struct_cls.FIELDS:
        if not in_range(version, spec.versions):
            continue
        field = kp_field(kp_struct, spec)
        value = getattr(kobj, field.name)
        absent_tagged_struct = (
            value is None and spec.type == "struct" and in_range(version, spec.tagged)
            and not in_range(version, spec.nullable)
        )
        if absent_tagged_struct:
            continue  # kafka-python's None for an absent tagged struct: keep our default
        setattr(obj, spec.name, value_from_kp(value, spec, field, version))
    return obj


def value_from_kp(value, spec, field, version):
    if spec.type == "uuid":
        return ZERO_UUID if value is None else UUID(str(value))
    if field._json["type"] == "bitfield":
        bits = 1 << 31 if value is None else sum(1 << b for b in value)
        return _struct.unpack(">i", _struct.pack(">I", bits))[0]
    if value is None:
        return None
    if spec.type == "struct":
        return from_kp(value, spec.struct, field, version)
    if spec.type == "array":
        if spec.element == "struct":
            return [from_kp(item, spec.struct, field, version) for item in value]
        return list(value)
    if spec.type in ("bytes", "records"):
        return bytes(value)
    return value


def kp_encode(kp_cls, kobj, version: int) -> bytes:
    if issubclass(kp_cls, ApiData):
        return bytes(kobj.encode(version=version, header=False))
    return bytes(kobj.encode(version=version))


def kp_decode(kp_cls, data: bytes, version: int):
    if issubclass(kp_cls, ApiData):
        return kp_cls.decode(data, version=version, header=False)
    return kp_cls.decode(data, version=version)


# --- the tests --------------------------------------------------------------------------------


def pair_id(pair) -> str:
    return f"{pair[0]}-v{pair[1]}"


@pytest.mark.parametrize("pair", IN_BOTH, ids=pair_id)
def test_same_bytes_as_kafka_python(pair):
    name, version = pair
    reason = VERDICTS[pair]
    if reason:
        pytest.skip(f"schemas differ: {reason}")
    ours, kp_cls = OURS[name], KP[name]

    @CROSS
    @given(strategies.message(ours, version, unknown_tags=False))
    def check(msg):
        if name == "ApiVersionsResponse":
            msg.error_code = 0  # kafka-python reads any error response as v0
        data = msg.encode(version)
        kobj = to_kp(msg, kp_cls._struct, version, data_class=kp_cls)
        assert kp_encode(kp_cls, kobj, version) == data
        assert from_kp(kp_decode(kp_cls, data, version), ours, kp_cls._struct, version) == msg
        assert ours.decode(data, version) == msg

    check()


# --- kafka-python's older hand-written classes (kafka.protocol.old) ---------------------------
#
# These are positional schemas written by hand, one class per version: a second, fully
# independent implementation, and the only one in kafka-python for the old versions that
# its newer JSON no longer defines (Produce v0-2, Fetch v0-3, ...). They know nothing of
# nullability or tagged fields (a flexible struct ends in a raw TaggedFields map), so the
# values drawn for them leave tagged fields at their defaults.

OLD_TYPES = {
    "int8": (old_types.Int8,),
    "int16": (old_types.Int16,),
    "int32": (old_types.Int32, old_types.BitField),
    "int64": (old_types.Int64,),
    "bool": (old_types.Boolean,),
    "uuid": (old_types.UUID,),
    "float64": (old_types.Float64,),
}


def old_classes() -> dict[tuple[str, int], type]:
    found = {}
    package = importlib.import_module("kafka.protocol.old")
    for info in pkgutil.iter_modules(package.__path__, "kafka.protocol.old."):
        module = importlib.import_module(info.name)
        for obj in vars(module).values():
            if (
                inspect.isclass(obj)
                and issubclass(obj, (OldRequest, OldResponse))
                and isinstance(obj.__dict__.get("API_VERSION", getattr(obj, "API_VERSION", None)),
                               int)
                and obj.API_KEY in APIS
            ):
                spec = APIS[obj.API_KEY]
                ours = spec.request if obj.is_request() else spec.response
                found[(ours.NAME, obj.API_VERSION)] = obj
    return found


def kind(t) -> type:
    return t if isinstance(t, type) else type(t)


def wire_fields(struct_cls, version: int, flexible: bool) -> list:
    return [
        f for f in struct_cls.FIELDS
        if in_range(version, f.versions) and not strategies.is_tagged(f, version, flexible)
    ]


def lone_field(spec, t, version: int, flexible: bool):
    """The only field of the struct elements of spec, where kafka-python's old class writes
    the array as an array of that field's type (the same bytes in non-flexible versions:
    MetadataRequest's topics are plain names there)."""
    if spec.element != "struct" or flexible or isinstance(t.array_of, old_types.Schema):
        return None
    fields = wire_fields(spec.struct, version, flexible)
    return fields[0] if len(fields) == 1 else None


def old_layout_difference(struct_cls, schema, version: int, flexible: bool, where: str):
    fields = wire_fields(struct_cls, version, flexible)
    types = list(schema.fields)
    if flexible:
        if not types or types[-1] is not old_types.TaggedFields:
            return f"{where}: no tagged-field section in kafka-python's old v{version}"
        types.pop()
    if len(types) != len(fields):
        return f"{where}: {len(fields)} fields vs {len(types)} in kafka-python's old v{version}"
    for spec, t in zip(fields, types, strict=True):
        name = f"{where}.{spec.json_name}"
        compact = flexible and spec.name != "client_id"
        if spec.type in OLD_TYPES:
            ok = kind(t) in OLD_TYPES[spec.type]
        elif spec.type == "string":
            ok = kind(t) is (old_types.CompactString if compact else old_types.String)
        elif spec.type in ("bytes", "records"):
            ok = kind(t) is (old_types.CompactBytes if compact else old_types.Bytes)
        elif spec.type == "struct":
            ok = isinstance(t, old_types.Schema)
            if ok:
                reason = old_layout_difference(spec.struct, t, version, flexible, name)
                if reason:
                    return reason
        else:  # array
            ok = kind(t) is (old_types.CompactArray if compact else old_types.Array)
            lone = lone_field(spec, t, version, flexible) if ok else None
            if lone is not None:
                ok = kind(t.array_of) in OLD_TYPES.get(lone.type, (old_types.String,))
            elif ok and spec.element == "struct":
                ok = isinstance(t.array_of, old_types.Schema)
                if ok:
                    reason = old_layout_difference(spec.struct, t.array_of, version, flexible,
                                                   name)
                    if reason:
                        return reason
            elif ok:
                ok = kind(t.array_of) in OLD_TYPES.get(spec.element, ()) or kind(t.array_of) is {
                    "string": old_types.CompactString if compact else old_types.String,
                }.get(spec.element)
        if not ok:
            return f"{name}: {spec.type} vs {kind(t).__name__} in kafka-python's old v{version}"
    return None


def to_old(obj, schema, version: int, flexible: bool) -> list:
    return [
        value_to_old(getattr(obj, spec.name), spec, t, version, flexible)
        for spec, t in zip(wire_fields(type(obj), version, flexible), schema.fields, strict=False)
    ]


def value_to_old(value, spec, t, version, flexible):
    if value is None:
        return None
    if spec.type == "struct":
        return tuple(to_old(value, t, version, flexible))
    if spec.type == "array":
        lone = lone_field(spec, t, version, flexible)
        if lone is not None:
            return [getattr(item, lone.name) for item in value]
        if spec.element == "struct":
            return [tuple(to_old(item, t.array_of, version, flexible)) for item in value]
        return list(value)
    if kind(t) is old_types.BitField:
        return BitField.from_32_bit_field(value & 0xFFFFFFFF)
    if spec.type == "records":
        return bytes(value)
    return value


def from_old(values, struct_cls, schema, version: int, flexible: bool):
    obj = struct_cls()
    specs = wire_fields(struct_cls, version, flexible)
    for spec, value, t in zip(specs, values, schema.fields, strict=False):
        setattr(obj, spec.name, value_from_old(value, spec, t, version, flexible))
    return obj


def value_from_old(value, spec, t, version, flexible):
    if spec.type == "uuid":
        return ZERO_UUID if value is None else value
    if kind(t) is old_types.BitField:
        bits = 1 << 31 if value is None else sum(1 << b for b in value)
        return _struct.unpack(">i", _struct.pack(">I", bits))[0]
    if value is None:
        return None
    if spec.type == "struct":
        return from_old(value, spec.struct, t, version, flexible)
    if spec.type == "array":
        lone = lone_field(spec, t, version, flexible)
        if lone is not None:
            return [spec.struct(**{lone.name: item}) for item in value]
        if spec.element == "struct":
            return [from_old(item, spec.struct, t.array_of, version, flexible) for item in value]
        return list(value)
    if spec.type in ("bytes", "records"):
        return bytes(value)
    return value


OLD = old_classes()
OLD_PAIRS = sorted(p for p in OLD if p[0] in OURS and in_range(p[1], OURS[p[0]].VALID_VERSIONS))
OLD_VERDICTS = {
    p: old_layout_difference(
        OURS[p[0]], OLD[p].SCHEMA, p[1], strategies.is_flexible(OURS[p[0]], p[1]), p[0]
    )
    for p in OLD_PAIRS
}
OLD_COMPARED = [p for p in OLD_PAIRS if OLD_VERDICTS[p] is None]


@pytest.mark.parametrize("pair", OLD_PAIRS, ids=pair_id)
def test_same_bytes_as_kafka_python_old_classes(pair):
    name, version = pair
    reason = OLD_VERDICTS[pair]
    if reason:
        pytest.skip(f"layouts differ: {reason}")
    ours, old_cls = OURS[name], OLD[pair]
    flexible = strategies.is_flexible(ours, version)

    @CROSS
    @given(strategies.message(ours, version, unknown_tags=False, tagged=False))
    def check(msg):
        if name == "ApiVersionsResponse":
            msg.error_code = 0  # as above: an error response is read as v0
        data = msg.encode(version)
        theirs = old_cls(*to_old(msg, old_cls.SCHEMA, version, flexible))
        assert theirs.encode() == data
        decoded = old_cls.decode(data)
        values = [getattr(decoded, n) for n in old_cls.SCHEMA.names]
        assert from_old(values, ours, old_cls.SCHEMA, version, flexible) == msg
        assert ours.decode(data, version) == msg

    check()


def test_coverage():
    """What the cross-check covers; the floors catch a change that silently drops pairs."""
    skipped = [p for p in IN_BOTH if VERDICTS[p]]
    print(
        f"\nkafka-python cross-check: {len(COMMON)} messages in both, "
        f"{len(COMPARED)} (message, version) pairs compared, {len(skipped)} skipped "
        f"because the schemas differ, {len(OUTSIDE)} outside kafka-python's versions"
    )
    for pair in skipped:
        print(f"  skipped {pair_id(pair)}: {VERDICTS[pair]}")
    old_skipped = [p for p in OLD_PAIRS if OLD_VERDICTS[p]]
    print(
        f"kafka-python old classes: {len(OLD_COMPARED)} pairs compared, "
        f"{len(old_skipped)} skipped because the layouts differ"
    )
    for pair in old_skipped:
        print(f"  skipped {pair_id(pair)}: {OLD_VERDICTS[pair]}")
    either = set(COMPARED) | set(OLD_COMPARED)
    uncovered = sorted(set(OUTSIDE) - either)
    print(f"in total {len(either)} distinct pairs cross-checked; outside both: {uncovered}")
    assert len(COMMON) >= 100
    assert len(COMPARED) >= 440
    assert len(OLD_COMPARED) >= 200
