"""AlterPartitionReassignments refuses a bad target with Kafka 3.9.1's messages, which
print the controller's Scala collections (ArrayBuffer, Set): the reference lab's
java-client.admin scenario compares them on one broker."""

from __future__ import annotations

from moldau.cluster.reassignment import validate_target
from moldau.errors import InvalidReplicaAssignmentError


def _message(target: list[int], adding: list[int], live: set[int]) -> str:
    error = validate_target(target, adding, live)
    assert isinstance(error, InvalidReplicaAssignmentError)
    return str(error)


def test_a_target_on_a_broker_that_is_not_alive() -> None:
    assert _message([1, 7], [7], {1}) == (
        "Replica assignment has brokers that are not alive. Replica list: ArrayBuffer(7), "
        "live broker list: Set(1)")


def test_duplicated_and_negative_replicas() -> None:
    assert _message([1, 1], [], {1}) == (
        "Duplicate replica ids in partition reassignment replica list: ArrayBuffer(1, 1)")
    assert _message([-1], [-1], {1}) == "Invalid broker id in replica list: ArrayBuffer(-1)"


def test_a_live_target_passes() -> None:
    assert validate_target([1], [], {1}) is None
