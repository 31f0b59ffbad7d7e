"""Kafka's error codes, and the exceptions that carry them through the broker.

A handler turns any KafkaError into the code of its class, with the message as the
error message where the response has a field for it. The codes are Kafka's (the
`Errors` enumeration of the Java client); the names are Kafka's in snake case.
"""

from __future__ import annotations

from typing import ClassVar


class KafkaError(Exception):
    """Base of the errors that map to a Kafka error code."""

    code: ClassVar[int] = -1  # UNKNOWN_SERVER_ERROR
    retriable: ClassVar[bool] = False


def _error(name: str, code: int, retriable: bool = False) -> type[KafkaError]:
    cls = type(name, (KafkaError,), {"code": code, "retriable": retriable, "__doc__": name})
    return cls


OffsetOutOfRangeError = _error("OffsetOutOfRangeError", 1)
CorruptRecordError = _error("CorruptRecordError", 2, retriable=True)  # CORRUPT_MESSAGE
UnknownTopicOrPartitionError = _error("UnknownTopicOrPartitionError", 3, retriable=True)
InvalidFetchSizeError = _error("InvalidFetchSizeError", 4)
LeaderNotAvailableError = _error("LeaderNotAvailableError", 5, retriable=True)
NotLeaderOrFollowerError = _error("NotLeaderOrFollowerError", 6, retriable=True)
RequestTimedOutError = _error("RequestTimedOutError", 7, retriable=True)
RecordTooLargeError = _error("RecordTooLargeError", 10)  # MESSAGE_TOO_LARGE
InvalidTopicError = _error("InvalidTopicError", 17)
RecordBatchTooLargeError = _error("RecordBatchTooLargeError", 18)  # RECORD_LIST_TOO_LARGE
NotEnoughReplicasError = _error("NotEnoughReplicasError", 19, retriable=True)
NotEnoughReplicasAfterAppendError = _error("NotEnoughReplicasAfterAppendError", 20, True)
InvalidRequiredAcksError = _error("InvalidRequiredAcksError", 21)
InvalidTimestampError = _error("InvalidTimestampError", 32)
UnsupportedVersionError = _error("UnsupportedVersionError", 35)
InvalidRequestError = _error("InvalidRequestError", 42)
UnsupportedForMessageFormatError = _error("UnsupportedForMessageFormatError", 43)
OutOfOrderSequenceError = _error("OutOfOrderSequenceError", 45)
DuplicateSequenceError = _error("DuplicateSequenceError", 46)
InvalidProducerEpochError = _error("InvalidProducerEpochError", 47)
KafkaStorageError = _error("KafkaStorageError", 56, retriable=True)
LogDirNotFoundError = _error("LogDirNotFoundError", 57)
UnknownProducerIdError = _error("UnknownProducerIdError", 59)
OffsetNotAvailableError = _error("OffsetNotAvailableError", 78, retriable=True)
InvalidRecordError = _error("InvalidRecordError", 87)
