"""The Produce request most producers send, answered without the generated codec.

With `linger.ms` 0, librdkafka sends a ProduceRequest per partition as soon as it has a
record. At 20 MB/s of 1 KiB records that is 19,000 small requests a second. The general
path decodes each into request objects, builds response objects and encodes them. On
the bench machine that cost about 70 us of CPU per request and saturated the event loop
(docs/sizing.md). This path cut it to about 50 us. Kafka's Java producer sends one
request per broker with the batches of every partition it has ready that the broker
leads: the same shape with several partitions of one topic, which this path takes too
(produce_fast_many.py; a request of one partition allocates nothing more for it).

It takes one shape only:
- flexible versions 9 to 11 (librdkafka 2.x sends v10, Kafka's 3.9 producer v11);
- no transactional id and no transactional batch, acks=1 or acks=all (-1: both
  clients' default), one topic with one or more partitions (each named once), no
  tagged fields;
- an authenticated connection and the request log below DEBUG.

With client quotas configured it records the request's bytes and loop time as the general
path does (server/quotas.py) and answers with the throttle time, muting the connection.

The topic is authorized, and every partition's leadership and min.insync.replicas checked
before anything is appended, as `ProduceHandler` checks them; each batch is appended as
there, and the success response's bytes are written directly. Any other request, and any
error before the first append, goes to the general path, which handles the request from
its start: nothing has changed yet. A failed append is answered here (`fail_partition`,
shared with the general path), the request's other partitions appended as the general
path appends them: it wrote nothing, but validation may have patched the batch's offsets
in the frame already. An acks=all append the ISR has yet to confirm waits as in the
general path (`await_replication`). Answers other than plain success are encoded by the
generated codec.
"""

from __future__ import annotations

import struct
import time
from collections.abc import Awaitable
from typing import TYPE_CHECKING, NamedTuple

from moldau.errors import KafkaError
from moldau.protocol.errors import ProtocolError
from moldau.protocol.generated.api import ApiKey
from moldau.protocol.generated.produce_response import ProduceResponse
from moldau.protocol.primitives import read_uvarint, write_uvarint
from moldau.protocol.records import first_batch_is_transactional
from moldau.security.acls import AclOperation, Action, ResourceType

from ..metadata_cache import INTERNAL_TOPICS
from ..quotas import ClientQuotas, NoQuotas
from ..responses import Parts, encode_response_parts
from .produce import (
    PartitionResponse,
    ProduceAppends,
    TopicResponse,
)
from .produce_fast_many import ManyPartitions, ManyProduce, parse_many

if TYPE_CHECKING:
    from moldau.metrics.registry import MetricsRegistry
    from moldau.replication.replica_manager import Partition
    from moldau.storage.validation import AppendInfo

    from ..network import Connection
    from ..requests import RequestDispatcher
    from ..session import Session

PRODUCE = ApiKey.PRODUCE.value  # a plain int: compared on every request
VERSIONS = range(9, 12)
_HEADER = struct.Struct(">hhih")  # api key, version, correlation id, client id length
_ACKS_TIMEOUT = struct.Struct(">hi")
_INT32 = struct.Struct(">i")
_SIZE_AND_CORRELATION = struct.Struct(">ii")
# index, error_code, base_offset, log_append_time_ms, log_start_offset
_PARTITION = struct.Struct(">ihqqq")
_ONE = 2  # a compact array's length of 1 (the varint holds length + 1)
_NONE_ONCE = {0: 1}  # the response's error codes: one NONE
_new_tuple = tuple.__new__  # a NamedTuple without its Python-level __new__


class SingleProduce(NamedTuple):
    version: int
    correlation_id: int
    client_id_length: int  # the client id is frame[10:10 + client_id_length]
    acks: int
    timeout_ms: int
    topic: str
    partition: int
    records: memoryview

    @property
    def size(self) -> int:
        """The request's bytes (the records view spans the frame)."""
        return len(self.records.obj)  # type: ignore[arg-type]


def client_id_of(request: SingleProduce | ManyProduce) -> str:
    """The request header's client id ("" when null)."""
    length = request.client_id_length
    if length <= 0:
        return ""
    records = (request.records if isinstance(request, SingleProduce)
               else request.partitions[0][1])
    return str(records.obj[10 : 10 + length], "utf-8")  # type: ignore[index]


def parse(frame: bytearray) -> SingleProduce | ManyProduce | None:
    """The request, if it is a ProduceRequest of the one shape this path takes; None for
    anything else, malformed bytes included (the general path reports those)."""
    try:
        return _parse(frame)
    except (IndexError, struct.error, ProtocolError, UnicodeDecodeError):
        return None


def _parse(frame: bytearray) -> SingleProduce | ManyProduce | None:
    api_key, version, correlation_id, client_id_length = _HEADER.unpack_from(frame, 0)
    if api_key != PRODUCE or version not in VERSIONS or client_id_length < -1:
        return None
    if client_id_length > 0:  # a client id the decoder would refuse is not ours to answer
        str(frame[10 : 10 + client_id_length], "utf-8")
    p = 10 + max(client_id_length, 0)
    # the header's tagged fields, then a null transactional id: both a single 0 byte
    if frame[p] != 0 or frame[p + 1] != 0:
        return None
    acks, timeout_ms = _ACKS_TIMEOUT.unpack_from(frame, p + 2)
    p += 8
    if frame[p] != _ONE:  # one topic
        return None
    name_length = frame[p + 1] - 1  # a one-byte varint: names are at most 249 bytes
    if not 0 < name_length < 0x7F:
        return None
    p += 2
    topic = str(frame[p : p + name_length], "utf-8")
    p += name_length
    if frame[p] != _ONE:  # several partitions (Kafka's Java producer), or none
        return parse_many(frame, p, (version, correlation_id, client_id_length, acks,
                                     timeout_ms, topic))
    (partition,) = _INT32.unpack_from(frame, p + 1)
    size, p = read_uvarint(frame, p + 5)
    size -= 1
    if size < 0:  # null records: the general path answers INVALID_RECORD
        return None
    end = p + size
    # then the partition's, the topic's and the request's tagged fields, and nothing else
    if len(frame) != end + 3 or frame[end] or frame[end + 1] or frame[end + 2]:
        return None
    return _new_tuple(SingleProduce, (version, correlation_id, client_id_length, acks,
                                      timeout_ms, topic, partition, memoryview(frame)[p:end]))


def encode_success(correlation_id: int, topic: str, partition: int, base_offset: int,
                   log_append_time_ms: int, log_start_offset: int,
                   throttle_time_ms: int = 0) -> bytearray:
    """The size-prefixed ProduceResponse (v9 to v11, which encode it alike) for one
    partition appended without error: no record errors, no error message, no tagged
    fields (current_leader and node_endpoints are only sent with
    NOT_LEADER_OR_FOLLOWER)."""
    name = topic.encode()
    out = bytearray(_SIZE_AND_CORRELATION.pack(0, correlation_id))
    out += b"\x00\x02"  # the response header's tagged fields; one topic
    write_uvarint(out, len(name) + 1)
    out += name
    out += b"\x02"  # one partition
    out += _PARTITION.pack(partition, 0, base_offset, log_append_time_ms, log_start_offset)
    # no record_errors, a null error_message, the partition's and the topic's tagged
    # fields, throttle_time_ms 0, the response's tagged fields
    out += b"\x01\x00\x00\x00\x00\x00\x00\x00\x00"
    if throttle_time_ms:
        _INT32.pack_into(out, len(out) - 5, throttle_time_ms)
    _INT32.pack_into(out, 0, len(out) - 4)
    return out


class FastProduce:
    """The dispatcher's first try for a request with API key 0 (see the module doc)."""

    def __init__(self, appends: ProduceAppends, dispatcher: RequestDispatcher,
                 metrics: MetricsRegistry) -> None:
        self.appends = appends
        self.dispatcher = dispatcher
        self.handled = metrics.meter("moldau", "ProduceFastPath", "RequestsPerSec")
        self.many = ManyPartitions()

    def admissible(self, session: Session, acks: int, topic: str) -> bool:
        """Whether the request is this path's to answer, as far as its acks, its topic and
        its principal's authorization go: any other is the general path's (a denial
        too, to log: it asks again)."""
        return ((acks == 1 or acks == -1) and topic not in INTERNAL_TOPICS
                and session.authenticated
                and self.dispatcher.authorizer.authorize(
                    session.principal, session.acl_host, "Produce",
                    [Action(AclOperation.WRITE, ResourceType.TOPIC, topic,
                            log_if_denied=False)])[0])

    def __call__(self, conn: Connection, frame: bytearray,
                 received_ns: int) -> Parts | Awaitable[Parts] | None:
        dispatcher = self.dispatcher
        if not dispatcher.plain_responses() or (request := parse(frame)) is None:
            return None
        if not isinstance(request, SingleProduce):
            return self.many(self, conn, frame, request, received_ns)
        version, correlation_id, client_id_length, acks, _timeout, topic, index, records = (
            request)
        session = conn.session
        # a transactional batch, or a denial, is the general path's to answer (and, for a
        # denial, to log: it asks again)
        if (first_batch_is_transactional(records)
                or not self.admissible(session, acks, topic)):
            return None
        started = time.monotonic_ns()
        appends = self.appends
        try:
            partition = appends.leading(topic, index)
            plog = partition.log
            if acks == -1 and len(partition.state.isr) < plog.config.min_insync_replicas:
                return None  # the general path answers NOT_ENOUGH_REPLICAS
        except (KafkaError, ProtocolError):
            return None  # nothing happened yet: the general path answers the error
        if client_id_length > 0 and not session.client_id:
            session.client_id = str(frame[10 : 10 + client_id_length], "utf-8")
        self.handled.mark()
        try:
            info = plog.append_as_leader(records, partition.state.leader_epoch)
        except (KafkaError, ProtocolError) as exc:
            # Answered here: a failed append writes nothing, but validation may already
            # have patched the batch's offsets in the frame, which the general path
            # would then refuse as a produced batch with a base offset.
            return self._failed(conn, request, partition, exc, received_ns, started)
        appends.after_append(topic, partition, info, len(records))
        log_start_offset = plog.log_start_offset
        if acks == -1 and plog.high_watermark <= info.last_offset:
            return self._after_replication(conn, request, partition, info, log_start_offset,
                                           received_ns, started, time.monotonic_ns(),
                                           len(frame))
        # the client quotas, when some exist (a type check when none does)
        throttle_ms = (0 if type(dispatcher.quotas) is NoQuotas
                       else self.quota(conn, request, len(frame), received_ns))
        response = encode_success(correlation_id, topic, index, info.first_offset,
                                  info.log_append_time, log_start_offset, throttle_ms)
        self.record(conn, version, 0, received_ns, started, throttle_ms=throttle_ms)
        return [response]

    def quota(self, conn: Connection, request: SingleProduce | ManyProduce, size: int,
              received_ns: int, loop_ns: int | None = None) -> int:
        """The client quotas, when some exist: the request's bytes and loop time recorded,
        and the throttle time, for which the connection is muted once the answer is sent
        (KIP-219)."""
        quotas = self.dispatcher.quotas
        if not isinstance(quotas, ClientQuotas):  # NoQuotas: none configured
            return 0
        if loop_ns is None:
            loop_ns = time.monotonic_ns() - received_ns
        throttle_ms = quotas.record_produce(conn.session.principal, client_id_of(request),
                                            size, loop_ns)
        if throttle_ms > 0:
            conn.throttle(throttle_ms)
        return throttle_ms

    def _failed(self, conn: Connection, request: SingleProduce, partition: Partition,
                exc: KafkaError | ProtocolError, received_ns: int, started: int) -> Parts:
        """The error answer to an append that failed, as the general path gives it."""
        response = PartitionResponse(index=request.partition)
        self.appends.fail_partition(response, exc, request.topic, request.version, partition,
                                    len(request.records))
        return self._answer(conn, request, response, received_ns, started,
                            throttle_ms=self.quota(conn, request, request.size, received_ns))

    def _answer(self, conn: Connection, request: SingleProduce, response: PartitionResponse,
                received_ns: int, started: int, returned: int | None = None,
                throttle_ms: int = 0) -> Parts:
        """An answer other than plain success, encoded by the generated codec, and its
        request metrics (returned as in record)."""
        parts = encode_response_parts(
            request.correlation_id, PRODUCE, request.version,
            ProduceResponse(responses=[TopicResponse(name=request.topic,
                                                     partition_responses=[response])],
                            throttle_time_ms=throttle_ms))
        self.record(conn, request.version, response.error_code, received_ns, started,
                     returned, throttle_ms)
        return parts

    def record(self, conn: Connection, version: int, error_code: int, received_ns: int,
               started: int, returned: int | None = None, throttle_ms: int = 0,
               error_counts: dict[int, int] | None = None) -> None:
        """The request metrics of an answer ready now; returned: when the handler was done
        and the wait for the ISR began (None: it did not wait); error_counts: the answer's
        error codes with the partitions answering each, for an answer of several
        partitions (the general path counts each, as Kafka does)."""
        metrics = self.dispatcher.metrics
        if metrics is None:
            return
        done = time.monotonic_ns()
        returned = done if returned is None else returned
        conn.response_meta = metrics.record(
            PRODUCE, version, None, received_ns, started, returned - started, done - returned,
            None, done, error_counts=(error_counts if error_counts is not None
                                      else _NONE_ONCE if error_code == 0
                                      else {error_code: 1}),
            throttle_ms=throttle_ms)

    async def _after_replication(self, conn: Connection, request: SingleProduce,
                                 partition: Partition, info: AppendInfo,
                                 log_start_offset: int, received_ns: int, started: int,
                                 returned: int, size: int) -> Parts:
        """acks=all once the ISR has the records (or the wait ends in an error)."""
        errors = await self.appends.await_replication([(partition, info.last_offset + 1)],
                                                      request.timeout_ms)
        # the loop time: up to the wait (the wait in purgatory costs the loop nothing)
        throttle_ms = self.quota(conn, request, size, received_ns, returned - received_ns)
        code = errors.get((request.topic, request.partition), 0)
        if code:
            return self._answer(conn, request, PartitionResponse(
                index=request.partition, error_code=code, base_offset=info.first_offset,
                log_append_time_ms=info.log_append_time, log_start_offset=log_start_offset),
                received_ns, started, returned, throttle_ms)
        self.record(conn, request.version, 0, received_ns, started, returned, throttle_ms)
        return [encode_success(request.correlation_id, request.topic, request.partition,
                               info.first_offset, info.log_append_time, log_start_offset,
                               throttle_ms)]
