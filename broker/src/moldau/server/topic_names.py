"""Kafka's topic name rules (org.apache.kafka.common.internals.Topic)."""

from __future__ import annotations

import re

from moldau.errors import InvalidTopicError

MAX_NAME_LENGTH = 249
_LEGAL = re.compile(r"^[a-zA-Z0-9._-]+$")


def validate_topic_name(name: str) -> None:
    """Kafka 3.9's Topic.validate, with its messages ("Topic name is invalid: ...")."""
    reason = invalid_topic_reason(name)
    if reason is not None:
        raise InvalidTopicError(f"Topic name is invalid: {reason}")


def invalid_topic_reason(name: str) -> str | None:
    if not name:
        return "the empty string is not allowed"
    if name in (".", ".."):
        return f"'{name}' is not allowed"
    if len(name.encode("utf-16-le")) // 2 > MAX_NAME_LENGTH:  # Java's String.length()
        return f"the length of '{name}' is longer than the max allowed length {MAX_NAME_LENGTH}"
    if not _LEGAL.match(name):
        return (f"'{name}' contains one or more characters other than ASCII alphanumerics, "
                "'.', '_' and '-'")
    return None


def unify_collision_chars(name: str) -> str:
    """'.' and '_' collide in metric names: topics differing only there cannot coexist."""
    return name.replace(".", "_")


def has_collision_chars(name: str) -> bool:
    return "." in name or "_" in name
