"""The broker bench's confluent-kafka latency driver, in a process of its own, as
rdkperf -e2e is, so that it shares no interpreter (its lock and its garbage collector)
with the bench's own work.

Usage: latency_python.py BOOTSTRAP TOPIC BYTES_PER_S SECONDS SIZE PARTITIONS PAUSE_S

Sends SIZE-byte records at BYTES_PER_S for SECONDS round-robin over PARTITIONS with
acks=1 and linger.ms 0, paced as `rdkperf -e2e` is: each pass sends every record due by
then, serves the delivery reports and sleeps PAUSE_S (a loop that spins instead holds one
of the two cores the broker and librdkafka's threads need). Latency counts from when a
record was due, not when it was sent (coordinated omission), to its delivery report.
Prints {"p50", "p99", "p999", "count"} in milliseconds.
"""

from __future__ import annotations

import json
import os
import sys
import time

from confluent_kafka import Producer


def main(bootstrap: str, topic: str, rate: float, seconds: float, size: int,
         partitions: int, pause: float) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": 1, "linger.ms": 0})
    value = os.urandom(size)
    # Warm up: the topic is created and its metadata known before the clock starts, so
    # the figures are the steady state, not topic creation.
    for i in range(partitions * 10):
        producer.produce(topic, value, partition=i % partitions)
    producer.flush(30)
    samples: list[float] = []
    interval = size / rate
    start = time.perf_counter()
    sent = 0
    while (now := time.perf_counter()) - start < seconds:
        while (due := start + sent * interval) <= now:
            producer.produce(topic, value, partition=sent % partitions,
                             on_delivery=lambda err, _m, d=due: samples.append(
                                 time.perf_counter() - d))
            sent += 1
        producer.poll(0)
        time.sleep(pause)
    producer.flush(30)
    samples.sort()

    def at(q: float) -> float:
        return samples[min(len(samples) - 1, int(q * len(samples)))] * 1000 if samples else 0.0

    print(json.dumps({"p50": at(0.5), "p99": at(0.99), "p999": at(0.999),
                      "count": len(samples)}))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], float(sys.argv[3]), float(sys.argv[4]), int(sys.argv[5]),
         int(sys.argv[6]), float(sys.argv[7]))
