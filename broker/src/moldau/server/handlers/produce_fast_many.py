"""The fast Produce path (produce_fast.py) for a request of several partitions of one topic.

Kafka's Java producer sends each broker one request holding a batch for every partition
it leads that has records ready (3.9's defaults: linger.ms 0, 16 KiB batches, up to 5
requests in flight): on three brokers with six partitions, two partitions a request.
The general path decodes it into request objects, builds response objects and encodes
them; this path reads the frame and writes the success response's bytes, as
produce_fast.py does for one partition, and otherwise keeps the general path's rules:

- before anything is appended, every partition is checked as `ProduceHandler` checks it
  (the broker leads it, min.insync.replicas for acks=all); a failed check hands the
  whole request to the general path, which then handles it from its start;
- each partition is appended on its own: a failed append (a corrupt batch, a full disk)
  answers that partition's error, and the others are appended, as in the general path;
- acks=all waits for the ISR of every appended partition (`await_replication`);
- ErrorsPerSec counts each partition's answer, as the general path counts it.

A request of one partition goes the single-partition way, which allocates nothing for
this module.
"""

from __future__ import annotations

import struct
import time
from collections.abc import Awaitable
from typing import TYPE_CHECKING, NamedTuple, Protocol

from moldau.errors import KafkaError
from moldau.protocol.errors import ProtocolError
from moldau.protocol.generated.api import ApiKey
from moldau.protocol.generated.produce_response import ProduceResponse
from moldau.protocol.primitives import read_uvarint, write_uvarint
from moldau.protocol.records import first_batch_is_transactional

from ..quotas import NoQuotas
from ..responses import Parts, encode_response_parts
from .produce import PartitionResponse, ProduceAppends, TopicResponse

if TYPE_CHECKING:
    from moldau.metrics.registry import Meter
    from moldau.replication.replica_manager import Partition

    from ..network import Connection
    from ..requests import RequestDispatcher
    from ..session import Session

PRODUCE = ApiKey.PRODUCE.value
_INT32 = struct.Struct(">i")
_SIZE_AND_CORRELATION = struct.Struct(">ii")
# index, error_code, base_offset, log_append_time_ms, log_start_offset
_PARTITION = struct.Struct(">ihqqq")
_new_tuple = tuple.__new__  # a NamedTuple without its Python-level __new__

# a partition's data in the request: (index, its records: a view of the frame)
PartitionData = tuple[int, memoryview]
# a partition appended without error: (index, base offset, log append time, log start)
Appended = tuple[int, int, int, int]
# what produce_fast.py read before the partitions: version, correlation id, client id
# length, acks, timeout_ms, topic
Head = tuple[int, int, int, int, int, str]


class ManyProduce(NamedTuple):
    version: int
    correlation_id: int
    client_id_length: int  # the client id is frame[10:10 + client_id_length]
    acks: int
    timeout_ms: int
    topic: str
    partitions: tuple[PartitionData, ...]  # in the request's order, each index once
    size: int  # the request's bytes


def parse_many(frame: bytearray, p: int, head: Head) -> ManyProduce | None:
    """The request whose partitions' array starts at p, if it holds two or more, each
    named once, with records and no tagged fields to the frame's end; None for anything
    else (IndexError or struct.error for bytes cut short, as produce_fast.parse
    expects)."""
    count, p = read_uvarint(frame, p)
    count -= 1
    if count <= 1:  # none, null, or one in a longer varint than needed
        return None
    view = memoryview(frame)
    partitions: list[PartitionData] = []
    for _ in range(count):
        (index,) = _INT32.unpack_from(frame, p)
        size, p = read_uvarint(frame, p + 4)
        size -= 1
        if size < 0:  # null records: the general path answers INVALID_RECORD
            return None
        end = p + size
        if end >= len(frame) or frame[end]:  # the partition's tagged fields: none
            return None
        partitions.append((index, view[p:end]))
        p = end + 1
    # then the topic's and the request's tagged fields, and nothing else
    if len(frame) != p + 2 or frame[p] or frame[p + 1]:
        return None
    if len({index for index, _ in partitions}) != count:
        return None  # a partition named twice: the general path's to answer
    return _new_tuple(ManyProduce, (*head, tuple(partitions), len(frame)))


def encode_successes(correlation_id: int, topic: str, appended: list[Appended],
                     throttle_time_ms: int = 0) -> bytearray:
    """The size-prefixed ProduceResponse (v9 to v11) for one topic whose partitions were
    all appended without error, in the order given (produce_fast.encode_success's bytes
    for each partition)."""
    name = topic.encode()
    out = bytearray(_SIZE_AND_CORRELATION.pack(0, correlation_id))
    out += b"\x00\x02"  # the response header's tagged fields; one topic
    write_uvarint(out, len(name) + 1)
    out += name
    write_uvarint(out, len(appended) + 1)
    for index, base_offset, log_append_time_ms, log_start_offset in appended:
        out += _PARTITION.pack(index, 0, base_offset, log_append_time_ms, log_start_offset)
        # no record_errors, a null error_message, the partition's tagged fields
        out += b"\x01\x00\x00"
    # the topic's tagged fields, throttle_time_ms, the response's tagged fields
    out += b"\x00\x00\x00\x00\x00\x00"
    if throttle_time_ms:
        _INT32.pack_into(out, len(out) - 5, throttle_time_ms)
    _INT32.pack_into(out, 0, len(out) - 4)
    return out


class FastProduce(Protocol):
    """What this module uses of produce_fast.FastProduce, which imports this module (a
    Protocol rather than an import back: the two modules stay out of a cycle)."""

    appends: ProduceAppends
    dispatcher: RequestDispatcher
    handled: Meter

    def admissible(self, session: Session, acks: int, topic: str) -> bool: ...

    def quota(self, conn: Connection, request: ManyProduce, size: int, received_ns: int,
              loop_ns: int | None = None) -> int: ...

    def record(self, conn: Connection, version: int, error_code: int, received_ns: int,
               started: int, returned: int | None = None, throttle_ms: int = 0,
               error_counts: dict[int, int] | None = None) -> None: ...


class ManyPartitions:
    """FastProduce's handling of a ManyProduce (see the module doc)."""

    def __call__(self, fast: FastProduce, conn: Connection, frame: bytearray,
                 request: ManyProduce, received_ns: int) -> Parts | Awaitable[Parts] | None:
        version, _, client_id_length, acks, _, topic, data, size = request
        session = conn.session
        if (any(first_batch_is_transactional(records) for _, records in data)
                or not fast.admissible(session, acks, topic)):
            return None
        started = time.monotonic_ns()
        appends = fast.appends
        partitions: list[Partition] = []
        try:
            for index, _ in data:
                partition = appends.leading(topic, index)
                if (acks == -1 and len(partition.state.isr)
                        < partition.log.config.min_insync_replicas):
                    return None  # the general path answers NOT_ENOUGH_REPLICAS
                partitions.append(partition)
        except (KafkaError, ProtocolError):
            return None  # nothing happened yet: the general path answers the error
        if client_id_length > 0 and not session.client_id:
            session.client_id = str(frame[10 : 10 + client_id_length], "utf-8")
        fast.handled.mark()
        appended: list[Appended] = []
        waiting: list[tuple[Partition, int]] = []  # acks=all: (partition, offset needed)
        failed: dict[int, PartitionResponse] = {}
        for (index, records), partition in zip(data, partitions, strict=True):
            plog = partition.log
            try:
                info = plog.append_as_leader(records, partition.state.leader_epoch)
            except (KafkaError, ProtocolError) as exc:
                # answered here, as produce_fast.py answers a failed append: validation
                # may have patched the batch's offsets in the frame already
                refused = failed[index] = PartitionResponse(index=index)
                appends.fail_partition(refused, exc, topic, version, partition, len(records))
                continue
            appends.after_append(topic, partition, info, len(records))
            appended.append((index, info.first_offset, info.log_append_time,
                             plog.log_start_offset))
            if acks == -1 and plog.high_watermark <= info.last_offset:
                waiting.append((partition, info.last_offset + 1))
        if waiting:
            return self._after_replication(fast, conn, request, appended, failed, waiting,
                                           received_ns, started, time.monotonic_ns())
        # the client quotas, when some exist (a type check when none does)
        throttle_ms = (0 if type(fast.dispatcher.quotas) is NoQuotas
                       else fast.quota(conn, request, size, received_ns))
        return self._answer(fast, conn, request, appended, failed, {}, received_ns, started,
                            None, throttle_ms)

    def _answer(self, fast: FastProduce, conn: Connection, request: ManyProduce,
                appended: list[Appended], failed: dict[int, PartitionResponse],
                errors: dict[tuple[str, int], int], received_ns: int, started: int,
                returned: int | None, throttle_ms: int) -> Parts:
        """The answer and its request metrics (returned as in FastProduce.record): the
        success response's bytes, or with a failed append or an ISR that did not confirm
        (errors: the codes of appended partitions) the generated codec's, partitions in
        the request's order."""
        topic = request.topic
        if not failed and not errors:
            fast.record(conn, request.version, 0, received_ns, started, returned, throttle_ms,
                        {0: len(appended)})
            return [encode_successes(request.correlation_id, topic, appended, throttle_ms)]
        done = {a[0]: a for a in appended}
        responses: list[PartitionResponse] = []
        counts: dict[int, int] = {}
        for index, _ in request.partitions:
            response = failed.get(index)
            if response is None:
                _, base_offset, log_append_time, log_start_offset = done[index]
                response = PartitionResponse(
                    index=index, error_code=errors.get((topic, index), 0),
                    base_offset=base_offset, log_append_time_ms=log_append_time,
                    log_start_offset=log_start_offset)
            responses.append(response)
            counts[response.error_code] = counts.get(response.error_code, 0) + 1
        parts = encode_response_parts(
            request.correlation_id, PRODUCE, request.version,
            ProduceResponse(responses=[TopicResponse(name=topic,
                                                     partition_responses=responses)],
                            throttle_time_ms=throttle_ms))
        fast.record(conn, request.version, 0, received_ns, started, returned, throttle_ms,
                    counts)
        return parts

    async def _after_replication(self, fast: FastProduce, conn: Connection,
                                 request: ManyProduce, appended: list[Appended],
                                 failed: dict[int, PartitionResponse],
                                 waiting: list[tuple[Partition, int]], received_ns: int,
                                 started: int, returned: int) -> Parts:
        """acks=all once the ISR has the records (or the wait ends in an error)."""
        errors = await fast.appends.await_replication(waiting, request.timeout_ms)
        # the loop time: up to the wait (the wait in purgatory costs the loop nothing)
        throttle_ms = fast.quota(conn, request, request.size, received_ns,
                                 returned - received_ns)
        return self._answer(fast, conn, request, appended, failed, errors, received_ns,
                            started, returned, throttle_ms)
