"""KafkaZkClient's operations on the old consumers' offsets, in Kafka 3.9's layout (ZkData's
ConsumerOffset, KafkaZkClient's setOrCreateConsumerOffset and getConsumerOffset):

- `/consumers/<group>/offsets/<topic>/<partition>`: the committed offset as a decimal
  string (plain UTF-8, not JSON).

Kafka 3.9 in ZooKeeper mode still keeps the offsets of OffsetCommit v0 and OffsetFetch v0
there (KafkaApis.commitOffsetsToZookeeper and handleOffsetFetchRequestFromZookeeper),
apart from the group coordinator's `__consumer_offsets`: a v0 commit is never seen by v1+
fetches, nor the reverse.

Each function is a method of KafkaZkClient, which binds it in its class body (zk_client.py);
it takes the ZkSession it runs on and uses its generic operations (zk_session.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from moldau.cluster.zk_paths import CONSUMERS_PATH

if TYPE_CHECKING:
    from moldau.cluster.zk_session import ZkSession


def consumer_offset_path(group: str, topic: str, partition: int) -> str:
    """Kafka's ConsumerOffset.path."""
    return f"{CONSUMERS_PATH}/{group}/offsets/{topic}/{partition}"


def set_or_create_consumer_offset(self: ZkSession, group: str, topic: str, partition: int,
                                  offset: int) -> None:
    """Sets the offset's znode, creating it (with its parents) when missing."""
    self._set_or_create(consumer_offset_path(group, topic, partition), str(offset).encode())


def get_consumer_offset(self: ZkSession, group: str, topic: str, partition: int) -> int | None:
    """The offset stored for the partition, None when there is none."""
    found = self.get(consumer_offset_path(group, topic, partition))
    if found is None or found[0] is None:
        return None
    return int(found[0].decode())
