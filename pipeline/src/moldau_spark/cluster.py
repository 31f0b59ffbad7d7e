"""What the driver asks the cluster: which partitions a subscription covers, and where
their logs begin and end (or which offset a timestamp maps to). Reads go through
confluent-kafka's AdminClient (Metadata and ListOffsets), like Spark's own source since
3.1, so no consumer group is involved."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from confluent_kafka import KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec

from .options import OptionError, Subscription
from .options import TopicPartition as TP

REQUEST_TIMEOUT_S = 30.0


class Cluster:
    """A lazily connected view of one cluster, for the driver side of the data source.
    Not picklable state: readers keep one per process and drop it when pickled."""

    def __init__(self, client: Mapping[str, str]) -> None:
        self._admin = AdminClient(dict(client))

    def topics(self) -> dict[str, int]:
        """Every topic's partition count (internal topics left out). Asks for all topics so
        that looking never auto-creates one."""
        metadata = self._admin.list_topics(timeout=REQUEST_TIMEOUT_S)
        return {name: len(topic.partitions) for name, topic in metadata.topics.items()
                if not name.startswith("__") and topic.error is None}

    def partitions(self, subscription: Subscription, *, require: bool) -> list[TP]:
        """The partitions a subscription reads now. With `require`, a subscribed or
        assigned topic (or partition) that does not exist is an error, not an empty read."""
        topics = self.topics()
        if subscription.kind == "subscribePattern":
            return sorted((t, p) for t, n in topics.items() if subscription.matches(t)
                          for p in range(n))
        wanted = (subscription.topics if subscription.kind == "subscribe"
                  else sorted({t for t, _ in subscription.assignment}))
        missing = [t for t in wanted if t not in topics]
        if missing and require:
            raise OptionError(f"topic(s) {', '.join(missing)} do not exist on the cluster "
                              f"(known: {', '.join(sorted(topics)) or 'none'})")
        if subscription.kind == "subscribe":
            return sorted((t, p) for t in wanted if t in topics for p in range(topics[t]))
        absent = [f"{t}-{p}" for t, p in subscription.assignment
                  if t in topics and p >= topics[t]]
        if absent and require:
            raise OptionError(f"assigned partition(s) {', '.join(absent)} do not exist")
        return [(t, p) for t, p in subscription.assignment if t in topics and p < topics[t]]

    def _list_offsets(self, specs: Mapping[TP, OffsetSpec]) -> dict[TP, int]:
        if not specs:
            return {}
        request = {TopicPartition(t, p): spec for (t, p), spec in specs.items()}
        futures = self._admin.list_offsets(request, request_timeout=REQUEST_TIMEOUT_S)
        result = {}
        for tp, future in futures.items():
            try:
                result[(tp.topic, tp.partition)] = future.result().offset
            except KafkaException as exc:
                raise RuntimeError(f"ListOffsets for {tp.topic}-{tp.partition} failed: "
                                   f"{exc.args[0]}") from None
        return result

    def earliest(self, partitions: Iterable[TP]) -> dict[TP, int]:
        return self._list_offsets({tp: OffsetSpec.earliest() for tp in partitions})

    def latest(self, partitions: Iterable[TP]) -> dict[TP, int]:
        return self._list_offsets({tp: OffsetSpec.latest() for tp in partitions})

    def for_times(self, timestamps: Mapping[TP, int]) -> dict[TP, int]:
        """The first offset at or after each timestamp; -1 where there is none."""
        return self._list_offsets({tp: OffsetSpec.for_timestamp(ts)
                                   for tp, ts in timestamps.items()})
