"""Kafka's error codes as the tools report them: the broker's error message when it sent
one, otherwise the default message of Kafka's exception for the code (moldau.errors)."""

from __future__ import annotations

from moldau.errors import default_message, error_name
from moldau.tools.options import ToolError

__all__ = ["KafkaToolError", "check", "error_name", "error_text"]


def error_text(code: int, message: str | None = None) -> str:
    """The message a Kafka tool prints for an error code."""
    return message or default_message(code) or f"Kafka error code {code}."


class KafkaToolError(ToolError):
    """An error code answered by the cluster."""

    def __init__(self, code: int, message: str | None = None) -> None:
        super().__init__(error_text(code, message))
        self.code = code
        self.name = error_name(code)


def check(code: int, message: str | None = None) -> None:
    if code:
        raise KafkaToolError(code, message)
