"""Round trips of every generated message class at every valid version, and the encoding
rules for fields a version cannot carry (Kafka's `ignorable`) and for nulls.

The instances come from hypothesis strategies derived from each class's FIELDS (see
strategies.py), so the test follows the schema: nothing here lists fields by hand.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis_budget import examples

from moldau.protocol import generated as messages
from moldau.protocol._runtime import Message, in_range
from moldau.protocol.errors import ProtocolError, UnsupportedVersionError
from moldau.protocol.generated import (
    MetadataRequest,
    ProduceRequest,
    RequestHeader,
)
from moldau.protocol.primitives import write_uvarint

try:
    from . import strategies
except ImportError:
    import strategies

CLASSES = [getattr(messages, name) for name in messages.__all__]
PAIRS = [
    (cls, version)
    for cls in CLASSES
    for version in range(cls.VALID_VERSIONS[0], cls.VALID_VERSIONS[1] + 1)
]
FLEXIBLE_PAIRS = [(cls, v) for cls, v in PAIRS if strategies.is_flexible(cls, v)]
ROUND_TRIP = settings(
    max_examples=examples(12),
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def pair_id(pair) -> str:
    cls, version = pair
    return f"{cls.NAME}-v{version}"


def test_every_message_and_version_is_covered():
    assert len(CLASSES) == 210
    assert all(issubclass(cls, Message) for cls in CLASSES)
    # Kafka 3.9 defines 700 (message, version) pairs across the three directories.
    assert len(PAIRS) == 700
    assert {cls.NAME for cls in CLASSES} >= {"ProduceRequest", "FetchResponse", "RequestHeader"}


@pytest.mark.parametrize("pair", PAIRS, ids=pair_id)
def test_round_trip(pair):
    cls, version = pair

    @ROUND_TRIP
    @given(strategies.message(cls, version))
    def check(msg):
        data = msg.encode(version)
        decoded = cls.decode(data, version)
        assert decoded == msg
        assert decoded.encode(version) == data
        # decode_from at an offset inside a larger buffer ends exactly after the message
        padded = memoryview(b"\xaa\xbb" + data + b"\xcc")
        again, end = cls.decode_from(padded, 2, version)
        assert end == 2 + len(data)
        assert again == msg

    check()


@pytest.mark.parametrize("pair", FLEXIBLE_PAIRS, ids=pair_id)
def test_unknown_tagged_field_in_bytes_survives(pair):
    """Bytes from a newer peer: a tagged field this version does not know is kept as raw
    bytes and written back unchanged, in tag order among the known ones."""
    cls, version = pair
    base = cls().encode(version)
    # A default instance writes no tagged fields: the message ends with an empty section.
    assert base[-1] == 0
    raw = bytes(range(200))  # longer than 127 bytes: a two-byte size varint
    section = bytearray()
    write_uvarint(section, 2)
    for tag, value in ((7000, b"\x01\x02"), (70000, raw)):
        write_uvarint(section, tag)
        write_uvarint(section, len(value))
        section += value
    data = base[:-1] + bytes(section)
    decoded = cls.decode(data, version)
    assert decoded._unknown_tags == [(7000, b"\x01\x02"), (70000, raw)]
    assert decoded.encode(version) == data
    decoded._unknown_tags = None
    assert decoded.encode(version) == base


def test_unknown_tags_interleave_with_known_tags():
    # FetchRequest v12+ knows tag 0 (ClusterId); tags 1 and 2 are known from v15 on.
    msg = messages.FetchRequest(cluster_id="c")
    msg._unknown_tags = [(5, b"five"), (1, b"one")]
    data = msg.encode(12)
    decoded = messages.FetchRequest.decode(data, 12)
    assert decoded.cluster_id == "c"
    assert decoded._unknown_tags == [(1, b"one"), (5, b"five")]
    assert decoded.encode(12) == data
    # The tag section lists tags in ascending order: 0 (known), then 1 and 5 (unknown).
    assert data.endswith(b"\x03\x00\x02\x02c\x01\x03one\x05\x04five")


def test_unknown_tags_cannot_be_written_in_a_version_without_tagged_fields():
    msg = ProduceRequest()
    msg._unknown_tags = [(3, b"x")]
    with pytest.raises(UnsupportedVersionError, match="tagged"):
        msg.encode(8)
    assert ProduceRequest.decode(msg.encode(9), 9)._unknown_tags == [(3, b"x")]


# --- fields a version cannot carry, and nulls -------------------------------------------


def struct_paths(cls, version: int):
    """(path, struct class) for every struct reachable at this version; a path is the list of
    fields leading to it from the message (struct and struct-array fields present in the
    version). Each struct class appears once."""
    found = {cls: []}
    queue = [cls]
    while queue:
        current = queue.pop(0)
        for spec in current.FIELDS:
            if spec.struct is None or not in_range(version, spec.versions):
                continue
            if spec.struct not in found:
                found[spec.struct] = [*found[current], spec]
                queue.append(spec.struct)
    return [(path, struct_cls) for struct_cls, path in found.items()]


def fresh(struct_cls, version: int):
    """A default instance that the version can write. Like Kafka's, a records field defaults
    to null even where the version does not allow null, so give those empty records."""
    obj = struct_cls()
    for spec in struct_cls.FIELDS:
        if spec.type == "records" and not in_range(version, spec.nullable):
            setattr(obj, spec.name, b"")
    return obj


def build(cls, version, path, leaf, value):
    """A default message with one element or value along path, and leaf set to value."""
    root = fresh(cls, version)
    obj = root
    for spec in path:
        child = fresh(spec.struct, version)
        setattr(obj, spec.name, [child] if spec.type == "array" else child)
        obj = child
    setattr(obj, leaf.name, value)
    return root


def follow(obj, path):
    for spec in path:
        value = getattr(obj, spec.name)
        obj = value[0] if spec.type == "array" else value
    return obj


def absent_cases():
    for cls, version in PAIRS:
        for path, struct_cls in struct_paths(cls, version):
            for leaf in struct_cls.FIELDS:
                if not in_range(version, leaf.versions):
                    yield cls, version, path, leaf


def null_cases():
    for cls, version in PAIRS:
        for path, struct_cls in struct_paths(cls, version):
            for leaf in struct_cls.FIELDS:
                nullable_type = leaf.type in ("string", "bytes", "records", "array", "struct")
                if nullable_type and in_range(version, leaf.versions):
                    yield cls, version, path, leaf


ABSENT = list(absent_cases())
NULLS = list(null_cases())


def test_schema_has_the_cases_the_rules_are_about():
    ignorable = [c for c in ABSENT if c[3].ignorable]
    strict = [c for c in ABSENT if not c[3].ignorable]
    assert len(ignorable) > 100 and len(strict) > 100
    assert any(not in_range(c[1], c[3].nullable) for c in NULLS)
    assert any(in_range(c[1], c[3].nullable) for c in NULLS)


def test_non_default_value_in_a_version_without_the_field():
    """Kafka's rule: writing a non-default value for a field the version lacks fails unless
    the field is ignorable, in which case the value is silently dropped."""
    checked = 0
    for cls, version, path, leaf in ABSENT:
        at_default = build(cls, version, path, leaf, getattr(cls_default(path, cls), leaf.name))
        at_default.encode(version)  # the default is always fine
        msg = build(cls, version, path, leaf, strategies.non_default(leaf))
        where = f"{cls.NAME} v{version} {'.'.join(s.name for s in [*path, leaf])}"
        if leaf.ignorable:
            data = msg.encode(version)
            decoded = cls.decode(data, version)
            owner = follow(decoded, path)
            assert getattr(owner, leaf.name) == getattr(cls_default(path, cls), leaf.name), where
        else:
            with pytest.raises(UnsupportedVersionError) as info:
                msg.encode(version)
            assert leaf.name in str(info.value), where
            assert f"v{version}" in str(info.value), where
        checked += 1
    assert checked == len(ABSENT)


def cls_default(path, cls):
    """A fresh instance of the struct at the end of path (its defaults)."""
    return path[-1].struct() if path else cls()


def test_null_only_where_the_version_allows_it():
    for cls, version, path, leaf in NULLS:
        msg = build(cls, version, path, leaf, None)
        where = f"{cls.NAME} v{version} {'.'.join(s.name for s in [*path, leaf])}"
        if in_range(version, leaf.nullable):
            decoded = cls.decode(msg.encode(version), version)
            assert getattr(follow(decoded, path), leaf.name) is None, where
        else:
            with pytest.raises(UnsupportedVersionError, match="null") as info:
                msg.encode(version)
            assert leaf.name in str(info.value), where


def test_produce_transactional_id_examples():
    # TransactionalId exists from v3 on and is not ignorable.
    for version in (0, 1, 2):
        assert ProduceRequest(transactional_id=None).encode(version) == ProduceRequest().encode(
            version
        )
        with pytest.raises(UnsupportedVersionError, match="transactional_id"):
            ProduceRequest(transactional_id="txn").encode(version)
    data = ProduceRequest(transactional_id="txn").encode(3)
    assert ProduceRequest.decode(data, 3).transactional_id == "txn"


def test_ignorable_examples():
    # RequestHeader.ClientId (v1+) is ignorable: header v0 just leaves it out.
    header = RequestHeader(request_api_key=7, request_api_version=0, correlation_id=5,
                           client_id="admin")
    assert header.encode(0) == b"\x00\x07\x00\x00\x00\x00\x00\x05"
    # MetadataRequest.AllowAutoTopicCreation (v4+, default true) is not ignorable.
    assert MetadataRequest(allow_auto_topic_creation=True).encode(3)
    with pytest.raises(UnsupportedVersionError, match="allow_auto_topic_creation"):
        MetadataRequest(allow_auto_topic_creation=False).encode(3)
    # A null topics list (all topics) needs MetadataRequest v1+.
    with pytest.raises(UnsupportedVersionError, match="topics"):
        MetadataRequest(topics=None).encode(0)
    assert MetadataRequest(topics=None).encode(1) == b"\xff\xff\xff\xff"


def test_encoding_errors_are_protocol_errors():
    with pytest.raises(ProtocolError, match="ProduceRequest v3"):
        ProduceRequest(acks=1 << 20).encode(3)  # does not fit int16
    with pytest.raises(ProtocolError):
        ProduceRequest(transactional_id=b"bytes").encode(3)
    with pytest.raises(UnsupportedVersionError, match="no version 12"):
        ProduceRequest().encode(12)
    with pytest.raises(ProtocolError, match="longer than 32767"):
        ProduceRequest(transactional_id="x" * 40000).encode(3)
    with pytest.raises(ProtocolError, match="longer than 32767"):
        ProduceRequest(transactional_id="x" * 40000).encode(9)


# --- wire details a round trip cannot see ----------------------------------------------------


def test_tagged_nullable_struct_uses_a_varint_marker():
    """Kafka writes a nullable struct inside a tagged field with a varint marker (0 = null,
    1 = present), not the int8 -1/1 of an untagged nullable struct. The default of
    ConsumerGroupMemberMetadataValue.ClassicMemberMetadata is the empty struct, so null is a
    non-default value and is written."""
    cls = messages.ConsumerGroupMemberMetadataValue
    base = cls().encode(0)
    assert base.endswith(b"\x00")  # the empty struct is the default: no tagged field
    null = cls(classic_member_metadata=None)
    data = null.encode(0)
    assert data == base[:-1] + b"\x01\x00\x01\x00"  # one tag: tag 0, size 1, marker 0
    assert cls.decode(data, 0).classic_member_metadata is None
    member = cls.ClassicMemberMetadata(session_timeout_ms=45000, supported_protocols=[
        cls.ClassicProtocol(name="range", metadata=b"\x00\x01")])
    data = cls(classic_member_metadata=member).encode(0)
    struct_bytes = (b"\x00\x00\xaf\xc8"  # session timeout
                    b"\x02"  # one protocol
                    b"\x06range\x03\x00\x01\x00"  # name, metadata, empty tags
                    b"\x00")  # the struct's empty tag section
    assert data == base[:-1] + b"\x01\x00" + bytes([1 + len(struct_bytes)]) + b"\x01" + (
        struct_bytes
    )
    assert cls.decode(data, 0).classic_member_metadata == member


def test_untagged_nullable_struct_uses_an_int8_marker():
    cls = messages.ConsumerGroupHeartbeatResponse
    data = cls(assignment=None).encode(0)
    assert data[-2:] == b"\xff\x00"  # null assignment, then the empty tag section
    assert cls.decode(data, 0).assignment is None
    present = cls(assignment=cls.Assignment()).encode(0)
    assert present[-4:] == b"\x01\x01\x00\x00"  # marker 1, empty partitions, tags, tags
