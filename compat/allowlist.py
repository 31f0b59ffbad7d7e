"""The allowlist (compat/allowlist.yaml): each difference between Kafka and Moldau that a
scenario may show without failing, with its reason.

An entry names a scenario (a glob) and the two sides of one difference: `kafka` and
`moldau` are regular expressions matched against the whole of that side of a hunk, its
lines joined by newlines (a missing side means the hunk has no lines there). `kind` says
whether the difference is deliberate (Moldau means to differ) or a known bug waiting for
its fix, so the count shows both.
"""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass
from pathlib import Path

import yaml

ALLOWLIST_FILE = Path(__file__).resolve().parent / "allowlist.yaml"
KINDS = ("deliberate", "bug")


class AllowlistError(ValueError):
    pass


@dataclass(frozen=True)
class Entry:
    id: str
    scenario: str
    kind: str
    reason: str
    kafka: re.Pattern[str]
    moldau: re.Pattern[str]

    def covers(self, scenario: str, kafka_lines: list[str], moldau_lines: list[str]) -> bool:
        return (fnmatch.fnmatchcase(scenario, self.scenario)
                and self.kafka.fullmatch("\n".join(kafka_lines)) is not None
                and self.moldau.fullmatch("\n".join(moldau_lines)) is not None)


def _pattern(entry_id: str, side: str, value: object) -> re.Pattern[str]:
    if value is None:
        return re.compile("")
    if not isinstance(value, str):
        raise AllowlistError(f"{entry_id}: `{side}` must be a string (a regular expression)")
    try:
        return re.compile(value)
    except re.error as exc:
        raise AllowlistError(f"{entry_id}: `{side}` is no regular expression: {exc}") from None


def parse(document: object) -> list[Entry]:
    if document is None:
        return []
    if not isinstance(document, list):
        raise AllowlistError("the allowlist is a list of entries")
    entries: list[Entry] = []
    seen: set[str] = set()
    for raw in document:
        if not isinstance(raw, dict):
            raise AllowlistError(f"an entry is a mapping, not {raw!r}")
        entry_id = str(raw.get("id", ""))
        missing = [key for key in ("id", "scenario", "kind", "reason") if not raw.get(key)]
        if missing:
            raise AllowlistError(f"entry {entry_id or raw!r} lacks {', '.join(missing)}")
        if raw["kind"] not in KINDS:
            raise AllowlistError(f"{entry_id}: kind is one of {', '.join(KINDS)}")
        if entry_id in seen:
            raise AllowlistError(f"{entry_id}: two entries with this id")
        if raw.get("kafka") is None and raw.get("moldau") is None:
            raise AllowlistError(f"{entry_id}: an entry names at least one side")
        seen.add(entry_id)
        entries.append(Entry(entry_id, str(raw["scenario"]), str(raw["kind"]),
                             " ".join(str(raw["reason"]).split()),
                             _pattern(entry_id, "kafka", raw.get("kafka")),
                             _pattern(entry_id, "moldau", raw.get("moldau"))))
    return entries


def load(path: Path = ALLOWLIST_FILE) -> list[Entry]:
    with open(path, encoding="utf-8") as fh:
        return parse(yaml.safe_load(fh))
