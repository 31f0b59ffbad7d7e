"""Kafka's error codes as the tools report them: the broker's error message when it sent
one, otherwise the default message of Kafka's exception for the code (moldau.errors), and
the Java exception class Kafka's client raises for the code, which some tools print."""

from __future__ import annotations

from moldau.errors import default_message, error_name
from moldau.tools.options import ToolError

__all__ = ["KafkaToolError", "check", "error_name", "error_text", "exception_class"]

ERRORS_PACKAGE = "org.apache.kafka.common.errors"
# what the admin tools of 3.9 (reassignment, leader election) wrap their failures in
ADMIN_FAILED = "org.apache.kafka.server.common.AdminCommandFailedException"
# Kafka's name of a code (Errors.X) mostly spells its exception class (X in camel case with
# "Exception", a trailing _ERROR, _EXCEPTION, _FAILED or _FAILURE folded into it); the
# codes whose class is named otherwise, checked against kafka-clients 3.9.1:
IRREGULAR_CLASSES = {
    "CORRUPT_MESSAGE": "CorruptRecordException",
    "REQUEST_TIMED_OUT": "TimeoutException",
    "MESSAGE_TOO_LARGE": "RecordTooLargeException",
    "STALE_CONTROLLER_EPOCH": "ControllerMovedException",
    "OFFSET_METADATA_TOO_LARGE": "OffsetMetadataTooLarge",
    "RECORD_LIST_TOO_LARGE": "RecordBatchTooLargeException",
    "TOPIC_ALREADY_EXISTS": "TopicExistsException",
    "INVALID_CONFIG": "InvalidConfigurationException",
    "OUT_OF_ORDER_SEQUENCE_NUMBER": "OutOfOrderSequenceException",
    "DUPLICATE_SEQUENCE_NUMBER": "DuplicateSequenceException",
    "INVALID_PRODUCER_ID_MAPPING": "InvalidPidMappingException",
    "INVALID_TRANSACTION_TIMEOUT": "InvalidTxnTimeoutException",
    "DELEGATION_TOKEN_AUTH_DISABLED": "DelegationTokenDisabledException",
    "DELEGATION_TOKEN_REQUEST_NOT_ALLOWED": "UnsupportedByAuthenticationException",
    "NON_EMPTY_GROUP": "GroupNotEmptyException",
}
FOLDED_SUFFIXES = ("_ERROR", "_EXCEPTION", "_FAILED", "_FAILURE")
# the one exception outside the errors package
OTHER_PACKAGES = {"INVALID_RECORD": "org.apache.kafka.common"}


def error_text(code: int, message: str | None = None) -> str:
    """The message a Kafka tool prints for an error code."""
    return message or default_message(code) or f"Kafka error code {code}."


def exception_class(code: int) -> str:
    """The fully qualified Java class of Kafka's exception for a code (UNKNOWN_SERVER_ERROR's
    for a code Moldau does not know, as Kafka's Errors.forCode answers)."""
    name = error_name(code) if default_message(code) is not None else "UNKNOWN_SERVER_ERROR"
    simple = IRREGULAR_CLASSES.get(name)
    if simple is None:
        stem = next((name[:-len(s)] for s in FOLDED_SUFFIXES if name.endswith(s)), name)
        simple = "".join(word.capitalize() for word in stem.split("_")) + "Exception"
    return f"{OTHER_PACKAGES.get(name, ERRORS_PACKAGE)}.{simple}"


class KafkaToolError(ToolError):
    """An error code answered by the cluster."""

    def __init__(self, code: int, message: str | None = None) -> None:
        super().__init__(error_text(code, message))
        self.code = code
        self.name = error_name(code)
        self.exception_class = exception_class(code)


def check(code: int, message: str | None = None) -> None:
    if code:
        raise KafkaToolError(code, message)


def check_as_java(code: int, message: str | None) -> None:
    """`check`, reading the message as Kafka's Java client does: a null message is the
    error's default text, an empty one stays empty (Kafka's DescribeConfigs answers an
    unknown topic so)."""
    if code:
        error = KafkaToolError(code, message)
        if message == "":
            error.args = ("",)
        raise error
