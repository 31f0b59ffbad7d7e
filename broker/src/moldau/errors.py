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
UnknownServerError = _error("UnknownServerError", -1)
NotCoordinatorError = _error("NotCoordinatorError", 16, retriable=True)
CoordinatorNotAvailableError = _error("CoordinatorNotAvailableError", 15, retriable=True)
TopicAuthorizationFailedError = _error("TopicAuthorizationFailedError", 29)
ClusterAuthorizationFailedError = _error("ClusterAuthorizationFailedError", 31)
TopicAlreadyExistsError = _error("TopicAlreadyExistsError", 36)
InvalidPartitionsError = _error("InvalidPartitionsError", 37)
InvalidReplicationFactorError = _error("InvalidReplicationFactorError", 38)
InvalidReplicaAssignmentError = _error("InvalidReplicaAssignmentError", 39)
InvalidConfigurationError = _error("InvalidConfigurationError", 40)  # INVALID_CONFIG
NotControllerError = _error("NotControllerError", 41, retriable=True)
PolicyViolationError = _error("PolicyViolationError", 44)
TransactionalIdAuthorizationFailedError = _error("TransactionalIdAuthorizationFailedError", 53)
SecurityDisabledError = _error("SecurityDisabledError", 54)
BrokerNotAvailableError = _error("BrokerNotAvailableError", 8)
ReplicaNotAvailableError = _error("ReplicaNotAvailableError", 9, retriable=True)
TopicDeletionDisabledError = _error("TopicDeletionDisabledError", 73)
FencedLeaderEpochError = _error("FencedLeaderEpochError", 74, retriable=True)
UnknownLeaderEpochError = _error("UnknownLeaderEpochError", 75, retriable=True)
ReassignmentInProgressError = _error("ReassignmentInProgressError", 60)
UnknownTopicIdError = _error("UnknownTopicIdError", 100, retriable=True)
InconsistentTopicIdError = _error("InconsistentTopicIdError", 103, retriable=True)
ThrottlingQuotaExceededError = _error("ThrottlingQuotaExceededError", 89, retriable=True)
MismatchedEndpointTypeError = _error("MismatchedEndpointTypeError", 114)
UnsupportedEndpointTypeError = _error("UnsupportedEndpointTypeError", 115)

# --- consumer groups (the classic group protocol) --------------------------------------
CoordinatorLoadInProgressError = _error("CoordinatorLoadInProgressError", 14, retriable=True)
IllegalGenerationError = _error("IllegalGenerationError", 22)
InconsistentGroupProtocolError = _error("InconsistentGroupProtocolError", 23)
InvalidGroupIdError = _error("InvalidGroupIdError", 24)
UnknownMemberIdError = _error("UnknownMemberIdError", 25)
InvalidSessionTimeoutError = _error("InvalidSessionTimeoutError", 26)
RebalanceInProgressError = _error("RebalanceInProgressError", 27)
InvalidCommitOffsetSizeError = _error("InvalidCommitOffsetSizeError", 28)
GroupAuthorizationFailedError = _error("GroupAuthorizationFailedError", 30)
OffsetMetadataTooLargeError = _error("OffsetMetadataTooLargeError", 12)
NonEmptyGroupError = _error("NonEmptyGroupError", 68)
GroupIdNotFoundError = _error("GroupIdNotFoundError", 69)
MemberIdRequiredError = _error("MemberIdRequiredError", 79)
FencedInstanceIdError = _error("FencedInstanceIdError", 82)
GroupMaxSizeReachedError = _error("GroupMaxSizeReachedError", 81)
GroupSubscribedToTopicError = _error("GroupSubscribedToTopicError", 86)
UnstableOffsetCommitError = _error("UnstableOffsetCommitError", 88, retriable=True)

# --- between brokers (the controller's requests, replication) --------------------------
StaleControllerEpochError = _error("StaleControllerEpochError", 11)
StaleBrokerEpochError = _error("StaleBrokerEpochError", 77)
PreferredLeaderNotAvailableError = _error("PreferredLeaderNotAvailableError", 80, True)
EligibleLeadersNotAvailableError = _error("EligibleLeadersNotAvailableError", 83, True)
FetchSessionIdNotFoundError = _error("FetchSessionIdNotFoundError", 70, retriable=True)
InvalidFetchSessionEpochError = _error("InvalidFetchSessionEpochError", 71, retriable=True)
ElectionNotNeededError = _error("ElectionNotNeededError", 84, True)  # InvalidMetadataException
NoReassignmentInProgressError = _error("NoReassignmentInProgressError", 85)
