"""Read Kafka's JSON message definitions into a small model the emitter walks.

The definitions carry `//` comment lines, version ranges as strings ("0+", "3-7", "none"),
nested struct definitions inline, and shared structs under `commonStructs`.
"""

from __future__ import annotations

import json
import keyword
import re
from dataclasses import dataclass, field
from pathlib import Path

MAX_VERSION = 0x7FFF
FIXED_TYPES = {
    # type: (struct code, size)
    "int8": ("b", 1),
    "int16": ("h", 2),
    "int32": ("i", 4),
    "int64": ("q", 8),
    "uint16": ("H", 2),
    "float64": ("d", 8),
    "bool": ("?", 1),
    "uuid": ("16s", 16),
}
VARIABLE_TYPES = {"string", "bytes", "records"}
RESERVED_ATTRS = {"encode", "decode", "decode_from", "encode_into", "FIELDS", "NAME"}

Span = tuple[int, int] | None


def parse_versions(text: str | None) -> Span:
    if text is None or text == "none":
        return None
    if text.endswith("+"):
        return int(text[:-1]), MAX_VERSION
    if "-" in text:
        low, high = text.split("-")
        return int(low), int(high)
    return int(text), int(text)


def contains(span: Span, version: int) -> bool:
    return span is not None and span[0] <= version <= span[1]


def snake_case(name: str) -> str:
    """TopicData -> topic_data, ISRVersion -> isr_version; keywords get a trailing _."""
    text = re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1_\2", name)
    text = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", text).lower()
    return text + "_" if keyword.iskeyword(text) else text


@dataclass
class FieldDef:
    json_name: str
    attr: str
    type: str  # the JSON type string, e.g. "[]TopicData" or "int32"
    kind: str  # fixed type name, string, bytes, records, array or struct
    element: str | None  # arrays: primitive element type, or "struct"
    struct: StructDef | None
    versions: Span
    nullable: Span
    tagged: Span
    tag: int | None
    ignorable: bool
    default: object  # raw "default" from the JSON, or None
    flexible_override: Span | None  # a field-level flexibleVersions ("none" on ClientId)
    has_flexible_override: bool = False


@dataclass
class StructDef:
    name: str
    fields: list[FieldDef] = field(default_factory=list)


@dataclass
class MessageDef:
    name: str
    source: str  # "messages", "group-coordinator" or "transaction-coordinator"
    kind: str  # request, response, header or data
    api_key: int | None
    valid: tuple[int, int]
    flexible: Span
    listeners: tuple[str, ...]
    latest_unstable: bool
    root: StructDef
    structs: list[StructDef]  # every nested struct, in definition order


def load_json(path: Path) -> dict:
    text = path.read_text()
    text = re.sub(r"(?m)^\s*//.*$", "", text)
    return json.loads(text)


class _Builder:
    def __init__(self, message: str, common: dict[str, list[dict]]):
        self.message = message
        self.common = common
        self.structs: dict[str, StructDef] = {}
        self.order: list[StructDef] = []

    def struct(self, name: str, fields: list[dict] | None) -> StructDef:
        if fields is None:
            if name in self.structs:
                return self.structs[name]
            if name not in self.common:
                raise ValueError(f"{self.message}: struct {name} has no definition")
            fields = self.common[name]
        elif name in self.structs:
            raise ValueError(f"{self.message}: struct {name} is defined twice")
        struct = StructDef(name)
        self.structs[name] = struct
        self.order.append(struct)
        struct.fields = [self.field(raw) for raw in fields]
        seen = set()
        for f in struct.fields:
            if f.attr in seen or f.attr in RESERVED_ATTRS:
                raise ValueError(f"{self.message}.{name}: attribute name {f.attr} clashes")
            seen.add(f.attr)
        return struct

    def field(self, raw: dict) -> FieldDef:
        type_text = raw["type"]
        element = None
        struct = None
        if type_text.startswith("[]"):
            kind = "array"
            inner = type_text[2:]
            if inner in FIXED_TYPES or inner in VARIABLE_TYPES:
                element = inner
            else:
                element = "struct"
                struct = self.struct(inner, raw.get("fields"))
        elif type_text in FIXED_TYPES or type_text in VARIABLE_TYPES:
            kind = type_text
        else:
            kind = "struct"
            struct = self.struct(type_text, raw.get("fields"))
        tagged = parse_versions(raw.get("taggedVersions"))
        return FieldDef(
            json_name=raw["name"],
            attr=snake_case(raw["name"]),
            type=type_text,
            kind=kind,
            element=element,
            struct=struct,
            versions=parse_versions(raw["versions"]),
            nullable=parse_versions(raw.get("nullableVersions")),
            tagged=tagged,
            tag=None if raw.get("tag") is None else int(raw["tag"]),  # some files quote it
            ignorable=bool(raw.get("ignorable", False)),
            default=raw.get("default"),
            flexible_override=parse_versions(raw.get("flexibleVersions")),
            has_flexible_override="flexibleVersions" in raw,
        )


def load_message(path: Path) -> MessageDef:
    data = load_json(path)
    name = data["name"]
    common = {s["name"]: s["fields"] for s in data.get("commonStructs", [])}
    builder = _Builder(name, common)
    root = StructDef(name)
    root.fields = [builder.field(raw) for raw in data["fields"]]
    valid = parse_versions(data["validVersions"])
    assert valid is not None
    return MessageDef(
        name=name,
        source=path.parent.name,
        kind=data["type"],
        api_key=data.get("apiKey"),
        valid=valid,
        flexible=parse_versions(data["flexibleVersions"]),
        listeners=tuple(data.get("listeners", ())),
        latest_unstable=bool(data.get("latestVersionUnstable", False)),
        root=root,
        structs=builder.order,
    )


def load_all(protocol_dir: Path) -> list[MessageDef]:
    messages = []
    for sub in ("messages", "group-coordinator", "transaction-coordinator"):
        for path in sorted((protocol_dir / sub).glob("*.json")):
            messages.append(load_message(path))
    return messages
