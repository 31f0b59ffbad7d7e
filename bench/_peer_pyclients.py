"""The peers' Python clients, driven the way each is meant to go fast.

- Moldau: confluent-kafka (librdkafka underneath), produce() in a loop with
  linger.ms 5 and 1 MiB batches; consume(10000) in a loop.
- NATS: nats-py JetStream publish_async (4000 acknowledgements outstanding, its default
  window) and an ordered push consumer.
- Redis: redis-py, XADD in non-transactional pipelines of 1000, XRANGE pages of 1000.
- RabbitMQ streams: rstream (the stream protocol, asyncio), send_batch of 1000 records
  with at most 10,000 unconfirmed; a consumer from the first offset, credit 100 chunks.

Each function returns the seconds its loop took; the caller turns them into rates.
"""

from __future__ import annotations

import asyncio
import time

import _support as s

PAGE = 1000


def kafka_produce(addr: str, topic: str, count: int, size: int, partitions: int) -> float:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": addr, "acks": 1, "linger.ms": 5,
                         "batch.size": 1 << 20, "queue.buffering.max.kbytes": 1 << 20,
                         "queue.buffering.max.messages": 2_000_000})
    t0 = time.perf_counter()
    s.produce_all(producer, topic, bytes(size), count, partitions)
    return time.perf_counter() - t0


def kafka_consume(addr: str, topic: str, count: int, partitions: int) -> float:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": addr, "group.id": "peers-py",
                         "enable.auto.commit": False, "fetch.max.bytes": 52428800,
                         "max.partition.fetch.bytes": 10485760,
                         "queued.max.messages.kbytes": 1 << 20})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    got = 0
    t0 = time.perf_counter()
    deadline = t0 + 600
    while got < count:
        got += len(consumer.consume(min(10_000, count - got), 1.0))
        if time.perf_counter() > deadline:
            raise TimeoutError(f"confluent-kafka read {got} of {count}")
    seconds = time.perf_counter() - t0
    consumer.close()
    return seconds


async def _nats_produce(addr: str, stream: str, count: int, size: int) -> float:
    import nats

    nc = await nats.connect(f"nats://{addr}")
    js = nc.jetstream(publish_async_max_pending=4000)
    await js.add_stream(name=stream, subjects=[f"{stream}.data"], storage="file")
    value = bytes(size)
    subject = f"{stream}.data"
    t0 = time.perf_counter()
    for _ in range(count):
        await js.publish_async(subject, value)
    await asyncio.wait_for(js.publish_async_completed(), 600)
    seconds = time.perf_counter() - t0
    await nc.close()
    return seconds


async def _nats_consume(addr: str, stream: str, count: int) -> float:
    import nats
    from nats.js.api import DeliverPolicy

    nc = await nats.connect(f"nats://{addr}")
    js = nc.jetstream()
    done = asyncio.Event()
    got = 0

    async def on_message(_msg: object) -> None:
        nonlocal got
        got += 1
        if got >= count:
            done.set()

    t0 = time.perf_counter()
    sub = await js.subscribe(f"{stream}.data", cb=on_message, ordered_consumer=True,
                             deliver_policy=DeliverPolicy.ALL, pending_msgs_limit=-1,
                             pending_bytes_limit=-1)
    await asyncio.wait_for(done.wait(), 600)
    seconds = time.perf_counter() - t0
    await sub.unsubscribe()
    await nc.close()
    return seconds


def nats_produce(addr: str, stream: str, count: int, size: int) -> float:
    return asyncio.run(_nats_produce(addr, stream, count, size))


def nats_consume(addr: str, stream: str, count: int) -> float:
    return asyncio.run(_nats_consume(addr, stream, count))


def redis_produce(addr: str, key: str, count: int, size: int) -> float:
    import redis

    host, port = addr.rsplit(":", 1)
    client = redis.Redis(host=host, port=int(port))
    value = bytes(size)
    t0 = time.perf_counter()
    for start in range(0, count, PAGE):
        pipe = client.pipeline(transaction=False)
        for _ in range(min(PAGE, count - start)):
            pipe.xadd(key, {"d": value})
        pipe.execute()
    seconds = time.perf_counter() - t0
    client.close()
    return seconds


def redis_consume(addr: str, key: str, count: int) -> float:
    import redis

    host, port = addr.rsplit(":", 1)
    client = redis.Redis(host=host, port=int(port))
    got, start = 0, "-"
    t0 = time.perf_counter()
    while got < count:
        entries = client.xrange(key, start, "+", count=PAGE)
        if not entries:
            raise RuntimeError(f"redis stream {key} ended after {got} of {count}")
        got += len(entries)
        start = b"(" + entries[-1][0]
    seconds = time.perf_counter() - t0
    client.close()
    return seconds


RABBIT_WINDOW = 10_000  # unconfirmed records at most
RABBIT_AUTH = {"username": "guest", "password": "guest"}


async def _rabbitmq_produce(addr: str, stream: str, count: int, size: int) -> float:
    from rstream import ConfirmationStatus, Producer

    host, port = addr.rsplit(":", 1)
    confirmed = 0
    failed: list[int] = []  # raised from the callback, an error would stay in rstream
    progress = asyncio.Event()

    def on_confirm(status: ConfirmationStatus) -> None:
        nonlocal confirmed
        if status.is_confirmed:
            confirmed += 1
        else:
            failed.append(status.response_code)
        progress.set()

    async with Producer(host, int(port), **RABBIT_AUTH) as producer:
        await producer.create_stream(stream, exists_ok=True)
        value = bytes(size)
        sent = 0
        t0 = time.perf_counter()
        deadline = t0 + 600
        while confirmed < count:
            if failed:
                raise RuntimeError(f"rabbitmq: {len(failed)} publishes refused: {failed[0]}")
            if sent < count and sent - confirmed < RABBIT_WINDOW:
                batch = min(PAGE, count - sent)
                await producer.send_batch(stream, [value] * batch, on_publish_confirm=on_confirm)
                sent += batch
                continue
            progress.clear()
            await asyncio.wait_for(progress.wait(), max(1.0, deadline - time.perf_counter()))
        return time.perf_counter() - t0


async def _rabbitmq_consume(addr: str, stream: str, count: int) -> float:
    from rstream import Consumer, ConsumerOffsetSpecification, OffsetType

    host, port = addr.rsplit(":", 1)
    done = asyncio.Event()
    got = 0

    def on_message(_msg: object, _context: object) -> None:
        nonlocal got
        got += 1
        if got >= count:
            done.set()

    async with Consumer(host, int(port), **RABBIT_AUTH) as consumer:
        t0 = time.perf_counter()
        await consumer.subscribe(stream, on_message, decoder=lambda raw: raw,
                                 offset_specification=ConsumerOffsetSpecification(
                                     OffsetType.FIRST, None), initial_credit=100)
        await asyncio.wait_for(done.wait(), 600)
        return time.perf_counter() - t0


async def _rabbitmq_delete(addr: str, stream: str) -> None:
    from rstream import Producer

    host, port = addr.rsplit(":", 1)
    async with Producer(host, int(port), **RABBIT_AUTH) as producer:
        await producer.delete_stream(stream, missing_ok=True)


def rabbitmq_produce(addr: str, stream: str, count: int, size: int) -> float:
    return asyncio.run(_rabbitmq_produce(addr, stream, count, size))


def rabbitmq_consume(addr: str, stream: str, count: int) -> float:
    return asyncio.run(_rabbitmq_consume(addr, stream, count))


def rabbitmq_delete(addr: str, stream: str) -> None:
    asyncio.run(_rabbitmq_delete(addr, stream))
