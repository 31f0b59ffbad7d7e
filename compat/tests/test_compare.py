"""The lab's comparison machinery without a lab: normalisation, the allowlist, hunks and
verdicts, scenario selection. No Java, no brokers."""

from __future__ import annotations

import re

import pytest

from compat import allowlist, scenarios
from compat.compare import Verdict, hunks, verdict
from compat.normalise import apply_all, common_rules, sort_runs
from compat.scenarios.dump_log import java_string_hash, offsets_partition


def test_common_rules_hide_ids_ports_times_paths_and_frames() -> None:
    raw = [
        "Topic: ct-1a2b3c\tTopicId: BIsIPwU1Q_aRY90YPykrCw\tPartitionCount: 3",
        "g  127.0.0.1:35519  (1)",
        "member compat-consumer-73574dba-e890-4b63-a66e-ca06bd2e9a27",
        "! [2026-12-06 16:51:48,099] ERROR boom",
        "! \tat org.apache.kafka.tools.TopicCommand.main(TopicCommand.java:85)",
        "Dumping /tmp/lab/kafka/data/t-0/00000000000000000000.log",
    ]
    rules = common_rules([("/tmp/lab/kafka/data", "<data>"), ("/tmp/lab", "<lab>"),
                          ("1a2b3c", "<run>")])
    assert apply_all(raw, rules) == [
        "Topic: ct-<run>\tTopicId: <topic-id>\tPartitionCount: 3",
        "g  127.0.0.1:<port>  (1)",
        "member compat-consumer-<uuid>",
        "! ERROR boom",
        "Dumping <data>/t-0/00000000000000000000.log",
    ]


def test_sort_runs_sorts_only_consecutive_matching_lines() -> None:
    rule = sort_runs(r"^row ")
    assert rule(["head", "row b", "row a", "gap", "row d", "row c"]) == [
        "head", "row a", "row b", "gap", "row c", "row d"]


def entry(**fields: object) -> allowlist.Entry:
    return allowlist.parse([{"id": "e", "scenario": "topics.*", "kind": "bug",
                             "reason": "why", **fields}])[0]


def test_hunks_are_allowed_only_when_both_sides_match_whole() -> None:
    kafka = ["same", "Error : x", "tail"]
    moldau = ["same", "! Error : x", "tail"]
    listed = entry(kafka=r"Error : .*", moldau=r"! Error : .*")
    found = hunks("topics.moldau-tool", kafka, moldau, [listed])
    assert [(h.kafka, h.moldau, h.allowed_by) for h in found] == [
        (["Error : x"], ["! Error : x"], listed)]
    assert verdict(found) is Verdict.ALLOWED
    # another scenario, or a side that matches only in part, is not covered
    assert verdict(hunks("groups.kafka-tool", kafka, moldau, [listed])) is Verdict.DIFFERENT
    partial = entry(kafka=r"Error", moldau=r"! Error : .*")
    assert verdict(hunks("topics.x", kafka, moldau, [partial])) is Verdict.DIFFERENT
    assert verdict(hunks("topics.x", kafka, kafka, [])) is Verdict.SAME


def test_a_side_left_out_means_no_lines_there() -> None:
    listed = entry(moldau="extra")
    assert verdict(hunks("topics.x", ["a"], ["a", "extra"], [listed])) is Verdict.ALLOWED
    assert verdict(hunks("topics.x", ["a", "gone"], ["a", "extra"], [listed])) \
        is Verdict.DIFFERENT


@pytest.mark.parametrize(("document", "complaint"), [
    ({"id": "x"}, "a list"),
    ([{"id": "x", "scenario": "s", "kind": "bug"}], "lacks reason"),
    ([{"id": "x", "scenario": "s", "kind": "maybe", "reason": "r", "kafka": "a"}], "kind"),
    ([{"id": "x", "scenario": "s", "kind": "bug", "reason": "r"}], "at least one side"),
    ([{"id": "x", "scenario": "s", "kind": "bug", "reason": "r", "kafka": "("}],
     "no regular expression"),
])
def test_malformed_allowlists_are_refused(document: object, complaint: str) -> None:
    with pytest.raises(allowlist.AllowlistError, match=re.escape(complaint)):
        allowlist.parse(document)


def test_the_projects_allowlist_parses_and_names_known_scenarios() -> None:
    entries = allowlist.load()
    names = list(scenarios.by_name())
    for listed in entries:
        assert any(re.fullmatch(listed.scenario.replace("*", ".*"), n) for n in names), \
            listed.id


def test_selection_pulls_in_what_a_scenario_reads() -> None:
    chosen = [s.name for s in scenarios.select(["dump-log.segments"])]
    assert chosen == ["java-client.produce-consume", "dump-log.segments"]
    with pytest.raises(KeyError):
        scenarios.select(["no-such-scenario"])


def test_offsets_partition_is_kafkas() -> None:
    assert java_string_hash("") == 0
    assert java_string_hash("hello") == 99162322  # "hello".hashCode() in Java
    assert java_string_hash("polygenelubricants") == -2147483648  # Integer.MIN_VALUE
    assert offsets_partition("polygenelubricants") == 0  # Utils.abs(MIN_VALUE) is 0
    assert offsets_partition("g1") == 42  # where the lab's Kafka 3.9.1 wrote group g1
