"""Names of partition directories in a log dir (Kafka's UnifiedLog naming): `<topic>-<n>`
for a partition's log, `<topic>-<n>.<uuid hex>-future` for the copy a replica move is
building in another dir, `<topic>-<n>.<uuid hex>-delete` for one being removed."""

from __future__ import annotations

import os
import uuid

DELETE_DIR_SUFFIX = "-delete"
FUTURE_DIR_SUFFIX = "-future"


def _suffixed(topic: str, partition: int, suffix: str) -> str:
    return f"{topic}-{partition}.{uuid.uuid4().hex}{suffix}"


def future_dir_name(topic: str, partition: int) -> str:
    return _suffixed(topic, partition, FUTURE_DIR_SUFFIX)


def delete_dir_name(topic: str, partition: int) -> str:
    return _suffixed(topic, partition, DELETE_DIR_SUFFIX)


def topic_partition_of(directory: str) -> tuple[str, int]:
    """The partition a directory holds, whatever its kind: `orders-3`,
    `orders-3.<hex>-future` and `orders-3.<hex>-delete` all hold ("orders", 3)."""
    name = os.path.basename(directory)
    for suffix in (FUTURE_DIR_SUFFIX, DELETE_DIR_SUFFIX):
        if name.endswith(suffix):
            stem, dot, _hex = name[: -len(suffix)].rpartition(".")
            if dot:
                name = stem
            break
    topic, _, partition = name.rpartition("-")
    return topic, int(partition)


def parse_partition_dir(name: str) -> tuple[str, int] | None:
    """`orders-3` -> ("orders", 3); None for names that are not a partition's log dir."""
    topic, sep, partition = name.rpartition("-")
    if not sep or not topic or not partition.isdigit():
        return None
    return topic, int(partition)
