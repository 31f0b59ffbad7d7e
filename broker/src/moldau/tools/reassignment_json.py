"""Kafka's reassignment JSON files: topics-to-move ({"topics":[{"topic":…}],"version":1})
and reassignment plans ({"version":1,"partitions":[{"topic","partition","replicas",
"log_dirs"}]})."""

from __future__ import annotations

import json
from typing import Any

from moldau.tools.options import ToolError

TP = tuple[str, int]
ANY = "any"


def _load(text: str) -> dict[str, Any]:  # Any: JSON from the user's file
    """The JSON object of a version 1 file."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        raise ToolError("The input string is not a valid JSON") from None
    if not isinstance(data, dict):
        raise ToolError("The input string is not a valid JSON")
    version = data.get("version", 1)
    if version != 1:
        raise ToolError(f"Not supported version field value {version}")
    return data


def read_file(path: str) -> str:
    try:
        with open(path, encoding="utf-8") as fh:
            return fh.read()
    except OSError as exc:
        raise ToolError(f"{path} ({exc.strerror})") from None


def parse_topics(text: str) -> list[str]:
    data = _load(text)
    try:
        topics = [str(t["topic"]) for t in data.get("topics", [])]
    except (TypeError, KeyError):
        raise ToolError("Each entry of \"topics\" needs a \"topic\" field") from None
    duplicates = sorted({t for t in topics if topics.count(t) > 1})
    if duplicates:
        raise ToolError("List of topics to reassign contains duplicate entries: "
                        f"[{', '.join(duplicates)}]")
    return topics


def parse_plan(text: str) -> dict[TP, list[int]]:
    """The partitions and target replicas of a plan, with Kafka's checks (the log dirs:
    parse_log_dirs)."""
    data = _load(text)
    plan: dict[TP, list[int]] = {}
    duplicates = []
    try:
        for entry in data.get("partitions", []):
            tp = (str(entry["topic"]), int(entry["partition"]))
            replicas = [int(r) for r in entry["replicas"]]
            dirs = entry.get("log_dirs", [ANY] * len(replicas))
            if len(dirs) != len(replicas):
                raise ToolError(f"Size of replicas list {replicas} is different from size "
                                    f"of log dirs list {dirs} for partition {tp[0]}-{tp[1]}")
            if tp in plan:
                duplicates.append(f"{tp[0]}-{tp[1]}")
            plan[tp] = replicas
    except (TypeError, KeyError, ValueError):
        raise ToolError("Each partition needs \"topic\", \"partition\" and \"replicas\" "
                            "fields") from None
    if not plan:
        raise ToolError("Partition reassignment list cannot be empty")
    if any(not r for r in plan.values()):
        raise ToolError("Partition replica list cannot be empty")
    if duplicates:
        raise ToolError("Partition reassignment contains duplicate topic partitions: "
                            + ",".join(duplicates))
    repeated = [f"{t}-{p} contains multiple entries for "
                + ",".join(str(r) for r in sorted({r for r in rs if rs.count(r) > 1}))
                for (t, p), rs in plan.items() if len(set(rs)) != len(rs)]
    if repeated:
        raise ToolError("Partition replica lists may not contain duplicate entries: "
                            + ". ".join(repeated))
    return plan


def format_plan(assignment: dict[TP, list[int]]) -> str:
    """Kafka's formatAsReassignmentJson: sorted partitions, log dirs "any"."""
    partitions = [{"topic": t, "partition": p, "replicas": assignment[(t, p)],
                   "log_dirs": [ANY] * len(assignment[(t, p)])}
                  for t, p in sorted(assignment)]
    return json.dumps({"version": 1, "partitions": partitions}, separators=(",", ":"))


def parse_log_dirs(text: str) -> dict[tuple[str, int, int], str]:
    """The log dirs a plan asks for, by (topic, partition, broker); "any" asks for none
    (parse_plan checks the file first)."""
    moves: dict[tuple[str, int, int], str] = {}
    for entry in _load(text).get("partitions", []):
        replicas = [int(r) for r in entry["replicas"]]
        for replica, path in zip(replicas, entry.get("log_dirs", [ANY] * len(replicas)),
                                 strict=True):
            if path != ANY:
                moves[(str(entry["topic"]), int(entry["partition"]), replica)] = str(path)
    return moves
