"""Option parsing and offset arithmetic, without a cluster: every bad input names the
option and what was expected."""

from __future__ import annotations

import pytest

from moldau_spark.offsets import PartitionRange, from_json, limit, ranges, split, to_json
from moldau_spark.options import OptionError, parse_sink, parse_source

BASE = {"kafka.bootstrap.servers": "127.0.0.1:9092", "subscribe": "a"}


def parse(**extra: str):
    return parse_source({**BASE, **extra})


def test_spark_names_parse_case_insensitively() -> None:
    opts = parse_source({"kafka.bootstrap.servers": "h:1", "ASSIGN": '{"a":[1,0,1]}',
                         "startingOffsets": '{"a":{"0":5,"1":-2}}', "maxOffsetsPerTrigger": "10",
                         "includeHeaders": "TRUE", "failOnDataLoss": "false",
                         "kafka.security.protocol": "SSL"})
    assert opts.subscription.assignment == (("a", 0), ("a", 1))
    assert opts.starting is not None and dict(opts.starting.offsets) == {("a", 0): 5,
                                                                         ("a", 1): -2}
    assert opts.max_offsets_per_trigger == 10
    assert opts.include_headers and not opts.fail_on_data_loss
    assert opts.client == {"bootstrap.servers": "h:1", "security.protocol": "SSL"}


@pytest.mark.parametrize(("extra", "message"), [
    ({"subscibe": "a"}, "unknown source option(s) 'subscibe'"),
    ({"startingOffsets": '{"a":{"0":5'}, "option startingOffsets is not valid JSON"),
    ({"startingOffsets": '{"a":[5]}'}, "topic 'a' must map partition numbers"),
    ({"startingOffsets": '{"a":{"x":5}}'}, "partition 'x' of topic 'a'"),
    ({"startingOffsets": '{"a":{"0":-3}}'}, "expected an integer >= -2, got -3"),
    ({"startingOffsets": "first"}, "expected 'earliest', 'latest' or JSON"),
    ({"endingOffsets": '{"a":{"0":-2}}'}, "-2 (earliest) is not allowed as an end"),
    ({"maxOffsetsPerTrigger": "0"}, "maxOffsetsPerTrigger: expected a positive integer"),
    ({"failOnDataLoss": "yes"}, "failOnDataLoss: expected true or false"),
    ({"subscribePattern": "("}, "exactly one of the options assign, subscribe"),
    ({"kafka.auto.offset.reset": "latest"}, "kafka.auto.offset.reset is not supported"),
    ({"startingTimestamp": "yesterday"}, "startingTimestamp: expected milliseconds"),
])
def test_bad_source_options_are_named(extra: dict[str, str], message: str) -> None:
    with pytest.raises(OptionError) as info:
        parse(**extra)
    assert message in str(info.value)


def test_subscription_and_bootstrap_are_required() -> None:
    with pytest.raises(OptionError, match=r"kafka\.bootstrap\.servers is required"):
        parse_source({"subscribe": "a"})
    with pytest.raises(OptionError, match="exactly one of the options"):
        parse_source({"kafka.bootstrap.servers": "h:1"})
    with pytest.raises(OptionError, match="not a regular expression"):
        parse_source({"kafka.bootstrap.servers": "h:1", "subscribePattern": "("})
    with pytest.raises(OptionError, match=r'expected JSON like \{"topicA":\[0,1\]\}'):
        parse_source({"kafka.bootstrap.servers": "h:1", "assign": '{"a": 0}'})


def test_mode_specific_options() -> None:
    with pytest.raises(OptionError, match="for batch queries only"):
        parse(endingOffsets="latest").check_streaming()
    with pytest.raises(OptionError, match="'latest' is not allowed in a batch query"):
        parse(startingOffsets="latest").check_batch()
    with pytest.raises(OptionError, match="maxOffsetsPerTrigger is for streaming"):
        parse(maxOffsetsPerTrigger="5").check_batch()


def test_sink_options() -> None:
    sink = parse_sink({"kafka.bootstrap.servers": "h:1", "topic": "out",
                       "checkpointLocation": "/tmp/x"})
    assert sink.topic == "out" and sink.replay_scan_max_records == 1_000_000
    with pytest.raises(OptionError, match="unknown sink option"):
        parse_sink({"kafka.bootstrap.servers": "h:1", "topics": "out"})
    with pytest.raises(OptionError, match=r"enable\.idempotence is not supported"):
        parse_sink({"kafka.bootstrap.servers": "h:1", "kafka.enable.idempotence": "false"})


def test_offsets_json_round_trip() -> None:
    offsets = {("a", 0): 5, ("a", 10): 7, ("b", 1): 0}
    assert to_json(offsets) == {"a": {"0": 5, "10": 7}, "b": {"1": 0}}
    assert from_json(to_json(offsets)) == offsets


def test_ranges_read_new_partitions_from_zero() -> None:
    got = ranges({("a", 0): 5, ("a", 1): 9}, {("a", 0): 8, ("a", 1): 9, ("a", 2): 4})
    assert got == [PartitionRange("a", 0, 5, 8), PartitionRange("a", 2, 0, 4)]


def test_limit_shares_by_backlog_and_never_stalls() -> None:
    start = {("a", 0): 0, ("a", 1): 100, ("a", 2): 50}
    latest = {("a", 0): 300, ("a", 1): 200, ("a", 2): 51}
    end = limit(start, latest, 100)
    assert end[("a", 0)] == 74 and end[("a", 1)] == 124  # 300 : 100 of a 401 backlog
    assert end[("a", 2)] == 51  # a share below one record still moves by one
    assert limit(start, latest, 10_000) == latest


def test_split_reaches_min_partitions_deterministically() -> None:
    parts = [PartitionRange("a", 0, 0, 100), PartitionRange("a", 1, 0, 10)]
    got = split(parts, 4)
    assert len(got) == 4 and got == split(parts, 4)
    assert sum(r.size for r in got if r.partition == 0) == 100
    assert [(r.start, r.end) for r in got if r.partition == 0] == [(0, 25), (25, 50), (50, 100)]
    assert split([PartitionRange("a", 0, 0, 1)], 8) == [PartitionRange("a", 0, 0, 1)]
