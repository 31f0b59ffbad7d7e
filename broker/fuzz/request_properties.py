"""What the fuzzer checks: one property per target, each a function of the raw input bytes.

The contract under test (moldau.protocol.errors): decoding bytes from the network either
succeeds or raises ProtocolError (UnsupportedVersionError and UnsupportedCompressionError
are subclasses), the one exception the server expects from bad bytes; anything else
escaping is a bug. What decodes must encode again, and that encoding must decode to the
same bytes once more (the codec reaches a fixed point in one step: it may normalise,
e.g. sort unknown tags or shorten varints, but never lose or invent a field).

A check returns quietly when the property holds, lets an unexpected exception escape,
and raises PropertyViolation when the decoder returned something inconsistent. None of
this imports atheris, so `fuzz_requests.py --check-seeds` and the unit tests run it in
any environment.

Targets:
- frames: moldau.protocol.framing.FrameReader, fed a byte stream in arbitrary chunks,
  against a plain model of the size-prefixed stream;
- requests: moldau.protocol.headers.decode_request (the request header, then the body
  of the API key and version it names), on its warm path (the codecs cached per key and
  version) and its cold path alike;
- bodies: every request class at every version the broker registers (the API table's
  handler ranges), selected by the first two input bytes;
- records: the record batches a Produce request carries (v2 batches with their
  records, compressed or not) and legacy message sets converted to v2;
- produce_fast: the broker's hand-written parser of the common Produce request
  (moldau.server.handlers.produce_fast.parse), which bypasses the generated decoder: it
  never raises, and what it takes, decode_request takes too and reads alike.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

from moldau.protocol import headers, legacy
from moldau.protocol._runtime import Message
from moldau.protocol.errors import ProtocolError
from moldau.protocol.framing import FrameReader
from moldau.protocol.generated import ProduceRequest, RequestHeader
from moldau.protocol.generated.api import APIS
from moldau.protocol.records import (
    LOG_APPEND_TIME,
    Record,
    RecordBatch,
    SimpleRecord,
    build_batch,
    complete_length,
    iter_batches,
)

# Decompression in the records target stops here: the default (256 MiB) is the broker's
# bound, far above what a fuzzer input needs to reach the limit check.
MAX_DECOMPRESSED = 1 << 20
SELECTOR_BYTES = 2  # the bodies target's (class, version) selector


class PropertyViolation(AssertionError):
    """The decoder accepted the input but what it returned breaks the contract."""


def registered_versions() -> dict[int, tuple[int, int]]:
    """API key -> the versions the broker serves (the handlers' declared ranges, which the
    dispatcher registers and ApiVersions advertises)."""
    from moldau.server.api_table import API_TABLE  # the server layer: only for its table

    return {int(key): entry.versions for key, entry in API_TABLE.items()}


def _request_pairs() -> list[tuple[type[Message], int]]:
    return [(APIS[key].request, version)
            for key, (low, high) in sorted(registered_versions().items())
            for version in range(low, high + 1)]


REQUEST_PAIRS = _request_pairs()


# --- frames ---------------------------------------------------------------------------


def frames_config(data: bytes) -> tuple[int, int, int, bytes]:
    """(scratch size, max frame size, chunking seed, stream) from a frames input: the
    first four bytes choose the reader's sizes, small so that the scratch buffer wraps,
    large frames take the in-place path and the size limit is hit."""
    if len(data) < 4:
        return 16, 0, 0, b""
    scratch = 16 + data[0] * 8  # 16 .. 2056 bytes
    max_frame = int.from_bytes(data[1:3], "big") * 4  # 0 .. 262140 bytes
    return scratch, max_frame, data[3], data[4:]


def model_frames(stream: bytes, max_frame: int) -> tuple[list[bytes], bool, int]:
    """What any correct reader makes of the stream: (complete frames before any bad size,
    whether a bad size follows them, bytes those frames take)."""
    frames: list[bytes] = []
    pos = 0
    while len(stream) - pos >= 4:
        size = int.from_bytes(stream[pos:pos + 4], "big", signed=True)
        if size < 0 or size > max_frame:
            return frames, True, pos
        if len(stream) - pos - 4 < size:
            break
        frames.append(stream[pos + 4:pos + 4 + size])
        pos += 4 + size
    return frames, False, pos


def check_frames(data: bytes) -> None:
    scratch, max_frame, seed, stream = frames_config(data)
    expected, bad_size, consumed = model_frames(stream, max_frame)
    reader = FrameReader(max_frame_size=max_frame, scratch_size=scratch)
    chunks = random.Random(seed)
    got: list[bytearray] = []
    refused = False
    pos = 0
    while pos < len(stream):
        target = reader.get_buffer()
        if not len(target):
            raise PropertyViolation(f"get_buffer() has no room after {pos} bytes")
        n = min(len(target), len(stream) - pos, chunks.choice((1, 3, 7, 64, 500, 4096)))
        target[:n] = stream[pos:pos + n]
        pos += n
        try:
            got.extend(reader.buffer_updated(n))
        except ProtocolError:
            refused = True
            break
    if any(type(f) is not bytearray for f in got):
        raise PropertyViolation("a frame is not a writable bytearray")
    if refused != bad_size:
        raise PropertyViolation(f"reader refused the stream: {refused}, expected {bad_size}")
    if refused:
        # frames completed by the same read as the bad size are dropped with it
        if got != expected[:len(got)]:
            raise PropertyViolation("frames before the bad size differ from the stream's")
        return
    if got != expected:
        raise PropertyViolation(f"{len(got)} frames read, the stream holds {len(expected)}")
    if reader.pending != len(stream) - consumed:
        raise PropertyViolation(f"pending is {reader.pending}, "
                                f"{len(stream) - consumed} bytes are unframed")


# --- requests -----------------------------------------------------------------------------


def _decode_request(decode: Callable[[memoryview], tuple[RequestHeader, Any]],
                    data: bytes) -> tuple[RequestHeader, Any] | ProtocolError:
    try:
        return decode(memoryview(data))
    except ProtocolError as exc:
        probe = getattr(exc, "header", None)
        if probe is not None and not isinstance(probe, RequestHeader):
            raise PropertyViolation(f"an unsupported version carries {probe!r}") from None
        return exc


def _encode_request(header: RequestHeader, body: Any) -> bytes:
    try:
        return headers.encode_request(header, body)
    except ProtocolError as exc:
        raise PropertyViolation(f"a decoded request does not encode: {exc}") from exc


def check_request(data: bytes) -> None:
    # decode_request takes its cached codecs for a key and version seen before, and
    # _decode_request (the cold path, which fills that cache) otherwise: both must agree.
    warm = _decode_request(headers.decode_request, data)
    cold = _decode_request(headers._decode_request, data)
    if isinstance(warm, ProtocolError) or isinstance(cold, ProtocolError):
        if type(warm) is not type(cold):
            raise PropertyViolation(f"the cached path gives {warm!r}, the cold one {cold!r}")
        return
    encoded = _encode_request(*warm)
    if _encode_request(*cold) != encoded:
        raise PropertyViolation("the cached and the cold path decode different requests")
    if int.from_bytes(encoded[:4], "big") != len(encoded) - 4:
        raise PropertyViolation("the size prefix of the re-encoded request is wrong")
    again = _decode_request(headers.decode_request, encoded[4:])
    if isinstance(again, ProtocolError):
        raise PropertyViolation(f"a re-encoded request does not decode: {again}")
    if _encode_request(*again) != encoded:
        raise PropertyViolation("decode(encode(request)) encodes differently")


# --- bodies -------------------------------------------------------------------------------


def body_pair(data: bytes) -> tuple[type[Message], int]:
    return REQUEST_PAIRS[int.from_bytes(data[:SELECTOR_BYTES], "big") % len(REQUEST_PAIRS)]


def body_input(cls: type[Message], version: int, body: bytes) -> bytes:
    """The bodies-target input that selects (cls, version) and decodes body."""
    index = REQUEST_PAIRS.index((cls, version))
    return index.to_bytes(SELECTOR_BYTES, "big") + body


def _encode(msg: Any, version: int) -> bytes:
    try:
        return bytes(msg.encode(version))
    except ProtocolError as exc:
        raise PropertyViolation(f"a decoded {msg.NAME} v{version} does not encode: {exc}") \
            from exc


def check_body(data: bytes) -> None:
    if len(data) < SELECTOR_BYTES:
        return
    cls, version = body_pair(data)
    # the body at an offset, as it follows the header in a request
    buf = memoryview(data)
    try:
        msg, end = cls.decode_from(buf, SELECTOR_BYTES, version)
    except ProtocolError:
        return
    if not SELECTOR_BYTES <= end <= len(buf):
        raise PropertyViolation(f"{cls.NAME} v{version} ends at {end}, outside the input")
    encoded = _encode(msg, version)
    try:
        again = cls.decode(encoded, version)
    except ProtocolError as exc:
        raise PropertyViolation(f"re-encoded {cls.NAME} v{version} does not decode: {exc}") \
            from exc
    if _encode(again, version) != encoded:
        raise PropertyViolation(f"{cls.NAME} v{version}: decode(encode(m)) encodes differently")


# --- records ------------------------------------------------------------------------------


def _rebuilt(batch: RecordBatch, records: list[Record]) -> bytes:
    """The batch's records written again, offsets and timestamps as decoded (the base
    timestamp the first record's, so timestamp deltas are computed afresh)."""
    append_time = batch.timestamp_type == LOG_APPEND_TIME
    return build_batch(
        [SimpleRecord(r.key, r.value, r.headers, batch.base_timestamp if append_time
                      else r.timestamp) for r in records],
        base_offset=batch.base_offset, compression=batch.compression,
        timestamp_type=batch.timestamp_type, max_timestamp=batch.max_timestamp,
        offset_deltas=[r.offset - batch.base_offset for r in records])


def _check_batches(blob: memoryview) -> None:
    try:
        complete_length(blob)
        for batch in iter_batches(blob):
            batch.verify_crc()
            records = list(batch.records(MAX_DECOMPRESSED))
            if batch.is_control:
                list(batch.control_records())
            if records:
                rebuilt = RecordBatch(_rebuilt(batch, records))
                if list(rebuilt.records()) != records:
                    raise PropertyViolation("records re-encoded decode differently")
    except ProtocolError:
        return


def _check_legacy(blob: memoryview) -> None:
    try:
        messages = list(legacy.iter_messages(blob, verify_crc=False,
                                             max_decompressed_size=MAX_DECOMPRESSED))
        converted = legacy.convert_to_v2(blob, verify_crc=False,
                                         max_decompressed_size=MAX_DECOMPRESSED)
    except ProtocolError:
        return
    try:
        batches = list(iter_batches(converted))
        records = [r for b in batches for r in b.records()]
    except ProtocolError as exc:
        raise PropertyViolation(f"a converted message set does not decode: {exc}") from exc
    if len(batches) != 1 or not batches[0].verify_crc():
        raise PropertyViolation("a converted message set is not one valid v2 batch")
    append_times = [m.timestamp for m in messages if m.timestamp_type == legacy.LOG_APPEND_TIME]
    expected = [(i, max(append_times) if append_times else m.timestamp, m.key, m.value)
                for i, m in enumerate(messages)]
    if [(r.offset, r.timestamp, r.key, r.value) for r in records] != expected:
        raise PropertyViolation("conversion changed the messages' offsets, timestamps, "
                                "keys or values")


def check_records(data: bytes) -> None:
    if not data:
        return
    blob = memoryview(data)[1:]
    if data[0] & 1:
        _check_legacy(blob)
    else:
        _check_batches(blob)


# --- the fast Produce path --------------------------------------------------------------


def check_fast_produce(data: bytes) -> None:
    # the server layer: this one only
    from moldau.server.handlers.produce_fast import SingleProduce, parse

    fast = parse(bytearray(data))
    if fast is None:
        return
    try:
        header, body = headers.decode_request(data)
    except ProtocolError as exc:
        raise PropertyViolation(f"the fast path takes a request the decoder refuses: {exc}") \
            from exc
    if not isinstance(body, ProduceRequest):
        raise PropertyViolation(f"the fast path takes a {body.NAME} for a Produce request")
    client_id = header.client_id
    client_id_length = -1 if client_id is None else len(client_id.encode())
    topics = body.topic_data
    partitions = topics[0].partition_data if len(topics) == 1 else []
    general = (header.request_api_key, header.request_api_version, header.correlation_id,
               client_id_length, body.transactional_id, body.acks, body.timeout_ms,
               len(topics), topics[0].name if topics else None,
               [(p.index, None if p.records is None else bytes(p.records))
                for p in partitions])
    read = ([(fast.partition, bytes(fast.records))] if isinstance(fast, SingleProduce)
            else [(index, bytes(records)) for index, records in fast.partitions])
    shortcut = (0, fast.version, fast.correlation_id, max(fast.client_id_length, -1), None,
                fast.acks, fast.timeout_ms, 1, fast.topic, read)
    if general != shortcut:
        raise PropertyViolation(f"the fast path reads {shortcut}, the decoder {general}")


TARGETS: dict[str, Callable[[bytes], None]] = {
    "frames": check_frames,
    "requests": check_request,
    "bodies": check_body,
    "records": check_records,
    "produce_fast": check_fast_produce,
}
