"""What the coverage-guided fuzzer (broker/fuzz/fuzz_requests.py, `make test-long`) found,
each finding kept as a test with its input inline; and the fuzzer's own properties on
its seed corpus, so the harness cannot rot between long runs (it needs no atheris)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from moldau.protocol import legacy
from moldau.protocol.errors import ProtocolError
from moldau.protocol.framing import FrameDecoder, FrameReader
from moldau.protocol.headers import decode_request
from moldau.protocol.primitives import write_uvarint
from moldau.protocol.records import RecordBatch, SimpleRecord, build_batch, iter_batches
from moldau.server.handlers.produce_fast import parse

FUZZER = Path(__file__).resolve().parents[2] / "fuzz" / "fuzz_requests.py"


def test_pending_counts_the_size_prefix_of_a_frame_received_in_place() -> None:
    # frames target: a frame larger than half the scratch buffer is received in its own
    # buffer; while it was incomplete, `pending` left out its 4-byte size prefix.
    stream = b"\x00\x00\x00\x64" + b"x" * 10  # a 100-byte frame, 10 bytes of it so far
    reader = FrameReader(max_frame_size=1000, scratch_size=64)
    target = reader.get_buffer()
    target[:len(stream)] = stream
    assert reader.buffer_updated(len(stream)) == []
    decoder = FrameDecoder(max_frame_size=1000)
    assert decoder.feed(stream) == []
    assert reader.pending == decoder.pending == 14
    rest = reader.get_buffer()
    assert len(rest) == 90  # the rest of the frame goes straight into its buffer
    rest[:] = b"y" * 90
    assert reader.buffer_updated(90) == [bytearray(b"x" * 10 + b"y" * 90)]
    assert reader.pending == 0


# records target: a magic 1 message set whose last message has timestamp Long.MIN_VALUE,
# the first 18016098509481984; converted to v2, the last record read back as
# 36032197018963967. A v2 record's timestamp is the batch's base timestamp plus a delta,
# in Java's wrapping 64-bit arithmetic: the delta must be written wrapped, and read back
# by wrapping again.
LEGACY_FAR_APART_TIMESTAMPS = (
    b"\x00\x02\x00\x00\x00\x00\x00\x00\x00\x00\x00\x1ej\xd0]\xb8\x01\x00\x00@\x01"
    b"\x8b\xcf\xe5h\x00\x00\x00\x00\x03key\x00\x00\x00\x05value\x00\x00\x00\x00\x00"
    b"\x00\x00\x01\x00\x00\x00>v8\xc5\xb7\x01\x00\x00\x00\x01\x8bO\xe5h\x05\xff\xff"
    b"\xff\xff\x00\x00\x00(" + b"x" * 40 + b"\x00\x00\x00\x00\x00\x00\x00\x02\x00\x00"
    b"\x00\x1f\xbe\x976t\x01\x00\x80\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\ttombstone"
    b"\xff\xff\xff\xff"
)


def test_legacy_conversion_keeps_timestamps_more_than_2_63_ms_apart() -> None:
    messages = list(legacy.iter_messages(LEGACY_FAR_APART_TIMESTAMPS, verify_crc=False))
    converted = legacy.convert_to_v2(LEGACY_FAR_APART_TIMESTAMPS, verify_crc=False)
    (batch,) = iter_batches(converted)
    assert [r.timestamp for r in batch.records()] == [m.timestamp for m in messages] == [
        18016098509481984, 1697852516357, -(2**63)]


def test_a_timestamp_delta_that_wraps_is_written_and_read_as_kafka_does() -> None:
    base = 1_700_000_000_000
    batch = build_batch([SimpleRecord(None, b"v", (), -(2**63))], base_timestamp=base)
    # Java: delta = Long.MIN_VALUE - base wraps to 2**63 - base, whose zigzag is
    # 2 * (2**63 - base) mod 2**64; the record starts at byte 61 with its length and
    # attributes (one byte each), then the delta.
    expected = bytearray()
    write_uvarint(expected, (2**64 - 2 * base) % 2**64)
    assert batch[63:63 + len(expected)] == expected
    assert [r.timestamp for r in RecordBatch(batch).records()] == [-(2**63)]
    extremes = [base, -(2**63), 2**63 - 1]
    batch = build_batch([SimpleRecord(None, None, (), t) for t in extremes])
    assert [r.timestamp for r in RecordBatch(batch).records()] == extremes


# produce_fast target: Produce v9 (one topic "t", one partition, empty records) whose
# request header the decoder refuses, and which the broker's fast Produce path took while
# it skipped the client id without reading it: a length below -1, and one byte not UTF-8.
FAST_PATH_LENIENT = [
    b"\x00\x00\x00\t\x00\x00\x00\x05\xff\xfb"
    b"\x00\x00\x00\x01\x00\x00\x03\xe8\x02\x02t\x02\x00\x00\x00\x00\x01\x00\x00\x00",
    b"\x00\x00\x00\t\x00\x00\x00\x05\x00\x01\xff"
    b"\x00\x00\x00\x01\x00\x00\x03\xe8\x02\x02t\x02\x00\x00\x00\x00\x01\x00\x00\x00",
]


@pytest.mark.parametrize("frame", FAST_PATH_LENIENT)
def test_the_fast_produce_path_refuses_what_the_decoder_refuses(frame: bytes) -> None:
    with pytest.raises(ProtocolError, match="RequestHeader v2"):
        decode_request(frame)
    assert parse(bytearray(frame)) is None


def test_the_fuzz_properties_hold_on_the_seed_corpus() -> None:
    result = subprocess.run([sys.executable, str(FUZZER), "--check-seeds"],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    for target in ("frames", "requests", "bodies", "records"):
        assert f"{target}: " in result.stdout
