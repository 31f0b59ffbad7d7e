"""The order in which Kafka 3.9's group coordinator (ZooKeeper mode) writes the records of
one offset commit.

Kafka's GroupCoordinatorAdapter collects the request's partitions in a Scala 2.13
`mutable.HashMap` keyed by `TopicIdPartition` (with the zero topic id) and turns it into
an immutable `Map`; GroupMetadataManager.storeOffsets writes the records in that map's
iteration order. The batch has base sequence 0, so each record's sequence is its position
and DumpLogSegments shows the order: a log that reads the same as Kafka's needs it.

Up to four entries, the immutable map keeps the order in which the mutable one iterates
(bucket by bucket); from five on it is a CHAMP trie, which iterates by the bits of each
key's improved hash. Both follow from the keys' Java hash codes alone.
"""

from __future__ import annotations

from collections.abc import Iterable

from .records import TopicPartition

# Scala's MapBuilderImpl holds up to this many entries in insertion order (Map1..Map4)
SMALL_MAP_MAX = 4
# mutable.HashMap's defaults: initial table length and load factor
INITIAL_TABLE_LENGTH = 16
LOAD_FACTOR = 0.75
# immutable.HashMap: hash bits consumed per trie level, and the bits of a hash
BITS_PER_LEVEL = 5
HASH_BITS = 32


def _int32(value: int) -> int:
    """Java int overflow: wrap to a signed 32-bit value."""
    value &= 0xFFFFFFFF
    return value - (1 << 32) if value >= 1 << 31 else value


def _unsigned_shift(value: int, bits: int) -> int:
    """Java's `>>>` on an int."""
    return (value & 0xFFFFFFFF) >> bits


def java_string_hash(text: str) -> int:
    """String.hashCode over UTF-16 code units."""
    data = text.encode("utf-16-be")
    value = 0
    for i in range(0, len(data), 2):
        value = (31 * value + int.from_bytes(data[i:i + 2], "big")) & 0xFFFFFFFF
    return _int32(value)


def topic_id_partition_hash(topic: str, partition: int) -> int:
    """TopicIdPartition.hashCode with the zero topic id (whose own hash is 0), over
    TopicPartition.hashCode."""
    topic_partition = _int32(31 * (31 + partition) + java_string_hash(topic))
    return _int32(31 * 31 + topic_partition)


def _mutable_spread(hash_code: int) -> int:
    """mutable.HashMap's improveHash: the high half folded into the low half."""
    return _int32(hash_code ^ _unsigned_shift(hash_code, 16))


def _immutable_improve(hash_code: int) -> int:
    """scala.collection.Hashing.improve, which immutable.HashMap applies to every key."""
    h = _int32(hash_code + ~_int32(hash_code << 9))
    h = _int32(h ^ _unsigned_shift(h, 14))
    h = _int32(h + _int32(h << 4))
    return _int32(h ^ _unsigned_shift(h, 10))


def _table_length(entries: int) -> int:
    """The table length of a mutable.HashMap after `entries` distinct insertions: it
    doubles before an insertion that would reach the threshold."""
    length, threshold = INITIAL_TABLE_LENGTH, int(INITIAL_TABLE_LENGTH * LOAD_FACTOR)
    for size in range(entries):
        if size + 1 >= threshold:
            length *= 2
            threshold = int(length * LOAD_FACTOR)
    return length


def mutable_map_order(keys: list[TopicPartition]) -> list[TopicPartition]:
    """Iteration order of a mutable.HashMap filled with `keys` (distinct) in this order:
    buckets by index, each sorted by spread hash, equal hashes in insertion order."""
    mask = _table_length(len(keys)) - 1
    spread = {key: _mutable_spread(topic_id_partition_hash(*key)) for key in keys}
    return sorted(keys, key=lambda key: (spread[key] & mask, spread[key]))


def _trie_order(entries: list[tuple[int, TopicPartition]], shift: int) -> list[TopicPartition]:
    """CHAMP iteration of one trie node: the keys alone in their hash slot first, by slot;
    then the sub-nodes of shared slots, by slot. Keys whose whole hash is equal end in a
    collision node, which keeps their insertion order."""
    if shift >= HASH_BITS:
        return [key for _, key in entries]
    slots: dict[int, list[tuple[int, TopicPartition]]] = {}
    for entry in entries:
        slot = _unsigned_shift(entry[0], shift) & ((1 << BITS_PER_LEVEL) - 1)
        slots.setdefault(slot, []).append(entry)
    ordered = [group[0][1] for _, group in sorted(slots.items()) if len(group) == 1]
    for _, group in sorted(slots.items()):
        if len(group) > 1:
            ordered += _trie_order(group, shift + BITS_PER_LEVEL)
    return ordered


def commit_order(partitions: Iterable[TopicPartition]) -> list[TopicPartition]:
    """The partitions of one OffsetCommit request, in the order Kafka writes them."""
    inserted = list(dict.fromkeys(partitions))  # a repeated partition keeps its first place
    by_bucket = mutable_map_order(inserted)
    if len(by_bucket) <= SMALL_MAP_MAX:
        return by_bucket
    return _trie_order([(_immutable_improve(topic_id_partition_hash(*key)), key)
                        for key in by_bucket], 0)
