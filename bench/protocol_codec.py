"""Protocol codec micro-benchmarks: Moldau's generated codec next to kafka-python's.

Every case feeds both libraries the same bytes in the same process, with their runs
interleaved (see _support.measure), and checks first that both read or write those
bytes identically, so a ratio never compares different work.

kafka-python is a client and has no request-reading path of its own; the peer for
"header + Produce decode" is the fastest way its public API reads a request: peek the
API key and version (as any broker must), `RequestHeader.decode(BytesIO(payload),
flexible=...)`, then `ProduceRequest.decode(memoryview(payload)[pos:], version=v)`.
Its one-call `ProduceRequest.decode(payload, version=v, header=True)` is slower because
it copies the whole payload into a BytesIO for the header; one row shows it too.

Run standalone with `python bench/protocol_codec.py`, or through `make bench`.
"""

from __future__ import annotations

import io
import random
import struct
import sys
import uuid
import zlib
from collections.abc import Callable
from typing import Any

import _support as s

ORDER = 10  # first section of docs/benchmarks.md
TITLE = "Protocol codec"
PACKAGES = ("moldau", "kafka-python", "crc32c")

KIB = 1024
MIB = 1024 * KIB
GOAL_DECODE_SPEEDUP = 10.0
GOAL_SIZE_FLATNESS = 1.2

_PEEK = struct.Struct(">hh")  # api key, api version: the first four bytes of a request


# --- inputs -----------------------------------------------------------------------------


def record_batch(size: int, seed: int = 1) -> bytes:
    """A valid v2 record batch of exactly `size` bytes: one uncompressed record.

    Built with kafka-python's producer-side builder, so the bytes are what a real client
    sends; the decoders under test never look inside, only the CRC cases do.
    """
    from kafka.record.default_records import DefaultRecordBatchBuilder

    payload = random.Random(seed).randbytes(size)
    value_size = size - 80
    for _ in range(5):  # the record's varint lengths shift by a byte or two; converge
        builder = DefaultRecordBatchBuilder(
            magic=2,
            compression_type=0,
            is_transactional=False,
            producer_id=-1,
            producer_epoch=-1,
            base_sequence=-1,
            batch_size=2 * size,
        )
        builder.append(
            0, timestamp=1_700_000_000_000, key=None, value=payload[:value_size], headers=[]
        )
        batch = bytes(builder.build())
        if len(batch) == size:
            return batch
        value_size += size - len(batch)
    raise RuntimeError(f"could not build a batch of exactly {size} bytes")


def produce_payload(partitions: int, batch: bytes, version: int = 9) -> bytes:
    """A Produce request (v9: header v2; v8: header v1) without the 4-byte size: one topic."""
    from moldau.protocol.generated import ProduceRequest, RequestHeader
    from moldau.protocol.generated.api import ApiKey
    from moldau.protocol.headers import encode_request

    body = ProduceRequest(
        transactional_id=None,
        acks=-1,
        timeout_ms=30_000,
        topic_data=[
            ProduceRequest.TopicProduceData(
                name="bench-topic",
                partition_data=[
                    ProduceRequest.PartitionProduceData(index=i, records=batch)
                    for i in range(partitions)
                ],
            )
        ],
    )
    header = RequestHeader(
        request_api_key=ApiKey.PRODUCE,
        request_api_version=version,
        correlation_id=42,
        client_id="bench-producer",
    )
    return encode_request(header, body)[4:]


def fetch_response(partitions: int, batch: bytes) -> Any:
    """A Fetch v12 response body: one topic, `partitions` partitions of `batch` each."""
    from moldau.protocol.generated import FetchResponse

    return FetchResponse(
        throttle_time_ms=0,
        error_code=0,
        session_id=123_456,
        responses=[
            FetchResponse.FetchableTopicResponse(
                topic="bench-topic",
                partitions=[
                    FetchResponse.PartitionData(
                        partition_index=i,
                        error_code=0,
                        high_watermark=1_000_000 + i,
                        last_stable_offset=1_000_000 + i,
                        log_start_offset=0,
                        aborted_transactions=None,  # read_uncommitted: null, as Kafka sends
                        preferred_read_replica=-1,
                        records=batch,
                    )
                    for i in range(partitions)
                ],
            )
        ],
    )


def metadata_response(topics: int, partitions: int) -> Any:
    """A Metadata v12 response body: 3 brokers, `topics` x `partitions`, replication 3."""
    from moldau.protocol.generated import MetadataResponse

    rng = random.Random(7)
    brokers = [
        MetadataResponse.MetadataResponseBroker(
            node_id=n, host=f"broker-{n}.example.internal", port=9092, rack=f"rack-{n}"
        )
        for n in (1, 2, 3)
    ]

    def partition(index: int) -> Any:
        replicas = [1 + (index + k) % 3 for k in range(3)]
        return MetadataResponse.MetadataResponsePartition(
            error_code=0,
            partition_index=index,
            leader_id=replicas[0],
            leader_epoch=5,
            replica_nodes=replicas,
            isr_nodes=replicas,
            offline_replicas=[],
        )

    return MetadataResponse(
        throttle_time_ms=0,
        brokers=brokers,
        cluster_id="bench-cluster-0123456789",
        controller_id=1,
        topics=[
            MetadataResponse.MetadataResponseTopic(
                error_code=0,
                name=f"bench-topic-{t:03d}",
                topic_id=uuid.UUID(int=rng.getrandbits(128)),
                is_internal=False,
                partitions=[partition(p) for p in range(partitions)],
                topic_authorized_operations=-(2**31),
            )
            for t in range(topics)
        ],
    )


# --- the two libraries' paths -----------------------------------------------------------


def moldau_decode_request() -> Callable[[bytes], Any]:
    from moldau.protocol.headers import decode_request

    return decode_request  # the broker's own entry point: header, version checks, body


def kafka_python_decode_request() -> Callable[[bytes], Any]:
    from kafka.protocol.api_header import RequestHeader
    from kafka.protocol.producer import ProduceRequest

    requests = {ProduceRequest.API_KEY: ProduceRequest}

    def decode(payload: bytes) -> Any:
        api_key, version = _PEEK.unpack_from(payload, 0)
        request = requests[api_key]
        # BytesIO over bytes shares the buffer (no copy); the header decoder reads from it.
        reader = io.BytesIO(payload)
        header = RequestHeader.decode(reader, flexible=request.flexible_version_q(version))
        body = request.decode(memoryview(payload)[reader.tell() :], version=version)
        return header, body

    return decode


def kafka_python_classic_decode_request() -> Callable[[bytes], Any]:
    """kafka-python's hand-written classes (kafka.protocol.old, the 2.x implementation),
    which stop at Produce v8: header v1 and body read from one BytesIO."""
    from kafka.protocol.old.api import RequestHeader
    from kafka.protocol.old.produce import ProduceRequest

    def decode(payload: bytes) -> Any:
        version = _PEEK.unpack_from(payload, 0)[1]
        reader = io.BytesIO(payload)
        header = RequestHeader.decode(reader)
        return header, ProduceRequest[version].decode(reader)

    return decode


def kafka_python_decode_one_call(payload: bytes) -> Any:
    from kafka.protocol.producer import ProduceRequest

    version = _PEEK.unpack_from(payload, 0)[1]
    body = ProduceRequest.decode(payload, version=version, header=True)
    return body.header, body


def _same_produce(moldau: Any, peer: Any) -> None:
    """Both decoders must have read the same request, or the comparison means nothing."""
    (m_header, m_body), (k_header, k_body) = moldau, peer
    assert (m_header.correlation_id, m_header.client_id) == (
        k_header.correlation_id,
        k_header.client_id,
    )
    m_parts = [(p.index, bytes(p.records)) for t in m_body.topic_data for p in t.partition_data]
    k_parts = [
        (p[0], bytes(p[1])) if isinstance(p, tuple) else (p.index, bytes(p.records))
        for t in k_body.topic_data
        for p in (t[1] if isinstance(t, tuple) else t.partition_data)
    ]
    assert m_parts == k_parts


# --- cases ------------------------------------------------------------------------------


Row = tuple[str, s.Timing, s.Timing | None]


def _produce_decode(results: dict[str, Any]) -> list[Row]:
    decode = moldau_decode_request()
    peer = kafka_python_decode_request()
    payloads = {
        "100p": produce_payload(100, record_batch(16 * KIB)),
        "1k": produce_payload(1, record_batch(KIB)),
        "1m": produce_payload(1, record_batch(MIB)),
    }
    for payload in payloads.values():
        _same_produce(decode(payload), peer(payload))
        _same_produce(decode(payload), kafka_python_decode_one_call(payload))
    big, small, huge = payloads["100p"], payloads["1k"], payloads["1m"]
    t = s.measure(
        {
            "m100": lambda: decode(big),
            "k100": lambda: peer(big),
            "k100one": lambda: kafka_python_decode_one_call(big),
        }
    )
    # Each pair whose ratio is reported runs side by side: 1 KiB next to 1 MiB (the
    # flatness goal), and each library's 1 MiB next to the other's.
    t |= s.measure(
        {
            "k1k": lambda: peer(small),
            "m1k": lambda: decode(small),
            "m1m": lambda: decode(huge),
            "k1m": lambda: peer(huge),
        }
    )
    results["produce_decode"] = t
    results["produce_decode_profile"] = lambda: decode(big)
    classic = kafka_python_classic_decode_request()
    v8 = {
        "100p": produce_payload(100, record_batch(16 * KIB), version=8),
        "1k": produce_payload(1, record_batch(KIB), version=8),
        "1m": produce_payload(1, record_batch(MIB), version=8),
    }
    for payload in v8.values():
        _same_produce(decode(payload), classic(payload))
    t8 = s.measure({"m100": lambda: decode(v8["100p"]), "c100": lambda: classic(v8["100p"])})
    t8 |= s.measure({"m1k": lambda: decode(v8["1k"]), "c1k": lambda: classic(v8["1k"])})
    t8 |= s.measure({"m1m": lambda: decode(v8["1m"]), "c1m": lambda: classic(v8["1m"])})
    results["produce_decode_classic"] = t8
    classic_note = "; kafka-python's hand-written 2.x classes (`kafka.protocol.old`)"
    return [
        ("header + Produce v9 decode, 100 partitions x 16 KiB", t["m100"], t["k100"]),
        (
            "header + Produce v9 decode, 100 partitions x 16 KiB; kafka-python's one-call "
            "`decode(header=True)`",
            t["m100"],
            t["k100one"],
        ),
        ("header + Produce v9 decode, 1 partition x 1 KiB", t["m1k"], t["k1k"]),
        ("header + Produce v9 decode, 1 partition x 1 MiB", t["m1m"], t["k1m"]),
        ("header + Produce v8 decode, 100 partitions x 16 KiB" + classic_note,
         t8["m100"], t8["c100"]),
        ("header + Produce v8 decode, 1 partition x 1 KiB" + classic_note, t8["m1k"], t8["c1k"]),
        ("header + Produce v8 decode, 1 partition x 1 MiB" + classic_note, t8["m1m"], t8["c1m"]),
    ]


def _produce_encode() -> list[Row]:
    from kafka.protocol.producer import ProduceRequest as KProduceRequest

    from moldau.protocol.headers import decode_request, encode_request

    payload = produce_payload(100, record_batch(16 * KIB))
    header, body = decode_request(payload)
    for topic in body.topic_data:  # a producer holds its batches as bytes, not views
        for part in topic.partition_data:
            part.records = bytes(part.records)
    peer = KProduceRequest.decode(payload, version=9, header=True)  # keeps its header
    assert encode_request(header, body) == peer.encode(header=True, framed=True)
    t = s.measure(
        {
            "m": lambda: encode_request(header, body),
            "k": lambda: peer.encode(header=True, framed=True),
        }
    )
    return [("Produce v9 encode (framed, with header), 100 partitions x 16 KiB", t["m"], t["k"])]


def _response_codec(name: str, shape: str, response: Any, peer_class: Any) -> list[Row]:
    """Decode and encode one v12 response body with both libraries, on the same bytes."""
    version = 12
    data = response.encode(version)
    peer = peer_class.decode(data, version=version)
    # kafka-python re-encoding its decoded object must give back Moldau's bytes exactly.
    assert peer.encode() == data, f"kafka-python reads the {name} differently"
    moldau_class = type(response)
    t = s.measure(
        {
            "md": lambda: moldau_class.decode(data, version),
            "kd": lambda: peer_class.decode(data, version=version),
            "me": lambda: response.encode(version),
            "ke": lambda: peer.encode(),  # its decoded object already carries the version
        }
    )
    return [
        (f"{name} v{version} decode (body), {shape}", t["md"], t["kd"]),
        (f"{name} v{version} encode (body), {shape}", t["me"], t["ke"]),
    ]


def _fetch() -> list[Row]:
    from kafka.protocol.consumer import FetchResponse as KFetchResponse

    response = fetch_response(100, record_batch(16 * KIB))
    return _response_codec("Fetch response", "100 partitions x 16 KiB", response, KFetchResponse)


def _metadata() -> list[Row]:
    from kafka.protocol.metadata import MetadataResponse as KMetadataResponse

    response = metadata_response(100, 10)
    shape = "100 topics x 10 partitions"
    return _response_codec("Metadata response", shape, response, KMetadataResponse)


def _crc(results: dict[str, Any]) -> list[Row]:
    import kafka.record.util as kafka_util
    from crc32c import crc32c
    from kafka.record._crc32c import crc as kafka_pure_crc

    batch = record_batch(MIB)
    covered = memoryview(batch)[21:]  # Kafka's CRC covers attributes .. end of batch
    stored = struct.unpack_from(">I", batch, 17)[0]
    assert crc32c(covered) == stored == kafka_util.calc_crc32c(covered)
    assert kafka_pure_crc(covered) == stored
    uses_c = kafka_util.calc_crc32c.__defaults__[0] is crc32c  # type: ignore[index]
    t = s.measure(
        {
            "m": lambda: crc32c(covered),
            "k": lambda: kafka_util.calc_crc32c(covered),
            "zlib": lambda: zlib.crc32(covered),
        }
    )
    # The pure-Python CRC takes a good fraction of a second per MiB: few runs suffice.
    slow = s.measure(
        {"m": lambda: crc32c(covered), "py": lambda: kafka_pure_crc(covered)},
        runs=min(s.RUNS, 5),
    )
    results["crc"] = (t, slow, len(covered), uses_c)
    default = "`crc32c` package, C" if uses_c else "its pure-Python fallback"
    return [
        (
            f"CRC-32C of a 1 MiB batch: `crc32c` vs kafka-python's `calc_crc32c` (here: {default})",
            t["m"],
            t["k"],
        ),
        (
            "CRC-32C of a 1 MiB batch: `crc32c` vs kafka-python's pure-Python fallback "
            "`kafka.record._crc32c.crc`",
            slow["m"],
            slow["py"],
        ),
    ]


# --- report -----------------------------------------------------------------------------


def _goal(met: bool) -> str:
    return "**met**" if met else "**missed**"


def run() -> str:
    clock = s.Stopwatch()
    results: dict[str, Any] = {}
    rows: list[Row] = []
    rows += _produce_decode(results)
    rows += _produce_encode()
    rows += _fetch()
    rows += _metadata()
    rows += _crc(results)

    lines = [
        f"## {TITLE}",
        "",
        "Micro-benchmarks of `moldau.protocol` (generated message codec, request header, "
        "CRC-32C) against kafka-python on the same bytes. Each median is the time of one "
        "call: the median of *runs* timed runs of a loop of *loop* calls, with Moldau's and "
        "kafka-python's runs interleaved. Ratio = kafka-python / Moldau (above 1: Moldau "
        "is faster), the median of the ratios of runs made side by side. Record batches "
        "are valid v2 batches of one uncompressed record, built "
        "with kafka-python's producer-side builder; Moldau keeps records as zero-copy "
        "`memoryview`s of the request, kafka-python copies them into `bytes`.",
        "",
        "What is called on each side:",
        "",
        "- Produce decode: Moldau `moldau.protocol.headers.decode_request(payload)` (the "
        "broker's entry point: header, API/version checks, body, trailing-bytes check). "
        "kafka-python has no request-reading path (it is a client); its fastest public one: "
        "peek API key and version, `RequestHeader.decode(io.BytesIO(payload), "
        "flexible=...)`, then `ProduceRequest.decode(memoryview(payload)[pos:], "
        "version=v)`. Its one-call `ProduceRequest.decode(payload, version=v, header=True)` "
        "copies the payload for the header, so it is slower (second row).",
        "- Produce encode: `encode_request(header, body)` vs "
        "`request.encode(header=True, framed=True)`; the bytes are checked equal first.",
        "- Fetch and Metadata: `Response.decode(data, version)` / `response.encode(version)` "
        "vs kafka-python's `Response.decode(data, version=v)` / `response.encode()`, on the "
        "response body (no header); kafka-python's encoding of its decoded object is checked "
        "to reproduce Moldau's bytes exactly.",
        "",
        s.table(
            ["case", "Moldau", "kafka-python", "ratio", "runs x loop (Moldau; kafka-python)"],
            (
                [
                    name,
                    s.fmt_time(ours.median),
                    s.fmt_time(peer.median) if peer else "—",
                    s.fmt_ratio(ours.ratio_to(peer)) if peer else "—",
                    f"{s.fmt_loop(ours)}; {s.fmt_loop(peer)}" if peer else s.fmt_loop(ours),
                ]
                for name, ours, peer in rows
            ),
        ),
        "",
    ]

    t = results["produce_decode"]
    flat_ours = t["m1k"].ratio_to(t["m1m"])
    flat_peer = t["k1k"].ratio_to(t["k1m"])
    speedups = {
        "100 x 16 KiB": t["m100"].ratio_to(t["k100"]),
        "1 x 1 KiB": t["m1k"].ratio_to(t["k1k"]),
        "1 x 1 MiB": t["m1m"].ratio_to(t["k1m"]),
    }
    speedup_text = ", ".join(f"{k}: {s.fmt_ratio(v)}" for k, v in speedups.items())
    t8 = results["produce_decode_classic"]
    classic_speedups = {
        "100 x 16 KiB": t8["m100"].ratio_to(t8["c100"]),
        "1 x 1 KiB": t8["m1k"].ratio_to(t8["c1k"]),
        "1 x 1 MiB": t8["m1m"].ratio_to(t8["c1m"]),
    }
    classic_met = min(classic_speedups.values()) >= GOAL_DECODE_SPEEDUP
    classic_text = ", ".join(f"{k}: {s.fmt_ratio(v)}" for k, v in classic_speedups.items())
    lines += [
        "Goals:",
        "",
        f"- Header parse + Produce decode at least {GOAL_DECODE_SPEEDUP:.0f}x faster than "
        f"kafka-python: {speedup_text}; "
        f"{_goal(min(speedups.values()) >= GOAL_DECODE_SPEEDUP)}"
        + (
            ""
            if min(speedups.values()) >= GOAL_DECODE_SPEEDUP
            else f" (met for {sum(v >= GOAL_DECODE_SPEEDUP for v in speedups.values())} "
            f"of {len(speedups)} shapes)"
        )
        + ". kafka-python 3.x generates and compiles its own decoders per version; the "
        "goal was set against its 2.x implementation, still shipped as "
        f"`kafka.protocol.old` (Produce up to v8): {classic_text}; {_goal(classic_met)}.",
        f"- Produce decode time independent of batch size (1 MiB / 1 KiB within "
        f"{GOAL_SIZE_FLATNESS}x): Moldau {flat_ours:.2f}x, {_goal(flat_ours <= GOAL_SIZE_FLATNESS)}"
        f"; kafka-python {flat_peer:.2f}x (it copies each batch).",
        "",
    ]

    if min(speedups.values()) < GOAL_DECODE_SPEEDUP:
        lines += [
            "Where Moldau's time goes in header + Produce decode, 100 partitions x 16 KiB "
            "(cProfile; own time per function):",
            "",
            s.profile_top(results["produce_decode_profile"], calls=300),
            "",
        ]

    fast, slow, size, same_c = results["crc"]
    gbps = size / 1e9
    if same_c:
        lines += [
            "The first CRC row runs the same C function on both sides (kafka-python adds one "
            "Python call), so its distance from 1.00x shows how noisy this run was.",
            "",
        ]
    lines += [
        "Reference figures for the CRC of the same 1 MiB (GB/s = 10^9 bytes per second):",
        "",
        f"- `crc32c.crc32c` (CRC-32C, C, what Moldau uses): {s.fmt_time(fast['m'].median)}, "
        f"{gbps / fast['m'].median:.2f} GB/s",
        f"- `zlib.crc32` (CRC-32, a different polynomial; a C CRC for scale): "
        f"{s.fmt_time(fast['zlib'].median)}, {gbps / fast['zlib'].median:.2f} GB/s",
        f"- `kafka.record._crc32c.crc` (pure Python, kafka-python's fallback when the "
        f"`crc32c` package is missing): {s.fmt_time(slow['py'].median)}, "
        f"{gbps / slow['py'].median * 1000:.2f} MB/s",
        "",
        "Measured on:",
        "",
        s.environment(clock, PACKAGES),
    ]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    s.configure(quick="--quick" in sys.argv[1:])
    print(run())
