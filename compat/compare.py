"""Comparing two normalised transcripts: the differing hunks, each allowlisted or not,
and the scenario's verdict."""

from __future__ import annotations

import difflib
import enum
from collections.abc import Sequence
from dataclasses import dataclass

from compat.allowlist import Entry


class Verdict(enum.Enum):
    SAME = "same"
    ALLOWED = "allowed"  # every difference is on the allowlist
    DIFFERENT = "DIFFERENT"
    ERROR = "ERROR"  # a side could not run

    @property
    def passed(self) -> bool:
        return self in (Verdict.SAME, Verdict.ALLOWED)


@dataclass(frozen=True)
class Hunk:
    kafka: list[str]
    moldau: list[str]
    allowed_by: Entry | None

    def render(self) -> str:
        head = f"allowed by {self.allowed_by.id}" if self.allowed_by else "NOT ALLOWLISTED"
        return "\n".join([f"--- {head}", *(f"- kafka  | {line}" for line in self.kafka),
                          *(f"+ moldau | {line}" for line in self.moldau)])


def hunks(scenario: str, kafka: Sequence[str], moldau: Sequence[str],
          allowlist: Sequence[Entry]) -> list[Hunk]:
    matcher = difflib.SequenceMatcher(a=list(kafka), b=list(moldau), autojunk=False)
    found = []
    for tag, a0, a1, b0, b1 in matcher.get_opcodes():
        if tag == "equal":
            continue
        k, m = list(kafka[a0:a1]), list(moldau[b0:b1])
        entry = next((e for e in allowlist if e.covers(scenario, k, m)), None)
        found.append(Hunk(k, m, entry))
    return found


def verdict(found: Sequence[Hunk]) -> Verdict:
    if not found:
        return Verdict.SAME
    return Verdict.ALLOWED if all(h.allowed_by for h in found) else Verdict.DIFFERENT
