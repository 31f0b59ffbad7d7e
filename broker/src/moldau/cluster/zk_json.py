"""Kafka's JSON in ZooKeeper, byte for byte: Jackson's compact output, and the key order
of the Scala and Java maps Kafka serialises (their iteration order, reproduced from the
JVM hash functions); tolerant parsing. Pure, no I/O.

The order helpers take the keys present and return them in the order the JVM map would
iterate them; `ordered` then builds the dict that json.dumps writes in that order.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Mapping, Sequence
from functools import lru_cache
from typing import Any, TypeVar

V = TypeVar("V")  # the values `ordered` passes through


def _u32(value: int) -> int:
    return value & 0xFFFFFFFF


def _s32(value: int) -> int:
    value &= 0xFFFFFFFF
    return value - (1 << 32) if value & 0x80000000 else value


def _java_hash(text: str) -> int:
    """String.hashCode (over UTF-16 code units), as an unsigned 32-bit value."""
    data = text.encode("utf-16-be", "surrogatepass")
    h = 0
    for i in range(0, len(data), 2):
        h = (31 * h + (data[i] << 8 | data[i + 1])) & 0xFFFFFFFF
    return h


def _spread(h: int) -> int:
    """h ^ (h >>> 16): the hash spreading of Scala's mutable.HashMap and Java's HashMap."""
    return h ^ (h >> 16)


@lru_cache(maxsize=256)
def scala_mutable_order(keys: tuple[str, ...], table_size: int) -> tuple[str, ...]:
    """Iteration order of a Scala 2.13 mutable.HashMap after inserting `keys` in order.

    Buckets are visited in index order; inside a bucket nodes are kept sorted by their
    (signed) improved hash. The table doubles before an insert that would reach 3/4 full.
    """
    for size in range(len(keys)):  # `size` entries before each insert
        if size + 1 >= int(table_size * 0.75):
            table_size *= 2
    hashes = [_spread(_java_hash(k)) for k in keys]
    ranked = sorted(range(len(keys)),
                    key=lambda i: (hashes[i] & (table_size - 1), _s32(hashes[i]), i))
    return tuple(keys[i] for i in ranked)


def scala_mutable_initial_table(known_size: int) -> int:
    """Table size of mutable.HashMap.from(elems) (mutable.Map(k -> v, ...)) for n elems."""
    if known_size <= 0:
        return 16
    capacity = int((known_size + 1) / 0.75)
    return 1 << max(capacity - 1, 4).bit_length()  # highestOneBit(max(c - 1, 4)) * 2


def _champ_improve(h: int) -> int:
    """scala.collection.Hashing.improve, used by the immutable HashMap (CHAMP)."""
    h = _u32(h + _u32(~(h << 9)))
    h ^= h >> 14
    h = _u32(h + (h << 4))
    return h ^ (h >> 10)


def _champ_order(keys: Sequence[str], shift: int = 0) -> list[str]:
    if shift >= 32:  # full hash collision: a collision node keeps insertion order
        return list(keys)
    groups: dict[int, list[str]] = {}
    for key in keys:
        groups.setdefault((_champ_improve(_java_hash(key)) >> shift) & 31, []).append(key)
    # A node iterates its own entries (by bit position) before its sub-nodes.
    order = [g[0] for _, g in sorted(groups.items()) if len(g) == 1]
    for _, group in sorted(groups.items()):
        if len(group) > 1:
            order.extend(_champ_order(group, shift + 5))
    return order


@lru_cache(maxsize=256)
def scala_immutable_order(keys: tuple[str, ...]) -> tuple[str, ...]:
    """Iteration order of a Scala 2.13 immutable Map built from `keys`: Map1..Map4 keep
    insertion order, five or more keys make a CHAMP HashMap."""
    unique = tuple(dict.fromkeys(keys))
    return unique if len(unique) <= 4 else tuple(_champ_order(unique))


def java_hashmap_order(keys: Sequence[str]) -> list[str]:
    """Iteration order of a java.util.HashMap (default capacity) filled with `keys`."""
    table = 16
    for size in range(1, len(keys) + 1):  # resize once the size passes 3/4 of the table
        if size > table * 3 // 4:
            table *= 2
    ranked = sorted(range(len(keys)), key=lambda i: (_spread(_java_hash(keys[i])) & (table - 1), i))
    return [keys[i] for i in ranked]


def java_properties_order(keys: Sequence[str]) -> list[str]:
    """Iteration order of a java.util.Properties (a ConcurrentHashMap of 16 bins inside).

    Bins are visited in index order, a bin lists its keys in insertion order, and a resize
    (at 3/4 full) moves each bin's last run of same-destination nodes as it is and prepends
    the others one by one, as ConcurrentHashMap.transfer does.
    """
    table: list[list[str]] = [[] for _ in range(16)]
    for count, key in enumerate(dict.fromkeys(keys), start=1):
        n = len(table)
        table[(_spread(_java_hash(key)) & 0x7FFFFFFF) & (n - 1)].append(key)
        if count >= n - (n >> 2):
            new: list[list[str]] = [[] for _ in range(2 * n)]
            for i, bin_keys in enumerate(table):
                if not bin_keys:
                    continue
                bits = [(_spread(_java_hash(k)) & 0x7FFFFFFF) & n for k in bin_keys]
                last_run = len(bits) - 1
                while last_run > 0 and bits[last_run - 1] == bits[-1]:
                    last_run -= 1
                low = bin_keys[last_run:] if bits[-1] == 0 else []
                high = bin_keys[last_run:] if bits[-1] != 0 else []
                for k, bit in zip(bin_keys[:last_run], bits[:last_run], strict=True):
                    (high if bit else low).insert(0, k)
                new[i], new[i + n] = low, high
            table = new
    return [k for bin_keys in table for k in bin_keys]


def ordered(obj: Mapping[str, V], order: Iterable[str]) -> dict[str, V]:
    """obj's entries in the given key order (json.dumps keeps it); absent keys are skipped."""
    return {k: obj[k] for k in order if k in obj}


def json_bytes(obj: object) -> bytes:
    """Jackson's compact output: no spaces, non-ASCII written as UTF-8."""
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def parse_json(data: bytes | None) -> Any:  # Any: JSON from a znode, any shape
    """Json.parseBytes: None for a null or empty znode."""
    if not data:
        return None
    return json.loads(data.decode("utf-8"))


def parse_object(data: bytes | None, what: str) -> dict[str, Any]:  # Any: znode JSON
    parsed = parse_json(data)
    if not isinstance(parsed, dict):
        raise ValueError(f"{what}: expected a JSON object, got {data!r}")
    return parsed


def now_ms() -> int:
    """The wall clock in ms, as the timestamps Kafka writes into znodes."""
    return int(time.time() * 1000)
