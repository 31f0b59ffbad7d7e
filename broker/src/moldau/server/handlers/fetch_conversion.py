"""A consumer's Fetch answer in the formats and codecs an old client reads (Kafka's
maybeConvertFetchedData, applied when the answer is built, after any long poll): below
v10 a zstd topic answers UNSUPPORTED_COMPRESSION_TYPE; below v4 the records are
down-converted to message format v0 or v1 (moldau.protocol.down_convert), or
UNSUPPORTED_VERSION where the topic's message.downconversion.enable is false; up to v5 a
storage error reads NOT_LEADER_OR_FOLLOWER, which those clients retry."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING

from moldau.errors import (
    KafkaStorageError,
    NotLeaderOrFollowerError,
    UnsupportedCompressionTypeError,
    UnsupportedVersionError,
)
from moldau.protocol import down_convert
from moldau.protocol.compression import UnsupportedCompressionError
from moldau.protocol.generated.fetch_response import FetchResponse

from ..responses import FileRecords

if TYPE_CHECKING:
    from moldau.protocol.generated.fetch_request import FetchRequest
    from moldau.replication.replica_manager import Partition

    from ..broker_metrics import BrokerTopicStats, NoTopicStats

ZSTD_VERSION = 10  # consumers below Fetch v10 cannot read zstd
STORAGE_ERROR_VERSION = 5  # up to here KAFKA_STORAGE_ERROR is not known to clients


def for_old_consumer(request: FetchRequest, response: FetchResponse, version: int,
                     partitions: Mapping[tuple[str, int], Partition],
                     topic_stats: BrokerTopicStats | NoTopicStats) -> None:
    """Rewrite `response` (a consumer's, version < ZSTD_VERSION) in place."""
    to_magic = down_convert.needs_conversion(version)
    offsets = {(t.topic, p.partition): p.fetch_offset
               for t in request.topics for p in t.partitions}
    for topic in response.responses:
        for data in topic.partitions:
            if data.error_code == KafkaStorageError.code and version <= STORAGE_ERROR_VERSION:
                data.error_code = NotLeaderOrFollowerError.code
            partition = partitions.get((topic.topic, data.partition_index))
            if data.error_code or partition is None:
                continue
            config = partition.log.config
            if config.compression_type == "zstd":
                _refused(data, UnsupportedCompressionTypeError.code)
            elif to_magic is None:
                continue
            elif not config.message_downconversion_enable:
                _refused(data, UnsupportedVersionError.code)
            elif data.records is not None and len(data.records):
                fetch_offset = offsets.get((topic.topic, data.partition_index), 0)
                try:
                    done = down_convert.down_convert(_bytes(data.records), to_magic,
                                                     fetch_offset)
                except UnsupportedCompressionError:  # a zstd batch of the producer's
                    _refused(data, UnsupportedCompressionTypeError.code)
                    continue
                data.records = done.records
                if done.converted:
                    topic_stats.mark("FetchMessageConversionsPerSec", topic.topic,
                                     done.converted)


def _bytes(records: FileRecords | bytes) -> bytes:
    """A partition's records as bytes (a file range is read)."""
    if isinstance(records, FileRecords):
        return os.pread(records.fd, records.size, records.position)
    return bytes(records)


def _refused(data: FetchResponse.PartitionData, code: int) -> None:
    """A partition answered with an error alone, as Kafka's FetchResponse.partitionResponse."""
    data.error_code = code
    data.high_watermark = data.last_stable_offset = data.log_start_offset = -1
    data.records = b""
    data.aborted_transactions = None
