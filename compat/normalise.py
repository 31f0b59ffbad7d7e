"""Normalisation: what must differ between two brokers (ids, times, host names, ports,
paths) is replaced by a placeholder before the transcripts are compared.

A `Normaliser` maps a whole transcript to another, so a rule can also reorder lines
(a table whose rows follow a Java HashMap's order on both sides). Every scenario gets
`common_rules` plus its own.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence

Normaliser = Callable[[list[str]], list[str]]

UUID = re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b")
# Kafka's topic ids as tools print them: 16 bytes in URL-safe base64 without padding.
TOPIC_ID = re.compile(r"(TopicId: ?)[A-Za-z0-9_-]{22}\b")
LOCAL_PORT = re.compile(r"\b(127\.0\.0\.1|localhost):\d{2,5}\b")
# The head of a log4j line in the lab's tool layout: "[2026-12-06 16:51:48,099] ".
LOG4J_TIME = re.compile(r"^(! )?\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}\] ")
# A Java stack frame or its "... 3 more" tail on stderr: same jar, same frames, and the
# exception's own line above it says what happened.
STACK_FRAME = re.compile(r"^! \s+(at |\.\.\. \d+ more)")


def substitute(pattern: re.Pattern[str] | str, replacement: str) -> Normaliser:
    """A regex replacement on every line."""
    compiled = re.compile(pattern) if isinstance(pattern, str) else pattern

    def apply(lines: list[str]) -> list[str]:
        return [compiled.sub(replacement, line) for line in lines]
    return apply


def literal(text: str, placeholder: str) -> Normaliser:
    """Replace a known string (a path, a run token) wherever it appears."""
    def apply(lines: list[str]) -> list[str]:
        return [line.replace(text, placeholder) for line in lines] if text else lines
    return apply


def drop(pattern: re.Pattern[str] | str) -> Normaliser:
    compiled = re.compile(pattern) if isinstance(pattern, str) else pattern

    def apply(lines: list[str]) -> list[str]:
        return [line for line in lines if not compiled.search(line)]
    return apply


def sort_runs(member: re.Pattern[str] | str) -> Normaliser:
    """Sort each run of consecutive lines matching `member`, in place: for output whose
    row order is a hash order on Kafka's side (and so no contract)."""
    compiled = re.compile(member) if isinstance(member, str) else member

    def apply(lines: list[str]) -> list[str]:
        out: list[str] = []
        run: list[str] = []
        for line in [*lines, None]:
            if line is not None and compiled.search(line):
                run.append(line)
                continue
            out.extend(sorted(run))
            run = []
            if line is not None:
                out.append(line)
        return out
    return apply


def common_rules(paths: Iterable[tuple[str, str]] = ()) -> list[Normaliser]:
    """Rules every scenario gets: ids, local ports, log4j times, stack frames, and the
    known `paths` (text, placeholder), longest first so a parent never eats a child."""
    rules: list[Normaliser] = [literal(text, placeholder) for text, placeholder
                               in sorted(paths, key=lambda p: -len(p[0]))]
    return [*rules,
            substitute(TOPIC_ID, r"\1<topic-id>"),
            substitute(UUID, "<uuid>"),
            substitute(LOCAL_PORT, r"\1:<port>"),
            substitute(LOG4J_TIME, r"\1"),
            drop(STACK_FRAME)]


def apply_all(lines: Sequence[str], rules: Iterable[Normaliser]) -> list[str]:
    out = list(lines)
    for rule in rules:
        out = rule(out)
    return out
