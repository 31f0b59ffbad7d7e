"""A confluent-kafka consumer on its share of a topic's partitions, one process of the
broker bench's parallel Python consume row (as one member of a consumer group would
be, with the assignment fixed so the members start together and nothing rebalances).

Usage: consume_share.py BOOTSTRAP TOPIC PARTITIONS RECORDS SIZE, PARTITIONS as "0,3".
Reads RECORDS records of SIZE bytes from the beginning of those partitions and prints
{"records", "bytes", "seconds"}, seconds from the assignment to the last record, and
"first_at", "first_bytes", "last_at" (CLOCK_MONOTONIC seconds of the first batch, its
bytes, and of the last batch), as rdkperf -consume does. Like the single consumer row, it
counts records and touches no value: the figure is the client library's, not a Python
loop's over each record.
"""

from __future__ import annotations

import json
import sys
import time

from confluent_kafka import Consumer, TopicPartition


def main(bootstrap: str, topic: str, partitions: str, records: int, size: int) -> None:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-share",
                         "enable.auto.commit": False, "fetch.max.bytes": 52428800,
                         "max.partition.fetch.bytes": 10485760,
                         "queued.max.messages.kbytes": 1 << 20})
    t0 = time.perf_counter()
    consumer.assign([TopicPartition(topic, int(p), 0) for p in partitions.split(",")])
    got = 0
    last = first = t0
    first_records = -1
    while got < records and time.perf_counter() - t0 < 600:
        # no more than is still due: a batch that cannot fill waits out the timeout
        batch = consumer.consume(min(10_000, records - got), 1.0)
        if batch:
            got += len(batch)
            last = time.perf_counter()
            if first_records < 0:
                first, first_records = last, got
    consumer.close()
    # perf_counter is CLOCK_MONOTONIC here, the clock rdkperf's times are on
    print(json.dumps({"records": got, "bytes": got * size, "seconds": last - t0,
                      "first_at": first, "first_bytes": max(first_records, 0) * size,
                      "last_at": last}))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]))
