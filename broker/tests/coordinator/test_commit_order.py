"""The order of an offset commit's records, against what Kafka 3.9.1 itself produced: the
first case is the reference lab's __consumer_offsets batch (DumpLogSegments over Kafka's
log shows sequences none 0, snappy 1, zstd 2, lz4 3, gzip 4); the others are the orders
that kafka-clients' TopicIdPartition in a Scala 2.13.15 mutable.HashMap, turned into an
immutable Map as Kafka's GroupCoordinatorAdapter does, iterated in."""

from __future__ import annotations

import pytest

from moldau.coordinator.group.commit_order import commit_order, java_string_hash

TopicPartitions = list[tuple[str, int]]


def _named(text: str) -> TopicPartitions:
    """'orders 1;orders 2' -> [("orders", 1), ("orders", 2)]"""
    pairs = [item.rsplit(" ", 1) for item in text.split(";")]
    return [(topic, int(partition)) for topic, partition in pairs]


CASES: list[tuple[str, str, str]] = [
    ("the lab's five codec topics (a CHAMP trie)",
     "jc-none 0;jc-gzip 0;jc-snappy 0;jc-lz4 0;jc-zstd 0",
     "jc-none 0;jc-snappy 0;jc-zstd 0;jc-lz4 0;jc-gzip 0"),
    ("two entries: the mutable map's bucket order, not the request's",
     "orders 2;payments 3", "payments 3;orders 2"),
    ("three partitions of a topic, asked in reverse",
     "orders 3;orders 2;orders 1", "orders 1;orders 2;orders 3"),
    ("three topics", "clicks 0;views 0;users 0", "views 0;users 0;clicks 0"),
    ("thirteen entries: the mutable table has grown once",
     ";".join(f"orders {p}" for p in range(13)),
     "orders 7;orders 6;orders 8;orders 5;orders 0;orders 9;orders 1;orders 2;orders 3;"
     "orders 4;orders 12;orders 11;orders 10"),
    # "Aa" and "BB" share a String hash: equal whole hashes keep the insertion order
    ("a whole-hash collision in a trie", "BB 0;Aa 0;x 1;y 2;z 3", "z 3;y 2;x 1;BB 0;Aa 0"),
]


@pytest.mark.parametrize(("request_order", "kafka_order"),
                         [(asked, written) for _, asked, written in CASES],
                         ids=[name for name, _, _ in CASES])
def test_records_follow_kafkas_order(request_order: str, kafka_order: str) -> None:
    assert commit_order(_named(request_order)) == _named(kafka_order)


def test_a_partition_asked_twice_is_written_once() -> None:
    assert commit_order([("t", 0), ("t", 1), ("t", 0)]) == commit_order([("t", 0), ("t", 1)])


def test_java_string_hash_counts_utf16_code_units() -> None:
    assert java_string_hash("") == 0
    assert java_string_hash("Aa") == java_string_hash("BB") == 2112
    assert java_string_hash("\U0001F600") == 1772899  # a surrogate pair: two code units
