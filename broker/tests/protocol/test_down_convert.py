"""Down-conversion of stored v2 batches for Fetch v0-v3 consumers (protocol.down_convert):
what a legacy reader sees afterwards, per codec and target format."""

from __future__ import annotations

import pytest

from moldau.protocol import compression as codecs
from moldau.protocol import legacy
from moldau.protocol.down_convert import down_convert, needs_conversion
from moldau.protocol.records import (
    CONTROL_COMMIT,
    LOG_APPEND_TIME,
    build_batch,
    build_control_batch,
)

T0 = 1_700_000_000_000
CODECS = [codecs.NONE, codecs.GZIP, codecs.SNAPPY, codecs.LZ4]


def _batch(base: int, n: int, codec: int = codecs.NONE, **kwargs: object) -> bytes:
    return build_batch([(b"k%d" % i, b"v%d" % (base + i), [("h", b"x")], T0 + i)
                        for i in range(n)], base_offset=base, compression=codec,
                       **kwargs)  # type: ignore[arg-type]


def _read(records: bytes) -> list[tuple[int, int, bytes | None, bytes | None, int]]:
    return [(m.offset, m.timestamp, m.key, m.value, m.magic)
            for m in legacy.iter_messages(records)]


def test_fetch_versions_map_to_the_formats_their_consumers_read() -> None:
    assert [needs_conversion(v) for v in range(6)] == [0, 0, 1, 1, None, None]


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("magic", [0, 1])
def test_each_codec_converts_to_each_legacy_format(codec: int, magic: int) -> None:
    stored = _batch(10, 3, codec) + _batch(13, 2, codec)
    done = down_convert(stored, magic, first_offset=10)
    stamps = [T0, T0 + 1, T0 + 2, T0, T0 + 1] if magic else [-1] * 5
    assert _read(done.records) == [
        (10 + i, stamps[i], b"k%d" % (i if i < 3 else i - 3), b"v%d" % (10 + i), magic)
        for i in range(5)]
    assert done.converted == 5
    entries = list(legacy.iter_entries(done.records))
    wrapped = codec if not (codec == codecs.LZ4 and magic == 0) else codecs.NONE
    if wrapped:  # one wrapper per batch, at the batch's last offset, with its codec
        assert [(e.offset, e.compression) for e in entries] == [(12, wrapped), (14, wrapped)]
    else:
        assert [e.offset for e in entries] == [10, 11, 12, 13, 14]


def test_an_uncompressed_batch_loses_the_records_before_the_fetch_offset() -> None:
    done = down_convert(_batch(0, 5), 1, first_offset=3)
    assert [m[0] for m in _read(done.records)] == [3, 4]
    assert done.converted == 2


def test_a_compressed_batch_stays_whole_as_in_kafka() -> None:
    done = down_convert(_batch(0, 5, codecs.GZIP), 1, first_offset=3)
    assert [m[0] for m in _read(done.records)] == [0, 1, 2, 3, 4]


def test_offset_gaps_of_a_compacted_batch_survive_in_relative_inner_offsets() -> None:
    stored = build_batch([(b"a", b"1", [], T0), (b"b", b"2", [], T0 + 5)], base_offset=100,
                         compression=codecs.GZIP, offset_deltas=[0, 7])
    done = down_convert(stored, 1, first_offset=100)
    assert [(m[0], m[1]) for m in _read(done.records)] == [(100, T0), (107, T0 + 5)]
    wrapper = next(legacy.iter_entries(done.records))
    assert (wrapper.offset, wrapper.timestamp) == (107, T0 + 5)


def test_log_append_time_marks_every_message_with_the_append_time() -> None:
    stored = _batch(0, 2, codecs.NONE, timestamp_type=LOG_APPEND_TIME, max_timestamp=T0 + 99)
    done = down_convert(stored, 1, first_offset=0)
    entries = list(legacy.iter_entries(done.records))
    assert [(e.timestamp, e.timestamp_type) for e in entries] == [(T0 + 99, LOG_APPEND_TIME)] * 2
    compressed = _batch(0, 2, codecs.GZIP, timestamp_type=LOG_APPEND_TIME, max_timestamp=T0 + 9)
    assert [m[1] for m in _read(down_convert(compressed, 1, 0).records)] == [T0 + 9] * 2


def test_control_batches_are_dropped_and_legacy_entries_kept() -> None:
    marker = build_control_batch(CONTROL_COMMIT, producer_id=7, producer_epoch=0,
                                 coordinator_epoch=0, base_offset=2)
    already_v0 = legacy.build_message_set([(b"k", b"old", [], None)], magic=0, base_offset=3)
    done = down_convert(_batch(0, 2) + marker + already_v0, 0, first_offset=0)
    assert [(m[0], m[3]) for m in _read(done.records)] == [(0, b"v0"), (1, b"v1"), (3, b"old")]
    assert done.converted == 2


def test_a_magic_1_entry_converts_for_a_magic_0_reader() -> None:
    v1 = legacy.build_message_set([(b"k", b"a", [], T0), (b"k", b"b", [], T0)], magic=1,
                                  compression=codecs.GZIP, base_offset=4)
    done = down_convert(v1, 0, first_offset=4)
    assert [(m[0], m[1], m[3], m[4]) for m in _read(done.records)] == [
        (4, -1, b"a", 0), (5, -1, b"b", 0)]


def test_zstd_cannot_be_expressed_in_legacy_formats() -> None:
    with pytest.raises(codecs.UnsupportedCompressionError, match="zstd"):
        down_convert(_batch(0, 2, codecs.ZSTD), 1, first_offset=0)


def test_a_partial_trailing_batch_is_left_out() -> None:
    whole = _batch(0, 2)
    done = down_convert(whole + _batch(2, 2)[:30], 1, first_offset=0)
    assert [m[0] for m in _read(done.records)] == [0, 1]
