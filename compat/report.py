"""The table `make compat` prints: a scenario a row with Kafka's result, Moldau's, the
verdict and the time, then the allowlist count and every difference not allowlisted."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from fnmatch import fnmatchcase

from compat.allowlist import Entry
from compat.runner import Result


def table(results: Sequence[Result]) -> str:
    header = ("scenario", "kafka", "moldau", "verdict", "seconds")
    rows = [(r.scenario.name, r.kafka.summary, r.moldau.summary, r.verdict.value,
             f"{r.seconds:.1f}") for r in results]
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]

    def line(row: Sequence[str]) -> str:
        return "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True))
    rule = "  ".join("-" * width for width in widths)
    return "\n".join([line(header), rule, *(line(row) for row in rows)])


def allowlist_summary(allowlist: Sequence[Entry], results: Sequence[Result]) -> str:
    kinds = Counter(entry.kind for entry in allowlist)
    used = {h.allowed_by.id for r in results for h in r.hunks if h.allowed_by is not None}
    text = (f"allowlist: {len(allowlist)} entries ({kinds['deliberate']} deliberate, "
            f"{kinds['bug']} known bugs), {len(used)} matched in this run")
    ran = {r.scenario.name for r in results}
    stale = [e.id for e in allowlist if e.id not in used
             and any(fnmatchcase(name, e.scenario) for name in ran)]
    if stale:
        text += f"\n  not seen in this run (fixed?): {', '.join(stale)}"
    return text


def failures(results: Sequence[Result]) -> str:
    parts = []
    for result in results:
        if result.verdict.passed:
            continue
        parts.append(f"== {result.scenario.name}: {result.verdict.value}")
        for column, name in ((result.kafka, "kafka"), (result.moldau, "moldau")):
            if column.error:
                parts.append(f"{name} side failed: {column.error}")
        parts.extend(h.render() for h in result.hunks if h.allowed_by is None)
    return "\n".join(parts)
