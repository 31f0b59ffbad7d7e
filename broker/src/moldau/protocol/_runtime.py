"""Runtime support for the generated message classes in moldau.protocol.generated.

The generator (broker/codegen) writes one straight-line decode and encode function per
struct and wire layout; those functions call the helpers here for everything that needs
a length check, so the checks live in one place. Decoders work on a memoryview and a
position and return (value, new position); encoders append to a bytearray.

Every decode failure raises ProtocolError. Helpers raise it directly for the cases they
detect; struct.error, IndexError and UnicodeDecodeError raised deeper are translated by
Message.decode, so a truncated or malformed buffer never escapes as anything else.
"""

from __future__ import annotations

import builtins
import struct
from collections.abc import Callable
from operator import attrgetter
from typing import Any, ClassVar, NamedTuple, Self
from uuid import UUID

from .errors import ProtocolError, UnsupportedVersionError
from .primitives import read_uvarint, write_uvarint

INT16 = struct.Struct(">h")
INT32 = struct.Struct(">i")
ZERO_UUID = UUID(int=0)
_ZERO_UUID_BYTES = bytes(16)
UNSET: Any = type("Unset", (), {"__repr__": lambda self: "UNSET"})()  # "use the default"

# Exceptions that mean "these bytes are not a valid message" when raised while decoding.
_DECODE_FAILURES = (struct.error, IndexError, ValueError, OverflowError, TypeError)


class FieldSpec(NamedTuple):
    """What the generator knew about one field; used by tests and tools, not by codecs."""

    name: str  # Python attribute name
    json_name: str  # name in Kafka's message definition
    type: str  # int8..int64, uint16, float64, bool, uuid, string, bytes, records, array, struct
    element: str | None  # element type of an array: a primitive name or "struct"
    struct: builtins.type | None  # the generated class of a struct or struct-array field
    versions: tuple[int, int] | None
    nullable: tuple[int, int] | None
    tagged: tuple[int, int] | None
    tag: int | None
    ignorable: bool
    default: Any  # the default of a scalar field; None for arrays and structs


def in_range(version: int, span: tuple[int, int] | None) -> bool:
    return span is not None and span[0] <= version <= span[1]


# Struct.__eq__'s getter of (every field, _unknown_tags), per class
_FIELD_GETTERS: dict[type, Callable[[Any], tuple[Any, ...]]] = {}


class Struct:
    """Base of every generated struct: equality by fields and a readable repr."""

    __slots__ = ("_unknown_tags",)
    _unknown_tags: list[tuple[int, bytes]] | None
    FIELDS: ClassVar[tuple[FieldSpec, ...]] = ()

    def __eq__(self, other: object) -> bool:
        cls = type(self)
        if type(other) is not cls:
            return NotImplemented
        if other is self:
            return True
        # The encoders compare every struct-typed tagged field with its default: one
        # C-level getter of all fields per class, not a generator of getattr calls.
        fields = _FIELD_GETTERS.get(cls)
        if fields is None:
            fields = _FIELD_GETTERS[cls] = attrgetter(
                *(f.name for f in cls.FIELDS), "_unknown_tags")
        return bool(fields(self) == fields(other))

    __hash__ = None  # type: ignore[assignment]  # mutable

    def __repr__(self) -> str:
        inner = ", ".join(f"{f.name}={getattr(self, f.name)!r}" for f in self.FIELDS)
        return f"{type(self).__qualname__}({inner})"


class Message(Struct):
    """Base of every generated top-level message (request, response, header or data)."""

    __slots__ = ()
    NAME: ClassVar[str]
    API_KEY: ClassVar[int | None] = None
    VALID_VERSIONS: ClassVar[tuple[int, int]]
    FLEXIBLE_VERSIONS: ClassVar[tuple[int, int] | None]
    _DECODERS: ClassVar[tuple]
    _ENCODERS: ClassVar[tuple]

    @classmethod
    def _codec_index(cls, version: int) -> int:
        low, high = cls.VALID_VERSIONS
        if not low <= version <= high:
            raise UnsupportedVersionError(
                f"{cls.NAME} has no version {version} (valid: {low}-{high})"
            )
        return version - low

    @classmethod
    def decode_from(cls, buf: memoryview, pos: int, version: int) -> tuple[Self, int]:
        """Decode one message starting at pos; return (message, position after it)."""
        decoder = cls._DECODERS[cls._codec_index(version)]
        try:
            return decoder(buf, pos)
        except (ProtocolError, *_DECODE_FAILURES) as exc:
            raise decode_failure(cls.NAME, version, exc) from None

    @classmethod
    def decode(cls, data: bytes | bytearray | memoryview, version: int) -> Self:
        """Decode a whole buffer that must hold exactly one message of this version."""
        buf = data if isinstance(data, memoryview) else memoryview(data)
        msg, end = cls.decode_from(buf, 0, version)
        if end != len(buf):
            raise ProtocolError(
                f"{cls.NAME} v{version}: {len(buf) - end} unexpected bytes after the message"
            )
        return msg

    def encode_into(self, out: bytearray, version: int) -> None:
        encoder = self._ENCODERS[self._codec_index(version)]
        try:
            encoder(self, out)
        except (ProtocolError, *_ENCODE_FAILURES) as exc:
            raise encode_failure(self.NAME, version, exc) from None

    def encode(self, version: int) -> bytes:
        out = bytearray()
        self.encode_into(out, version)
        return bytes(out)


def decode_failure(name: str, version: int, exc: Exception) -> ProtocolError:
    """The ProtocolError a decoder's exception becomes (callers that run the generated
    decoders directly, such as moldau.protocol.headers.decode_request, raise the same)."""
    if isinstance(exc, ProtocolError):
        return ProtocolError(f"{name} v{version}: {exc}")
    return ProtocolError(f"{name} v{version}: malformed or truncated: {exc}")


# Exceptions that mean "this message cannot be written in this version".
_ENCODE_FAILURES = (struct.error, TypeError, AttributeError, ValueError, OverflowError)


def encode_failure(name: str, version: int, exc: Exception) -> ProtocolError:
    """The ProtocolError an encoder's exception becomes (see decode_failure)."""
    if isinstance(exc, ProtocolError):
        return type(exc)(f"{name} v{version}: {exc}")
    return ProtocolError(f"cannot encode {name} v{version}: {exc}")


# --- decoding helpers -------------------------------------------------------------------


def _take(buf: memoryview, pos: int, size: int, what: str) -> int:
    end = pos + size
    if end > len(buf):
        raise ProtocolError(f"{what} of {size} bytes at byte {pos} runs past the end ({len(buf)})")
    return end


def bad_length(what: str, pos: int, n: int, size: int) -> ProtocolError:
    """The error of a generated decoder that read an impossible length for field `what`."""
    if n == -1:
        return ProtocolError(f"{what} is null at byte {pos}, but it is not nullable")
    if n < 0 or pos + n <= size:  # negative, or over a type's limit (32767 for strings)
        return ProtocolError(f"{what} has invalid length {n} at byte {pos}")
    return ProtocolError(
        f"{what} of {n} bytes at byte {pos} runs past the end of the {size}-byte buffer"
    )


def bad_count(what: str, pos: int, n: int) -> ProtocolError:
    return ProtocolError(
        f"{what}: array of {n} items at byte {pos} cannot fit in the remaining bytes"
    )


# Topic ids decoded before: every follower fetch and its answer carry the same few, and
# UUID(bytes=...) runs a Python-level __init__ each time. UUIDs are immutable; the cache
# starts over when it is full.
_UUIDS: dict[bytes, UUID] = {_ZERO_UUID_BYTES: ZERO_UUID}
_UUIDS_MAX = 4096


def as_uuid(raw: bytes) -> UUID:
    found = _UUIDS.get(raw)
    if found is None:
        if len(_UUIDS) >= _UUIDS_MAX:
            _UUIDS.clear()
            _UUIDS[_ZERO_UUID_BYTES] = ZERO_UUID
        found = _UUIDS[raw] = UUID(bytes=raw)
    return found


_ARRAY_STRUCTS: dict[tuple[str, int], struct.Struct] = {}
_CACHED_ARRAY_MAX = 64  # replica lists and the like; longer arrays are rare


def _array_struct(code: str, n: int) -> struct.Struct:
    packer = _ARRAY_STRUCTS.get((code, n))
    if packer is None:
        packer = struct.Struct(f">{n}{code}")
        if n <= _CACHED_ARRAY_MAX:
            _ARRAY_STRUCTS[(code, n)] = packer
    return packer


def read_fixed_array(
    buf: memoryview, pos: int, n: int, code: str, size: int
) -> tuple[list, int]:
    """An array of n fixed-size numbers in one unpack call."""
    end = pos + n * size
    if end > len(buf):
        raise ProtocolError(f"array of {n} items at byte {pos} runs past the end ({len(buf)})")
    return list(_array_struct(code, n).unpack_from(buf, pos)), end


def read_uuid_array(buf: memoryview, pos: int, n: int) -> tuple[list, int]:
    end = _take(buf, pos, n * 16, "uuid array")
    return [UUID(bytes=bytes(buf[p : p + 16])) for p in range(pos, end, 16)], end


def read_tag_header(buf: memoryview, pos: int) -> tuple[int, int, int]:
    """(tag, size, position of the value) of one tagged field."""
    tag, pos = read_uvarint(buf, pos)
    size, pos = read_uvarint(buf, pos)
    _take(buf, pos, size, "tagged field")
    return tag, size, pos


def check_tag_end(tag: int, expected_end: int, actual_end: int) -> None:
    if expected_end != actual_end:
        raise ProtocolError(
            f"tagged field {tag} declares {expected_end - actual_end} bytes more than its value"
            if expected_end > actual_end
            else f"tagged field {tag} value runs past its declared size"
        )


def keep_unknown_tag(owner: Struct, tag: int, value: memoryview) -> None:
    """Preserve a tagged field this version does not know, so re-encoding keeps it."""
    if owner._unknown_tags is None:
        owner._unknown_tags = []
    owner._unknown_tags.append((tag, bytes(value)))


def read_unknown_tags(owner: Struct, buf: memoryview, pos: int) -> int:
    """The tagged-field section of a struct that has no known tagged fields."""
    n, pos = read_uvarint(buf, pos)
    for _ in range(n):
        tag, size, pos = read_tag_header(buf, pos)
        keep_unknown_tag(owner, tag, buf[pos : pos + size])
        pos += size
    return pos


# --- encoding helpers -------------------------------------------------------------------


def _utf8(value: str) -> bytes:
    if not isinstance(value, str):
        raise TypeError(f"expected str, got {type(value).__name__}")
    return value.encode("utf-8")


def write_string(out: bytearray, value: str) -> None:
    data = _utf8(value)
    if len(data) > 0x7FFF:
        raise ProtocolError(f"string of {len(data)} bytes is longer than 32767")
    out += INT16.pack(len(data))
    out += data


def write_nullable_string(out: bytearray, value: str | None) -> None:
    if value is None:
        out += b"\xff\xff"
    else:
        write_string(out, value)


def write_compact_string(out: bytearray, value: str) -> None:
    data = _utf8(value)
    if len(data) > 0x7FFF:
        raise ProtocolError(f"string of {len(data)} bytes is longer than 32767")
    write_uvarint(out, len(data) + 1)
    out += data


def write_compact_nullable_string(out: bytearray, value: str | None) -> None:
    if value is None:
        out.append(0)
    else:
        write_compact_string(out, value)


# A bytes or records value is bytes-like, or an object that stands in for bytes that
# are not in memory (the broker's FileRecords, a range of a segment file): it has a
# len(), and the output buffer takes it with `splice(value)`, noting where the bytes
# belong (moldau.server.responses.SpliceBuffer). A plain bytearray has no splice(): such
# a value cannot be encoded into it.


def _write_bytes_value(out: bytearray, value: Any) -> None:  # Any: bytes-like or spliced (above)
    kind = type(value)
    if kind is bytes or kind is memoryview or kind is bytearray:
        out += value
        return
    splice = getattr(out, "splice", None)
    if splice is None:
        out += value  # other bytes-like values; anything else fails here
    else:
        splice(value)


def write_bytes(out: bytearray, value: bytes) -> None:
    out += INT32.pack(len(value))
    _write_bytes_value(out, value)


def write_nullable_bytes(out: bytearray, value: bytes | None) -> None:
    if value is None:
        out += b"\xff\xff\xff\xff"
    else:
        write_bytes(out, value)


def write_compact_bytes(out: bytearray, value: bytes) -> None:
    write_uvarint(out, len(value) + 1)
    _write_bytes_value(out, value)


def write_compact_nullable_bytes(out: bytearray, value: bytes | None) -> None:
    if value is None:
        out.append(0)
    else:
        write_compact_bytes(out, value)


def write_array_length(out: bytearray, value: list | None) -> None:
    out += INT32.pack(-1 if value is None else len(value))


def write_compact_array_length(out: bytearray, value: list | None) -> None:
    write_uvarint(out, 0 if value is None else len(value) + 1)


def write_fixed_array(out: bytearray, value: list, code: str) -> None:
    out += _array_struct(code, len(value)).pack(*value)


def write_uuid_array(out: bytearray, value: list) -> None:
    for item in value:
        out += item.bytes


def write_tagged(out: bytearray, tags: list[tuple[int, bytes]]) -> None:
    """Write a tagged-field section from (tag, encoded value) pairs, sorted by tag."""
    if not tags:  # the common case: no tagged field differs from its default
        out.append(0)
        return
    write_uvarint(out, len(tags))
    for tag, data in sorted(tags, key=lambda item: item[0]):
        write_uvarint(out, tag)
        write_uvarint(out, len(data))
        out += data


# The encoder of Message adds the message name and version to these.
def null_in_non_nullable(owner: str, field: str) -> UnsupportedVersionError:
    return UnsupportedVersionError(f"{owner}.{field} is null, which this version forbids")


def tagged_fields_unsupported(owner: str) -> UnsupportedVersionError:
    return UnsupportedVersionError(
        f"{owner} has unknown tagged fields, which this version cannot carry"
    )


def non_default_absent(owner: str, field: str) -> UnsupportedVersionError:
    return UnsupportedVersionError(
        f"{owner}.{field} holds a non-default value that this version cannot carry"
    )


class ApiSpec:
    """One row of the generated API table (moldau.protocol.generated.api.APIS).

    The message classes are imported on first use, so importing the table (and the
    header codec) does not load all 176 message modules.
    """

    __slots__ = (
        "_request",
        "_request_name",
        "_response",
        "_response_name",
        "flexible_min",
        "key",
        "latest_unstable",
        "listeners",
        "max_version",
        "min_version",
        "name",
    )

    def __init__(
        self,
        key: int,
        name: str,
        request_name: str,
        response_name: str,
        min_version: int,
        max_version: int,
        flexible_min: int | None,  # first flexible version; None when none is flexible
        listeners: tuple[str, ...],  # "zkBroker", "broker", "controller"
        latest_unstable: bool,  # the newest version is still in development in Kafka 3.9
    ) -> None:
        self.key = key
        self.name = name
        self._request_name = request_name
        self._response_name = response_name
        self.min_version = min_version
        self.max_version = max_version
        self.flexible_min = flexible_min
        self.listeners = listeners
        self.latest_unstable = latest_unstable
        self._request: type[Message] | None = None
        self._response: type[Message] | None = None

    @property
    def request(self) -> type[Message]:
        if self._request is None:
            self._request = _message_class(self._request_name)
        return self._request

    @property
    def response(self) -> type[Message]:
        if self._response is None:
            self._response = _message_class(self._response_name)
        return self._response

    def __repr__(self) -> str:
        return f"ApiSpec({self.key}, {self.name!r}, v{self.min_version}-{self.max_version})"


def _message_class(name: str) -> type[Message]:
    from moldau.protocol import generated  # the lazy index; imports one module

    return getattr(generated, name)
