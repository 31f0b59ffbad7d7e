"""The usage layouts of Kafka's tools, reproduced byte for byte: Java's line break
opportunities, jopt-simple's option table, argparse4j's usage and error lines. The
expected texts were printed by the real libraries Kafka 3.9.1 ships (jopt-simple 5.0.4,
argparse4j 0.7.0, the JDK's BreakIterator) and kept in golden/."""

from __future__ import annotations

from pathlib import Path

import pytest

from moldau.tools import perf, transactions
from moldau.tools.argparse4j_usage import error, usage, wrap
from moldau.tools.java_line_breaks import segments
from moldau.tools.jopt_help import java_string, table
from moldau.tools.options import LONG, Opt, OptionParser

GOLDEN = Path(__file__).parent / "golden"


@pytest.mark.parametrize(("text", "expected"), [
    ("altering topic configs with a --bootstrap-server option).",
     "altering |topic |configs |with |a |--|bootstrap-|server |option).|"),
    ('symbols; e.g. "test.topic".', 'symbols; |e.|g. |"test.|topic".|'),
    ("kafka.admin.AclCommand HOST1:PORT1,HOST2:PORT2 1.0E7 3.5 1,000 50% $5",
     "kafka.|admin.|AclCommand |HOST1:|PORT1,|HOST2:|PORT2 |1.0|E7 |3.5 |1,000 |50% |$5|"),
    ("it's (default: 5000) [PREFERRED,UNCLEAN] <String: x> a/b a=b,c=d",
     "it's |(default: |5000) |[PREFERRED,|UNCLEAN] |<String: |x> |a/b |a=b,|c=d|"),
    ("the server(s) to use; a-b a--b --", "the |server|(s) |to |use; |a-|b |a--|b |--|"),
    ("\tcleanup.policy", "\t|cleanup.|policy|"),
])
def test_line_breaks_fall_where_javas_break_iterator_puts_them(text: str,
                                                               expected: str) -> None:
    assert "".join(piece + "|" for piece in segments(text)) == expected


def test_option_table_is_jopt_simples() -> None:
    options = [
        Opt("bootstrap-server", "REQUIRED: The Kafka server to connect to.",
            "server to connect to"),
        Opt("command-config", "A property file containing configs to be passed to Admin "
            "Client, with --bootstrap-server option only.", "command config property file",
            optional=True),
        Opt("describe", "List details for the given topics."),
        Opt("topic", 'The topic to describe. It also accepts a regular expression; e.g. '
            '"test\\.topic".', "topic"),
        Opt("partitions", "The number of partitions for the topic (WARNING: If partitions "
            "are increased for a topic that has a key, the partition logic or ordering of "
            "the messages will be affected).", "# of partitions", int),
        Opt("timeout", "The timeout that can be set for some use cases.", "timeout (ms)",
            LONG, 5000),
        Opt("throughput", "Throttle maximum message throughput.", "records/sec", float,
            10_000_000.0),
        Opt("ratio", "A ratio.", "", float, 0.5),
        Opt("config", "A topic configuration override. The following is a list of valid "
            "configurations:\n\tcleanup.policy\n\tfollower.replication.throttled.replicas\n"
            "\tsegment.ms\nSee the Kafka documentation for full details.", "name=value"),
        Opt("replica-assignment", "A list of manual partition-to-broker assignments.",
            "broker_id_for_part1_replica1 : broker_id_for_part1_replica2 , "
            "broker_id_for_part2_replica1 : broker_id_for_part2_replica2 , ..."),
        Opt("plugin", "The class org.apache.kafka.tools.api.RecordReader."
            "SomeVeryLongNestedClassNameThatCannotBreak is used.", ""),
    ]
    expected = (GOLDEN / "jopt-simple-usage-table.txt").read_text()
    assert OptionParser(options).usage() + "\n" == expected


def test_a_table_is_as_wide_as_its_entries() -> None:
    assert table([("--a", "b")]) == ("Option  Description\n"
                                     "------  -----------\n"
                                     "--a     b          \n")


@pytest.mark.parametrize(("value", "shown"), [
    (True, "true"), (5000, "5000"), (0.5, "0.5"), (1e7, "1.0E7"), (1.5e-4, "1.5E-4"),
    (100.0, "100.0"), ("\\n", "\\n"),
])
def test_defaults_are_shown_as_java_prints_them(value: object, shown: str) -> None:
    assert java_string(value) == shown


def test_producer_performance_usage_error_is_argparse4js(
        capsys: pytest.CaptureFixture[str]) -> None:
    assert perf.PRODUCER_TOOL.main(["--topic", "t", "--num-records", "10", "--throughput",
                                    "-1", "--producer-props",
                                    "bootstrap.servers=127.0.0.1:1"]) == 1
    out, err = capsys.readouterr()
    assert out == ""
    assert err == (GOLDEN / "argparse4j-producer-performance-error.txt").read_text()


def test_transactions_usage_errors_are_argparse4js(capsys: pytest.CaptureFixture[str]) -> None:
    for argv in (["--bootstrap-server", "127.0.0.1:1", "list", "--duration-filter", "x"],
                 ["--bootstrap-server", "127.0.0.1:1", "describe-producers", "--topic", "t"]):
        assert transactions.TOOL.main(argv) == 1
    assert capsys.readouterr().err == (GOLDEN / "argparse4j-transactions-errors.txt").read_text()


def test_usage_of_a_long_program_name_starts_on_the_next_line() -> None:
    assert usage("a-program-name-longer-than-the-limit", ["[-h]", "--x X"]) == (
        "usage: a-program-name-longer-than-the-limit\n       [-h] --x X\n")


def test_error_lines_are_justified_but_the_last() -> None:
    assert error("tool", "short") == "tool: error: short\n"
    # 9 columns: "aa bb cc" is one short, and the odd space goes to the middle run
    assert wrap("aa bb cc dd ee ff", 9) == "aa bb  cc\ndd ee ff"


def test_payload_monotonic_counts_the_records() -> None:
    options = perf.producer_options(["--topic", "t", "--num-records", "3", "--throughput",
                                     "-1", "--payload-monotonic"])
    assert options.has("payload-monotonic") and perf._payloads(options) == []
