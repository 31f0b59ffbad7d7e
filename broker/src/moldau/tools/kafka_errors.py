"""Kafka's error codes as the tools report them: the broker's error message when it sent
one, otherwise the default message of Kafka's exception for the code."""

from __future__ import annotations

from moldau.tools.options import ToolError

# code -> (Kafka's Errors name, the default message of its exception)
_ERRORS: dict[int, tuple[str, str]] = {
    -1: ("UNKNOWN_SERVER_ERROR", "The server experienced an unexpected error when "
         "processing the request."),
    1: ("OFFSET_OUT_OF_RANGE", "The requested offset is not within the range of offsets "
        "maintained by the server."),
    3: ("UNKNOWN_TOPIC_OR_PARTITION", "This server does not host this topic-partition."),
    5: ("LEADER_NOT_AVAILABLE", "There is no leader for this topic-partition as we are in "
        "the middle of a leadership election."),
    6: ("NOT_LEADER_OR_FOLLOWER", "For requests intended only for the leader, this error "
        "indicates that the broker is not the current leader."),
    7: ("REQUEST_TIMED_OUT", "The request timed out."),
    14: ("COORDINATOR_LOAD_IN_PROGRESS", "The coordinator is loading and hence can't "
         "process requests."),
    15: ("COORDINATOR_NOT_AVAILABLE", "The coordinator is not available."),
    16: ("NOT_COORDINATOR", "This is not the correct coordinator."),
    17: ("INVALID_TOPIC_EXCEPTION", "The request attempted to perform an operation on an "
         "invalid topic."),
    24: ("INVALID_GROUP_ID", "The configured groupId is invalid."),
    25: ("UNKNOWN_MEMBER_ID", "The coordinator is not aware of this member."),
    29: ("TOPIC_AUTHORIZATION_FAILED", "Topic authorization failed."),
    30: ("GROUP_AUTHORIZATION_FAILED", "Group authorization failed."),
    31: ("CLUSTER_AUTHORIZATION_FAILED", "Cluster authorization failed."),
    35: ("UNSUPPORTED_VERSION", "The version of API is not supported."),
    36: ("TOPIC_ALREADY_EXISTS", "Topic with this name already exists."),
    37: ("INVALID_PARTITIONS", "Number of partitions is below 1."),
    38: ("INVALID_REPLICATION_FACTOR", "Replication factor is below 1 or larger than the "
         "number of available brokers."),
    39: ("INVALID_REPLICA_ASSIGNMENT", "Replica assignment is invalid."),
    40: ("INVALID_CONFIG", "Configuration is invalid."),
    41: ("NOT_CONTROLLER", "This is not the correct controller for this cluster."),
    42: ("INVALID_REQUEST", "This most likely occurs because of a request being malformed "
         "by the client library or the message was sent to an incompatible broker. See the "
         "broker logs for more details."),
    60: ("REASSIGNMENT_IN_PROGRESS", "A partition reassignment is in progress."),
    68: ("NON_EMPTY_GROUP", "The group is not empty."),
    69: ("GROUP_ID_NOT_FOUND", "The group id does not exist."),
    73: ("TOPIC_DELETION_DISABLED", "Topic deletion is disabled."),
    83: ("ELIGIBLE_LEADERS_NOT_AVAILABLE", "Eligible topic partition leaders are not "
         "available."),
    84: ("ELECTION_NOT_NEEDED", "Leader election not needed for topic partition."),
    85: ("NO_REASSIGNMENT_IN_PROGRESS", "No partition reassignment is in progress."),
    86: ("GROUP_SUBSCRIBED_TO_TOPIC", "Deleting offsets of a topic is forbidden while the "
         "consumer group is actively subscribed to it."),
    100: ("UNKNOWN_TOPIC_ID", "This server does not host this topic ID."),
}


def error_name(code: int) -> str:
    return _ERRORS.get(code, (f"ERROR_{code}", ""))[0]


def error_text(code: int, message: str | None = None) -> str:
    """The message a Kafka tool prints for an error code."""
    if message:
        return message
    name, default = _ERRORS.get(code, (f"ERROR_{code}", f"Kafka error code {code}."))
    return default or name


class KafkaToolError(ToolError):
    """An error code answered by the cluster."""

    def __init__(self, code: int, message: str | None = None) -> None:
        super().__init__(error_text(code, message))
        self.code = code
        self.name = error_name(code)


def check(code: int, message: str | None = None) -> None:
    if code:
        raise KafkaToolError(code, message)
