"""Kafka's error codes, and the exceptions that carry them through the broker.

The one table of them: each code is the class line of its exception, with Kafka's name for
it (the `Errors` enumeration of the Java client), whether Kafka's client retries it, and the
default message of Kafka's exception (`Errors.message()`). A handler turns any KafkaError into
the code of its class, with the message the error was raised with as the error message where
the response has a field for it; a tool prints the default message for a code answered
without one (moldau.tools.kafka_errors).
"""

from __future__ import annotations

from typing import ClassVar


class KafkaError(Exception):
    """Base of the errors that map to a Kafka error code, and itself UNKNOWN_SERVER_ERROR.

    An error of a code of its own declares the code in its class line, with Kafka's name for
    it, the default message of Kafka's exception and whether Kafka's client retries it:
    `class XError(KafkaError, code=N, retriable=True, name="X", message="...")`. A subclass
    that names no code keeps its base's code, name, message and retriability. The default
    message is only the code's: str() of an error raised without a message stays empty."""

    code: ClassVar[int] = -1
    name: ClassVar[str] = "UNKNOWN_SERVER_ERROR"
    default_message: ClassVar[str] = (
        "The server experienced an unexpected error when processing the request.")
    retriable: ClassVar[bool] = False
    # KIP-467: the records validation refused, as (index of the record in its batch, why);
    # a Produce response (v8+) names them, so clients fail those records alone
    record_errors: tuple[tuple[int, str], ...] = ()

    def __init_subclass__(cls, code: int | None = None, retriable: bool = False,
                          name: str | None = None, message: str | None = None,
                          **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        if code is None:
            if retriable or name is not None or message is not None:
                raise TypeError(f"{cls.__name__}: retriable, name and message go with a code")
            return
        if not name or not message:
            raise TypeError(f"{cls.__name__}: code {code} needs Kafka's name and message")
        if code in _BY_CODE:
            raise TypeError(f"{cls.__name__}: code {code} is {_BY_CODE[code].__name__}'s")
        cls.code, cls.retriable, cls.name, cls.default_message = code, retriable, name, message
        _BY_CODE[code] = cls
        if cls.__doc__ is None:
            cls.__doc__ = f"{name}: {message}"


_BY_CODE: dict[int, type[KafkaError]] = {KafkaError.code: KafkaError}


def error_for(code: int) -> type[KafkaError]:
    """The error class of a code; KafkaError (UNKNOWN_SERVER_ERROR) for a code that is not in
    the table, as Kafka's Errors.forCode answers."""
    return _BY_CODE.get(code, KafkaError)


def error_name(code: int) -> str:
    """Kafka's name of a code: NONE for 0, ERROR_<code> for a code that is not in the table."""
    if code == 0:
        return "NONE"
    error = _BY_CODE.get(code)
    return f"ERROR_{code}" if error is None else error.name


def codes() -> list[int]:
    """Every code in the table, UNKNOWN_SERVER_ERROR's -1 included."""
    return sorted(_BY_CODE)


def default_message(code: int) -> str | None:
    """The default message of Kafka's exception for a code; None for 0 and for a code that is
    not in the table."""
    error = _BY_CODE.get(code)
    return None if error is None else error.default_message


class OffsetOutOfRangeError(
        KafkaError, code=1, name="OFFSET_OUT_OF_RANGE",
        message="The requested offset is not within the range of offsets maintained by the "
                "server."): ...
class CorruptRecordError(
        KafkaError, code=2, retriable=True, name="CORRUPT_MESSAGE",
        message="This message has failed its CRC checksum, exceeds the valid size, has a null key "
                "for a compacted topic, or is otherwise corrupt."): ...
class UnknownTopicOrPartitionError(
        KafkaError, code=3, retriable=True, name="UNKNOWN_TOPIC_OR_PARTITION",
        message="This server does not host this topic-partition."): ...
class InvalidFetchSizeError(
        KafkaError, code=4, name="INVALID_FETCH_SIZE",
        message="The requested fetch size is invalid."): ...
class LeaderNotAvailableError(
        KafkaError, code=5, retriable=True, name="LEADER_NOT_AVAILABLE",
        message="There is no leader for this topic-partition as we are in the middle of a "
                "leadership election."): ...
# The first of the two sentences of Kafka's message (the tools have always printed it so);
# the second: for a request to any replica, the broker is not a replica of the partition.
class NotLeaderOrFollowerError(
        KafkaError, code=6, retriable=True, name="NOT_LEADER_OR_FOLLOWER",
        message="For requests intended only for the leader, this error indicates that the broker "
                "is not the current leader."): ...
class RequestTimedOutError(
        KafkaError, code=7, retriable=True, name="REQUEST_TIMED_OUT",
        message="The request timed out."): ...
class RecordTooLargeError(
        KafkaError, code=10, name="MESSAGE_TOO_LARGE",
        message="The request included a message larger than the max message size the server will "
                "accept."): ...
class InvalidTopicError(
        KafkaError, code=17, name="INVALID_TOPIC_EXCEPTION",
        message="The request attempted to perform an operation on an invalid topic."): ...
class RecordBatchTooLargeError(
        KafkaError, code=18, name="RECORD_LIST_TOO_LARGE",
        message="The request included message batch larger than the configured segment size on the "
                "server."): ...
class NotEnoughReplicasError(
        KafkaError, code=19, retriable=True, name="NOT_ENOUGH_REPLICAS",
        message="Messages are rejected since there are fewer in-sync replicas than required."): ...
class NotEnoughReplicasAfterAppendError(
        KafkaError, code=20, retriable=True, name="NOT_ENOUGH_REPLICAS_AFTER_APPEND",
        message="Messages are written to the log, but to fewer in-sync replicas than "
                "required."): ...
class InvalidRequiredAcksError(
        KafkaError, code=21, name="INVALID_REQUIRED_ACKS",
        message="Produce request specified an invalid value for required acks."): ...
class InvalidTimestampError(
        KafkaError, code=32, name="INVALID_TIMESTAMP",
        message="The timestamp of the message is out of acceptable range."): ...
class UnsupportedVersionError(
        KafkaError, code=35, name="UNSUPPORTED_VERSION",
        message="The version of API is not supported."): ...
class UnsupportedCompressionTypeError(
        KafkaError, code=76, name="UNSUPPORTED_COMPRESSION_TYPE",
        message="The requesting client does not support the compression type of given "
                "partition."): ...
class InvalidRequestError(
        KafkaError, code=42, name="INVALID_REQUEST",
        message="This most likely occurs because of a request being malformed by the client "
                "library or the message was sent to an incompatible broker. See the broker logs "
                "for more details."): ...
class UnsupportedForMessageFormatError(
        KafkaError, code=43, name="UNSUPPORTED_FOR_MESSAGE_FORMAT",
        message="The message format version on the broker does not support the request."): ...
class OutOfOrderSequenceError(
        KafkaError, code=45, name="OUT_OF_ORDER_SEQUENCE_NUMBER",
        message="The broker received an out of order sequence number."): ...
class DuplicateSequenceError(
        KafkaError, code=46, name="DUPLICATE_SEQUENCE_NUMBER",
        message="The broker received a duplicate sequence number."): ...
class InvalidProducerEpochError(
        KafkaError, code=47, name="INVALID_PRODUCER_EPOCH",
        message="Producer attempted to produce with an old epoch."): ...
class InvalidTxnStateError(
        KafkaError, code=48, name="INVALID_TXN_STATE",
        message="The producer attempted a transactional operation in an invalid state."): ...
class InvalidProducerIdMappingError(
        KafkaError, code=49, name="INVALID_PRODUCER_ID_MAPPING",
        message="The producer attempted to use a producer id which is not currently assigned "
                "to its transactional id."): ...
class InvalidTransactionTimeoutError(
        KafkaError, code=50, name="INVALID_TRANSACTION_TIMEOUT",
        message="The transaction timeout is larger than the maximum value allowed by the "
                "broker (as configured by transaction.max.timeout.ms)."): ...
class ConcurrentTransactionsError(
        KafkaError, code=51, retriable=True, name="CONCURRENT_TRANSACTIONS",
        message="The producer attempted to update a transaction while another concurrent "
                "operation on the same transaction was ongoing."): ...
class OperationNotAttemptedError(
        KafkaError, code=55, name="OPERATION_NOT_ATTEMPTED",
        message="The broker did not attempt to execute this operation. This may happen for "
                "batched RPCs where some operations in the batch failed, causing the broker "
                "to respond without trying the rest."): ...
class TransactionalIdNotFoundError(
        KafkaError, code=105, name="TRANSACTIONAL_ID_NOT_FOUND",
        message="The transactionalId could not be found."): ...
class TransactionCoordinatorFencedError(
        KafkaError, code=52, name="TRANSACTION_COORDINATOR_FENCED",
        message="Indicates that the transaction coordinator sending a WriteTxnMarker is no "
                "longer the current coordinator for a given producer."): ...
class KafkaStorageError(
        KafkaError, code=56, retriable=True, name="KAFKA_STORAGE_ERROR",
        message="Disk error when trying to access log file on the disk."): ...
class LogDirNotFoundError(
        KafkaError, code=57, name="LOG_DIR_NOT_FOUND",
        message="The user-specified log directory is not found in the broker config."): ...
class UnknownProducerIdError(
        KafkaError, code=59, name="UNKNOWN_PRODUCER_ID",
        message="This exception is raised by the broker if it could not locate the producer "
                "metadata associated with the producerId in question. This could happen if, for "
                "instance, the producer's records were deleted because their retention time had "
                "elapsed. Once the last records of the producerId are removed, the producer's "
                "metadata is removed from the broker, and future appends by the producer will "
                "return this exception."): ...
class OffsetNotAvailableError(
        KafkaError, code=78, retriable=True, name="OFFSET_NOT_AVAILABLE",
        message="The leader high watermark has not caught up from a recent leader election so the "
                "offsets cannot be guaranteed to be monotonically increasing."): ...
class InvalidRecordError(
        KafkaError, code=87, name="INVALID_RECORD",
        message="This record has failed the validation on broker and hence will be rejected."): ...
class UnknownServerError(KafkaError):
    """UNKNOWN_SERVER_ERROR by name: KafkaError's own code, name and message."""
class NotCoordinatorError(
        KafkaError, code=16, retriable=True, name="NOT_COORDINATOR",
        message="This is not the correct coordinator."): ...
class CoordinatorNotAvailableError(
        KafkaError, code=15, retriable=True, name="COORDINATOR_NOT_AVAILABLE",
        message="The coordinator is not available."): ...
class TopicAuthorizationFailedError(
        KafkaError, code=29, name="TOPIC_AUTHORIZATION_FAILED",
        message="Topic authorization failed."): ...
class ClusterAuthorizationFailedError(
        KafkaError, code=31, name="CLUSTER_AUTHORIZATION_FAILED",
        message="Cluster authorization failed."): ...
class TopicAlreadyExistsError(
        KafkaError, code=36, name="TOPIC_ALREADY_EXISTS",
        message="Topic with this name already exists."): ...
class InvalidPartitionsError(
        KafkaError, code=37, name="INVALID_PARTITIONS",
        message="Number of partitions is below 1."): ...
class InvalidReplicationFactorError(
        KafkaError, code=38, name="INVALID_REPLICATION_FACTOR",
        message="Replication factor is below 1 or larger than the number of available "
                "brokers."): ...
class InvalidReplicaAssignmentError(
        KafkaError, code=39, name="INVALID_REPLICA_ASSIGNMENT",
        message="Replica assignment is invalid."): ...
class InvalidConfigurationError(
        KafkaError, code=40, name="INVALID_CONFIG",
        message="Configuration is invalid."): ...
class NotControllerError(
        KafkaError, code=41, retriable=True, name="NOT_CONTROLLER",
        message="This is not the correct controller for this cluster."): ...
class PolicyViolationError(
        KafkaError, code=44, name="POLICY_VIOLATION",
        message="Request parameters do not satisfy the configured policy."): ...
class TransactionalIdAuthorizationFailedError(
        KafkaError, code=53, name="TRANSACTIONAL_ID_AUTHORIZATION_FAILED",
        message="Transactional Id authorization failed."): ...
class SecurityDisabledError(
        KafkaError, code=54, name="SECURITY_DISABLED",
        message="Security features are disabled."): ...
class UnsupportedSaslMechanismError(
        KafkaError, code=33, name="UNSUPPORTED_SASL_MECHANISM",
        message="The broker does not support the requested SASL mechanism."): ...
class IllegalSaslStateError(
        KafkaError, code=34, name="ILLEGAL_SASL_STATE",
        message="Request is not valid given the current SASL state."): ...
class SaslAuthenticationFailedError(
        KafkaError, code=58, name="SASL_AUTHENTICATION_FAILED",
        message="SASL Authentication failed."): ...
class DelegationTokenAuthDisabledError(
        KafkaError, code=61, name="DELEGATION_TOKEN_AUTH_DISABLED",
        message="Delegation Token feature is not enabled."): ...
class DelegationTokenNotFoundError(
        KafkaError, code=62, name="DELEGATION_TOKEN_NOT_FOUND",
        message="Delegation Token is not found on server."): ...
class DelegationTokenOwnerMismatchError(
        KafkaError, code=63, name="DELEGATION_TOKEN_OWNER_MISMATCH",
        message="Specified Principal is not valid Owner/Renewer."): ...
class DelegationTokenRequestNotAllowedError(
        KafkaError, code=64, name="DELEGATION_TOKEN_REQUEST_NOT_ALLOWED",
        message="Delegation Token requests are not allowed on PLAINTEXT/1-way SSL channels "
                "and on delegation token authenticated channels."): ...
class DelegationTokenAuthorizationFailedError(
        KafkaError, code=65, name="DELEGATION_TOKEN_AUTHORIZATION_FAILED",
        message="Delegation Token authorization failed."): ...
class DelegationTokenExpiredError(
        KafkaError, code=66, name="DELEGATION_TOKEN_EXPIRED",
        message="Delegation Token is expired."): ...
class InvalidPrincipalTypeError(
        KafkaError, code=67, name="INVALID_PRINCIPAL_TYPE",
        message="Supplied principalType is not supported."): ...
class ProducerFencedError(
        KafkaError, code=90, name="PRODUCER_FENCED",
        message="There is a newer producer with the same transactionalId which fences the "
                "current one."): ...
class ResourceNotFoundError(
        KafkaError, code=91, name="RESOURCE_NOT_FOUND",
        message="A request illegally referred to a resource that does not exist."): ...
class DuplicateResourceError(
        KafkaError, code=92, name="DUPLICATE_RESOURCE",
        message="A request illegally referred to the same resource twice."): ...
class UnacceptableCredentialError(
        KafkaError, code=93, name="UNACCEPTABLE_CREDENTIAL",
        message="Requested credential would not meet criteria for acceptability."): ...
class BrokerNotAvailableError(
        KafkaError, code=8, name="BROKER_NOT_AVAILABLE",
        message="The broker is not available."): ...
class ReplicaNotAvailableError(
        KafkaError, code=9, retriable=True, name="REPLICA_NOT_AVAILABLE",
        message="The replica is not available for the requested topic-partition. "
                "Produce/Fetch requests and other requests intended only for the leader or "
                "follower return NOT_LEADER_OR_FOLLOWER if the broker is not a replica of "
                "the topic-partition."): ...
class TopicDeletionDisabledError(
        KafkaError, code=73, name="TOPIC_DELETION_DISABLED",
        message="Topic deletion is disabled."): ...
class FencedLeaderEpochError(
        KafkaError, code=74, retriable=True, name="FENCED_LEADER_EPOCH",
        message="The leader epoch in the request is older than the epoch on the broker."): ...
class UnknownLeaderEpochError(
        KafkaError, code=75, retriable=True, name="UNKNOWN_LEADER_EPOCH",
        message="The leader epoch in the request is newer than the epoch on the broker."): ...
class ReassignmentInProgressError(
        KafkaError, code=60, name="REASSIGNMENT_IN_PROGRESS",
        message="A partition reassignment is in progress."): ...
class UnknownTopicIdError(
        KafkaError, code=100, retriable=True, name="UNKNOWN_TOPIC_ID",
        message="This server does not host this topic ID."): ...
class InconsistentTopicIdError(
        KafkaError, code=103, retriable=True, name="INCONSISTENT_TOPIC_ID",
        message="The log's topic ID did not match the topic ID in the request"): ...
class ThrottlingQuotaExceededError(
        KafkaError, code=89, retriable=True, name="THROTTLING_QUOTA_EXCEEDED",
        message="The throttling quota has been exceeded."): ...
class MismatchedEndpointTypeError(
        KafkaError, code=114, name="MISMATCHED_ENDPOINT_TYPE",
        message="The request was sent to an endpoint of the wrong type."): ...
class UnsupportedEndpointTypeError(
        KafkaError, code=115, name="UNSUPPORTED_ENDPOINT_TYPE",
        message="This endpoint type is not supported yet."): ...
class NetworkExceptionError(
        KafkaError, code=13, retriable=True, name="NETWORK_EXCEPTION",
        message="The server disconnected before a response was received."): ...
class TransactionAbortableError(
        KafkaError, code=120, name="TRANSACTION_ABORTABLE",
        message="The server encountered an error with the transaction. The client can abort "
                "the transaction to continue using this transactional ID."): ...

# --- consumer groups (the classic group protocol) --------------------------------------
class CoordinatorLoadInProgressError(
        KafkaError, code=14, retriable=True, name="COORDINATOR_LOAD_IN_PROGRESS",
        message="The coordinator is loading and hence can't process requests."): ...
class IllegalGenerationError(
        KafkaError, code=22, name="ILLEGAL_GENERATION",
        message="Specified group generation id is not valid."): ...
class InconsistentGroupProtocolError(
        KafkaError, code=23, name="INCONSISTENT_GROUP_PROTOCOL",
        message="The group member's supported protocols are incompatible with those of existing "
                "members or first group member tried to join with empty protocol type or empty "
                "protocol list."): ...
class InvalidGroupIdError(
        KafkaError, code=24, name="INVALID_GROUP_ID",
        message="The configured groupId is invalid."): ...
class UnknownMemberIdError(
        KafkaError, code=25, name="UNKNOWN_MEMBER_ID",
        message="The coordinator is not aware of this member."): ...
class InvalidSessionTimeoutError(
        KafkaError, code=26, name="INVALID_SESSION_TIMEOUT",
        message="The session timeout is not within the range allowed by the broker (as configured "
                "by group.min.session.timeout.ms and group.max.session.timeout.ms)."): ...
class RebalanceInProgressError(
        KafkaError, code=27, name="REBALANCE_IN_PROGRESS",
        message="The group is rebalancing, so a rejoin is needed."): ...
class InvalidCommitOffsetSizeError(
        KafkaError, code=28, name="INVALID_COMMIT_OFFSET_SIZE",
        message="The committing offset data size is not valid."): ...
class GroupAuthorizationFailedError(
        KafkaError, code=30, name="GROUP_AUTHORIZATION_FAILED",
        message="Group authorization failed."): ...
class OffsetMetadataTooLargeError(
        KafkaError, code=12, name="OFFSET_METADATA_TOO_LARGE",
        message="The metadata field of the offset request was too large."): ...
class NonEmptyGroupError(
        KafkaError, code=68, name="NON_EMPTY_GROUP",
        message="The group is not empty."): ...
class GroupIdNotFoundError(
        KafkaError, code=69, name="GROUP_ID_NOT_FOUND",
        message="The group id does not exist."): ...
class MemberIdRequiredError(
        KafkaError, code=79, name="MEMBER_ID_REQUIRED",
        message="The group member needs to have a valid member id before actually entering a "
                "consumer group."): ...
class FencedInstanceIdError(
        KafkaError, code=82, name="FENCED_INSTANCE_ID",
        message="The broker rejected this static consumer since another consumer with the same "
                "group.instance.id has registered with a different member.id."): ...
class GroupMaxSizeReachedError(
        KafkaError, code=81, name="GROUP_MAX_SIZE_REACHED",
        message="The consumer group has reached its max size."): ...
class GroupSubscribedToTopicError(
        KafkaError, code=86, name="GROUP_SUBSCRIBED_TO_TOPIC",
        message="Deleting offsets of a topic is forbidden while the consumer group is actively "
                "subscribed to it."): ...
class UnstableOffsetCommitError(
        KafkaError, code=88, retriable=True, name="UNSTABLE_OFFSET_COMMIT",
        message="There are unstable offsets that need to be cleared."): ...

# --- between brokers (the controller's requests, replication) --------------------------
class StaleControllerEpochError(
        KafkaError, code=11, name="STALE_CONTROLLER_EPOCH",
        message="The controller moved to another broker."): ...
class StaleBrokerEpochError(
        KafkaError, code=77, name="STALE_BROKER_EPOCH",
        message="Broker epoch has changed."): ...
class InvalidUpdateVersionError(
        KafkaError, code=95, name="INVALID_UPDATE_VERSION",
        message="The given update version was invalid."): ...
class BrokerIdNotRegisteredError(
        KafkaError, code=102, name="BROKER_ID_NOT_REGISTERED",
        message="The given broker ID was not registered."): ...
class IneligibleReplicaError(
        KafkaError, code=107, name="INELIGIBLE_REPLICA",
        message="The new ISR contains at least one ineligible replica."): ...
class PreferredLeaderNotAvailableError(
        KafkaError, code=80, retriable=True, name="PREFERRED_LEADER_NOT_AVAILABLE",
        message="The preferred leader was not available."): ...
class EligibleLeadersNotAvailableError(
        KafkaError, code=83, retriable=True, name="ELIGIBLE_LEADERS_NOT_AVAILABLE",
        message="Eligible topic partition leaders are not available."): ...
class FetchSessionIdNotFoundError(
        KafkaError, code=70, retriable=True, name="FETCH_SESSION_ID_NOT_FOUND",
        message="The fetch session ID was not found."): ...
class InvalidFetchSessionEpochError(
        KafkaError, code=71, retriable=True, name="INVALID_FETCH_SESSION_EPOCH",
        message="The fetch session epoch is invalid."): ...
# ElectionNotNeededError is an InvalidMetadataException in Kafka:
class ElectionNotNeededError(
        KafkaError, code=84, retriable=True, name="ELECTION_NOT_NEEDED",
        message="Leader election not needed for topic partition."): ...
class NoReassignmentInProgressError(
        KafkaError, code=85, name="NO_REASSIGNMENT_IN_PROGRESS",
        message="No partition reassignment is in progress."): ...
