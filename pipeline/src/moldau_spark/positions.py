"""Turning startingOffsets / endingOffsets (and their timestamp forms) into concrete offsets
for the partitions a query reads, on the driver."""

from __future__ import annotations

from collections.abc import Sequence

from .cluster import Cluster
from .offsets import Offsets
from .options import EARLIEST, LATEST, OffsetSpec, OptionError
from .options import TopicPartition as TP


def resolve(cluster: Cluster, spec: OffsetSpec, partitions: Sequence[TP], *,
            name: str, strategy: str = "error") -> Offsets:
    """Offsets for every partition in `partitions`. Per-partition JSON must name them all
    (as Spark requires): a forgotten partition is an error, not a silent default."""
    if spec.kind in ("earliest", "latest"):
        lookup = cluster.earliest if spec.kind == "earliest" else cluster.latest
        return lookup(partitions)
    if spec.kind == "timestamp":
        return _by_time(cluster, {tp: spec.timestamp for tp in partitions}, name, strategy)
    require_all(spec, partitions, name)
    if spec.kind == "timestamps":
        return _by_time(cluster, {tp: spec.offsets[tp] for tp in partitions}, name, strategy)
    wanted = {tp: spec.offsets[tp] for tp in partitions}
    earliest = cluster.earliest([tp for tp, o in wanted.items() if o == EARLIEST])
    latest = cluster.latest([tp for tp, o in wanted.items() if o == LATEST])
    return {tp: earliest.get(tp, latest.get(tp, o)) for tp, o in wanted.items()}


def require_all(spec: OffsetSpec | None, partitions: Sequence[TP], name: str) -> None:
    if spec is None or spec.kind not in ("offsets", "timestamps"):
        return
    missing = [f"{t}-{p}" for t, p in partitions if (t, p) not in spec.offsets]
    if missing:
        raise OptionError(f"option {name} must give every partition the query reads; "
                          f"missing: {', '.join(missing)} (use -2 for earliest, -1 for latest)")
    extra = sorted(f"{t}-{p}" for t, p in spec.offsets if (t, p) not in set(partitions))
    if extra:
        raise OptionError(f"option {name} names partition(s) the query does not read or "
                          f"that do not exist: {', '.join(extra)}")


def _by_time(cluster: Cluster, timestamps: dict[TP, int], name: str, strategy: str) -> Offsets:
    found = cluster.for_times(timestamps)
    missing = [tp for tp, offset in found.items() if offset < 0]
    if missing and strategy == "error":
        listed = ", ".join(f"{t}-{p} (>= {timestamps[(t, p)]})" for t, p in missing)
        raise OptionError(f"option {name}: no record at or after the timestamp in {listed}; "
                          "set startingOffsetsByTimestampStrategy=latest to start at the end")
    latest = cluster.latest(missing)
    return {tp: latest[tp] if offset < 0 else offset for tp, offset in found.items()}
