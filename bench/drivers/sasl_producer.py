"""The SASL suite's confluent-kafka producer (bench/sasl.py), in a process of its own as
the broker suite's latency driver is, so that neither the bench's own work nor the
storm's clients share its interpreter.

Usage:
    sasl_producer.py CONFIG_JSON TOPIC PARTITIONS SIZE max SECONDS
    sasl_producer.py CONFIG_JSON TOPIC PARTITIONS SIZE paced RECORDS_PER_S SAMPLES PAUSE_S

CONFIG_JSON holds librdkafka's bootstrap and security settings; the driver adds acks=1
and linger.ms 0 (a record goes out as soon as the connection is free, so latency is the
broker's answer time, not the client's batching). Records of SIZE bytes go round-robin
over PARTITIONS. Both modes first connect, authenticate and send a record to every
partition, so the clock starts on a producer that knows the topic.

max: send as fast as the client takes records for SECONDS, then flush; prints
    {"records", "bytes", "seconds"}. Each record gets a delivery callback that reads the
    clock, as in paced mode, so the maximum is that of the same per-record work.
paced: print "ready", then send RECORDS_PER_S, paced as bench/drivers/latency_python.py
    (each pass sends every record due by then, serves the delivery reports and sleeps
    PAUSE_S), until a line "stop" or the end of stdin; then flush, write each delivered
    record's due time (CLOCK_MONOTONIC seconds) and its latency from due time to delivery
    report (seconds) to SAMPLES as pairs of native doubles, and print
    {"sent", "delivered", "failed", "first_error"}. Counting from the due time, not the
    send, keeps a stall from hiding the records that waited behind it.
"""

from __future__ import annotations

import functools
import json
import os
import sys
import threading
import time
from array import array

from confluent_kafka import KafkaError, Message, Producer

WARM_UP_TIMEOUT_S = 60.0
FLUSH_TIMEOUT_S = 120.0


def make_producer(config_json: str, topic: str, partitions: int, value: bytes) -> Producer:
    settings = json.loads(config_json) | {"acks": 1, "linger.ms": 0,
                                          "compression.type": "none"}
    producer = Producer(settings)
    for partition in range(partitions):
        producer.produce(topic, value, partition=partition)
    if producer.flush(WARM_UP_TIMEOUT_S) != 0:
        raise SystemExit(f"sasl_producer: the warm-up records to {topic} were not "
                         f"acknowledged within {WARM_UP_TIMEOUT_S:.0f} s")
    return producer


def run_max(producer: Producer, topic: str, partitions: int, value: bytes,
            seconds: float) -> None:
    latencies = array("d")

    def delivered(due: float, err: KafkaError | None, _msg: Message) -> None:
        latencies.append(time.monotonic() - due)

    sent = 0
    start = time.monotonic()
    deadline = start + seconds
    while True:
        # a slice at a time: reading the clock for every record would cost as much as
        # the produce call
        for _ in range(1000):
            try:
                producer.produce(topic, value, partition=sent % partitions,
                                 on_delivery=functools.partial(delivered, time.monotonic()))
            except BufferError:  # the client's queue is full: let it send
                producer.poll(0.001)
                continue
            sent += 1
        producer.poll(0)
        if time.monotonic() >= deadline:
            break
    if producer.flush(FLUSH_TIMEOUT_S) != 0:
        raise SystemExit("sasl_producer: records left unacknowledged after the max run")
    elapsed = time.monotonic() - start
    print(json.dumps({"records": sent, "bytes": sent * len(value), "seconds": elapsed}))


def run_paced(producer: Producer, topic: str, partitions: int, value: bytes,
              rate: float, samples_path: str, pause: float) -> None:
    stop = threading.Event()

    def wait_for_stop() -> None:
        for line in sys.stdin:
            if line.strip() == "stop":
                break
        stop.set()

    threading.Thread(target=wait_for_stop, daemon=True).start()
    due_times = array("d")
    latencies = array("d")
    failures: list[str] = []

    def delivered(due: float, err: KafkaError | None, _msg: Message) -> None:
        if err is not None:
            failures.append(str(err))
            return
        due_times.append(due)
        latencies.append(time.monotonic() - due)

    interval = 1.0 / rate
    print("ready", flush=True)
    start = time.monotonic()
    sent = 0
    while not stop.is_set():
        now = time.monotonic()
        while (due := start + sent * interval) <= now:
            try:
                producer.produce(topic, value, partition=sent % partitions,
                                 on_delivery=functools.partial(delivered, due))
            except BufferError:  # queue full: the broker fell behind; due times stand
                break
            sent += 1
        producer.poll(0)
        time.sleep(pause)
    undelivered = producer.flush(FLUSH_TIMEOUT_S)
    pairs = array("d")
    for due, latency in zip(due_times, latencies, strict=True):
        pairs.append(due)
        pairs.append(latency)
    with open(samples_path, "wb") as out:
        pairs.tofile(out)
    print(json.dumps({"sent": sent, "delivered": len(latencies),
                      "failed": len(failures) + undelivered,
                      "first_error": failures[0] if failures else None}))


def main(argv: list[str]) -> None:
    config_json, topic, partitions, size, mode, *rest = argv
    value = os.urandom(int(size))
    producer = make_producer(config_json, topic, int(partitions), value)
    if mode == "max" and len(rest) == 1:
        run_max(producer, topic, int(partitions), value, float(rest[0]))
    elif mode == "paced" and len(rest) == 3:
        run_paced(producer, topic, int(partitions), value, float(rest[0]), rest[1],
                  float(rest[2]))
    else:
        raise SystemExit(f"sasl_producer: unknown mode or arguments {argv[4:]}; see the "
                         "module's usage")


if __name__ == "__main__":
    main(sys.argv[1:])
