"""The controller's znodes: /controller and /controller_epoch, and what asks it to act:
ISR change and log dir event notifications, /admin/preferred_replica_election and
/admin/reassign_partitions."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from .zk_json import json_bytes, now_ms, parse_json, parse_object

# -- /controller, /controller_epoch ------------------------------------------------------------

INITIAL_CONTROLLER_EPOCH = 1  # the first elected controller gets epoch 1 (the znode starts at 0)


def encode_controller(broker_id: int, timestamp_ms: int | None = None,
                      kraft_controller_epoch: int = -1) -> bytes:
    """ControllerZNode.encode of 3.9: version 2 with kraftControllerEpoch (-1 in ZK mode).
    A Scala Map4, so keys stay in insertion order."""
    ts = timestamp_ms if timestamp_ms is not None else now_ms()
    return json_bytes({"version": 2, "brokerid": broker_id, "timestamp": str(ts),
                        "kraftControllerEpoch": kraft_controller_epoch})


def decode_controller(data: bytes) -> int:
    """The controller's broker id (versions 1 and 2)."""
    return int(parse_object(data, "controller")["brokerid"])


def decode_controller_kraft_epoch(data: bytes) -> int | None:
    """kraftControllerEpoch of a version-2 /controller (a migrating KRaft controller's)."""
    value = parse_object(data, "controller").get("kraftControllerEpoch")
    return int(value) if value is not None else None


def encode_controller_epoch(epoch: int) -> bytes:
    return str(epoch).encode("ascii")


def decode_controller_epoch(data: bytes) -> int:
    return int(data.decode("ascii").strip())


# -- notifications and admin znodes ------------------------------------------------------------


def encode_isr_change(partitions: Iterable[tuple[str, int]]) -> bytes:
    """IsrChangeNotificationSequenceZNode.encode (version 1)."""
    return json_bytes({"version": 1, "partitions": [
        {"topic": t, "partition": p} for t, p in partitions]})


def decode_isr_change(data: bytes | None) -> set[tuple[str, int]]:
    obj = parse_json(data)
    if not isinstance(obj, dict):
        return set()
    return {(str(e["topic"]), int(e["partition"])) for e in obj.get("partitions", [])}


LOG_DIR_FAILURE_EVENT = 1


def encode_log_dir_event(broker_id: int) -> bytes:
    """LogDirEventNotificationSequenceZNode.encode: a log dir of `broker_id` failed."""
    return json_bytes({"version": 1, "broker": broker_id, "event": LOG_DIR_FAILURE_EVENT})


def decode_log_dir_event(data: bytes) -> int:
    return int(parse_object(data, "log dir event")["broker"])


def encode_preferred_replica_election(partitions: Iterable[tuple[str, int]]) -> bytes:
    return json_bytes({"version": 1, "partitions": [
        {"topic": t, "partition": p} for t, p in partitions]})


def decode_preferred_replica_election(data: bytes | None) -> set[tuple[str, int]]:
    return decode_isr_change(data)


def encode_reassignment(reassignment: Mapping[tuple[str, int], Sequence[int]]) -> bytes:
    """ReassignPartitionsZNode.encode (the legacy, pre-2.4 way of starting a reassignment)."""
    return json_bytes({"version": 1, "partitions": [
        {"topic": t, "partition": p, "replicas": list(r)} for (t, p), r in reassignment.items()]})


def decode_reassignment(data: bytes) -> dict[tuple[str, int], list[int]]:
    obj = parse_object(data, "partition reassignment")
    return {(str(e["topic"]), int(e["partition"])): [int(r) for r in e["replicas"]]
            for e in obj.get("partitions", [])}
