"""The checker's accounting on hand-made writes and reads, and its record format."""

from __future__ import annotations

import json

import pytest

from moldau.checker.cli import client_config
from moldau.checker.records import CheckerRecord, CorruptRecord, encode, parse
from moldau.checker.report import PartitionRead, PartitionWrites, build_report

RUN = "run1"


def rec(seq: int, partition: int = 0, run: str = RUN) -> CheckerRecord:
    return CheckerRecord(run, partition, seq, 1_700_000_000_000 + seq)


def writes(sent: int, acked=(), failed=(), partition: int = 0) -> PartitionWrites:
    """Acknowledged at offset == sequence unless given as (seq, offset)."""
    acks = dict(a if isinstance(a, tuple) else (a, a) for a in acked)
    return PartitionWrites(partition, sent, acks, {seq: "Local: Message timed out"
                                                   for seq in failed})


def read(seqs, partition: int = 0, **kwargs) -> PartitionRead:
    """Records at offsets 0, 1, ...; an int is this run's sequence, None a foreign record,
    a CheckerRecord is taken as it is."""
    records = [(offset, rec(s, partition) if isinstance(s, int) else s)
               for offset, s in enumerate(seqs)]
    return PartitionRead(partition, records, start_offset=0, end_offset=len(records), **kwargs)


def report_of(w: PartitionWrites, r: PartitionRead):
    return build_report(RUN, "t", {w.partition: w}, {r.partition: r})


# the record format


@pytest.mark.parametrize("size", [0, 10, 100, 1000, 65536])
def test_record_round_trip_and_padding(size):
    record = CheckerRecord("abc123", 7, 123456, 1_700_000_000_123)
    key, value = encode(record, size)
    assert parse(key, value) == record
    assert len(value) == max(size, len(encode(record, 0)[1]))
    assert key == b"mdc1/abc123/7/123456"


def test_foreign_records_are_not_the_checkers():
    assert parse(None, b"x") is None
    assert parse(b"user-key", b'{"run": "x"}') is None


@pytest.mark.parametrize("key,value", [
    (b"mdc1/abc/1/2", b"not json"),
    (b"mdc1/abc/1/2", None),
    (b"mdc1/abc/1", b"{}"),
    (b"mdc1/abc/1/two", b"{}"),
    # key and value disagree (a mixed-up record)
    (b"mdc1/abc/1/2", encode(CheckerRecord("abc", 1, 3, 0))[1]),
    (b"mdc1/abc/1/2", encode(CheckerRecord("abd", 1, 2, 0))[1]),
    (b"mdc1/abc/1/2", encode(CheckerRecord("abc", 0, 2, 0))[1]),
])
def test_corrupt_records_are_noticed(key, value):
    with pytest.raises(CorruptRecord):
        parse(key, value)


def test_run_id_must_not_break_the_key():
    with pytest.raises(ValueError):
        encode(CheckerRecord("a/b", 0, 0, 0))


# the accounting


def test_everything_acknowledged_and_read_is_ok():
    report = report_of(writes(5, acked=range(5)), read(range(5)))
    p = report.partitions[0]
    assert report.ok and p.ok
    assert (p.sent, p.acknowledged, p.read, p.in_doubt) == (5, 5, 5, 0)
    assert not p.lost and not p.duplicated and not p.out_of_order and not p.unexpected


def test_acknowledged_but_not_read_is_lost():
    report = report_of(writes(6, acked=range(6)), read([0, 1, 2, 4]))
    assert not report.ok
    assert report.partitions[0].lost == [3, 5]
    assert report.lost == 2
    assert "lost sequences 3, 5" in report.summary()
    assert report.to_dict()["partitions"][0]["lost"] == [3, 5]


def test_in_doubt_and_failed_records_may_be_missing_or_present():
    # 0..5 sent: 0, 1, 4 acked; 2 failed; 3 and 5 in doubt; 2 and 3 landed anyway
    report = report_of(writes(6, acked=[0, (1, 1), (4, 4)], failed=[2]),
                       read([0, 1, 2, 3, 4]))
    p = report.partitions[0]
    assert report.ok, report.summary()
    assert (p.acknowledged, p.failed, p.in_doubt) == (3, 1, 2)
    assert p.landed_unacknowledged == 2
    assert p.failed_errors == {"Local: Message timed out": 1}
    assert not p.lost


def test_in_doubt_is_what_got_no_answer():
    w = writes(6, acked=[0, 2], failed=[4])
    assert w.in_doubt() == {1, 3, 5}


def test_a_sequence_read_twice_is_duplicated_not_out_of_order():
    report = report_of(writes(3, acked=range(3)), read([0, 1, 2, 1]))
    p = report.partitions[0]
    assert not report.ok
    assert p.duplicated == {1: [1, 3]}
    assert p.out_of_order == []
    assert p.read == 4
    assert report.duplicated == 1


def test_a_duplicate_of_an_unacknowledged_record_is_still_a_duplicate():
    report = report_of(writes(3, acked=[0]), read([0, 1, 1]))
    assert not report.ok
    assert report.partitions[0].duplicated == {1: [1, 2]}


def test_a_lower_sequence_after_a_higher_one_is_out_of_order():
    report = report_of(writes(4, acked=range(4)), read([0, 2, 1, 3]))
    p = report.partitions[0]
    assert not report.ok
    assert p.out_of_order == [(2, 1, 2)]  # (offset, sequence, highest before)
    assert not p.duplicated and not p.lost
    assert report.out_of_order == 1


def test_out_of_order_is_judged_against_the_highest_sequence_before_not_the_previous():
    # 1 and 2 both come after 3; 2 is higher than its predecessor 1 but still misplaced
    report = report_of(writes(4, acked=range(4)), read([0, 3, 1, 2]))
    assert report.partitions[0].out_of_order == [(2, 1, 3), (3, 2, 3)]


def test_gaps_of_unacknowledged_records_are_not_reordering():
    report = report_of(writes(6, acked=[0, 3, 5]), read([0, 3, 5]))
    assert report.ok, report.summary()


def test_order_is_judged_per_partition_and_per_run():
    w = {0: writes(2, acked=range(2), partition=0), 1: writes(2, acked=range(2), partition=1)}
    # partition 1 holds an older run's higher sequences first: not this run's business
    r = {0: read([0, 1], partition=0),
         1: read([rec(9, 1, run="older"), rec(8, 1, run="older"), 0, None, 1], partition=1)}
    report = build_report(RUN, "t", w, r)
    assert report.ok, report.summary()
    assert report.partitions[1].foreign == 3
    assert report.totals()["read"] == 4


def test_records_that_cannot_have_been_written_there_are_unexpected():
    r = read([0, 1, 7, rec(1, partition=3)])
    r.corrupt.append((4, "key and value disagree"))
    r.end_offset = 5
    report = report_of(writes(2, acked=range(2)), r)
    p = report.partitions[0]
    assert not report.ok
    reasons = dict(p.unexpected)
    assert sorted(reasons) == [2, 3, 4]
    assert "never sent" in reasons[2]
    assert "sent to partition 3" in reasons[3]
    assert reasons[4].startswith("corrupt")
    assert not p.lost and not p.duplicated and not p.out_of_order


def test_an_incomplete_read_is_not_ok_even_without_findings():
    report = report_of(writes(2, acked=[0]), read([0, 1], complete=False, error="timed out"))
    assert not report.ok
    assert "read incomplete: timed out" in report.summary()


def test_a_partition_written_but_not_read_is_not_ok():
    report = build_report(RUN, "t", {0: writes(1, acked=[0]), 1: writes(0, partition=1)},
                          {0: read([0])})
    assert report.partitions[0].ok
    assert not report.partitions[1].ok and not report.ok


def test_an_acknowledged_record_read_at_another_offset_is_reported_not_failed():
    report = report_of(writes(2, acked=[(0, 0), (1, 5)]), read([0, 1]))
    p = report.partitions[0]
    assert report.ok
    assert p.offset_mismatch == [(1, 5, [1])]


def test_summary_and_json_forms():
    w = {0: writes(3, acked=range(3)), 1: writes(3, acked=range(3), partition=1)}
    r = {0: read([0, 1, 2]), 1: read([0, 2], partition=1)}
    report = build_report(RUN, "t", w, r, producer_errors={"broker down": 2})
    lines = report.summary().splitlines()
    assert lines[1].startswith("partition 0:") and lines[1].endswith("OK")
    assert lines[2].startswith("partition 1:") and "FAILED" in lines[2]
    assert any(line.startswith("total: sent 6 acked 6") for line in lines)
    assert lines[-1] == "RESULT: FAILED"
    data = json.loads(report.to_json())
    assert data["ok"] is False
    assert data["totals"]["lost"] == 1 and data["totals"]["acknowledged"] == 6
    assert [p["ok"] for p in data["partitions"]] == [True, False]
    assert data["partitions"][1]["lost"] == [1]
    assert data["producer_errors"] == {"broker down": 2}


def test_command_config_translation():
    config = client_config({
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.jaas.config": 'org.apache.kafka.common.security.scram.ScramLoginModule '
                            'required username="alice" password="s3cr\\"et";',
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": "/etc/ca.pem",
        "ssl.endpoint.identification.algorithm": "",
    })
    assert config == {"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512",
                      "sasl.username": "alice", "sasl.password": 's3cr"et',
                      "ssl.ca.location": "/etc/ca.pem",
                      "ssl.endpoint.identification.algorithm": "none"}
    # an SSL store that cannot be read is refused with the file named
    with pytest.raises(ValueError, match=r"/etc/ts\.jks"):
        client_config({"security.protocol": "SSL", "ssl.truststore.location": "/etc/ts.jks",
                       "ssl.truststore.type": "JKS", "ssl.truststore.password": "x"})


def test_an_acknowledgement_without_an_offset_counts_as_acknowledged() -> None:
    # librdkafka reports a retried batch answered DUPLICATE_SEQUENCE_NUMBER as delivered,
    # without an offset: the record is acknowledged (so checked for loss), offset unknown.
    from moldau.checker.producer import ProducerRun

    class Delivered:
        def offset(self) -> None:
            return None

    run = ProducerRun("127.0.0.1:9", "t", partitions=[0], rate=None)
    run._on_delivery(0, 0, None, Delivered())
    acked = run.writes()[0].acknowledged
    assert acked == {0: -1}
    report = report_of(PartitionWrites(0, 1, acked, {}), read([0]))
    assert report.ok and report.partitions[0].lost == []
