"""The tool runner on its own (no cluster): where a failure is printed, by stage, for a
tool on stderr and for one that reports failures as Kafka's TopicCommand does; and the Java
exception class a failure is logged as."""

from __future__ import annotations

import re

import pytest

from moldau.tools.kafka_errors import KafkaToolError, exception_class
from moldau.tools.options import Opt, Options, ToolError, UsageError
from moldau.tools.runner import ArgumentError, Tool

PREFIX = "Error while executing fake command : "
LOG_LINE = re.compile(r"\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}\] ERROR (.*)\n \(Fake\)\n")


def fake_tool(failure: ToolError | None, *, stage: str, logger: str = "") -> Tool:
    """A tool whose check or run stage raises `failure`."""
    def check(options: Options) -> None:
        if stage == "check" and failure is not None:
            raise failure

    def run(options: Options) -> int:
        if stage == "run" and failure is not None:
            raise failure
        print("done")
        return 0
    return Tool("fake", "A fake tool.", [Opt("go", "Go.")], run, PREFIX,
                plain_parse_errors=bool(logger), check=check, error_logger=logger)


def outcome(tool: Tool, capsys: pytest.CaptureFixture[str],
            *argv: str) -> tuple[int, str, str]:
    code = tool.main(list(argv or ["--go"]))
    out, err = capsys.readouterr()
    return code, out, err


def test_a_run_failure_goes_to_stdout_and_the_log(capsys: pytest.CaptureFixture[str]) -> None:
    tool = fake_tool(KafkaToolError(36, "Topic 't' already exists."), stage="run",
                     logger="Fake")
    code, out, err = outcome(tool, capsys)
    assert (code, out) == (1, PREFIX + "Topic 't' already exists.\n")
    logged = LOG_LINE.fullmatch(err)
    assert logged is not None, err
    assert logged.group(1) == ("org.apache.kafka.common.errors.TopicExistsException: "
                               "Topic 't' already exists.")


def test_an_illegal_argument_while_running_is_logged_too(
        capsys: pytest.CaptureFixture[str]) -> None:
    tool = fake_tool(ArgumentError("Topic 'Optional[t]' does not exist as expected"),
                     stage="run", logger="Fake")
    code, out, err = outcome(tool, capsys)
    assert (code, out) == (1, PREFIX + "Topic 'Optional[t]' does not exist as expected\n")
    logged = LOG_LINE.fullmatch(err)
    assert logged is not None and logged.group(1).startswith(
        "java.lang.IllegalArgumentException: Topic 'Optional[t]'")


def test_a_refused_command_line_stays_on_stderr(capsys: pytest.CaptureFixture[str]) -> None:
    refused = fake_tool(ArgumentError("--bootstrap-server must be specified"), stage="check",
                        logger="Fake")
    assert outcome(refused, capsys) == (1, "", "--bootstrap-server must be specified\n")
    usage = fake_tool(UsageError("Missing required argument \"[topic]\""), stage="check",
                      logger="Fake")
    code, out, err = outcome(usage, capsys)
    assert (code, out) == (1, "")
    assert err.startswith("Missing required argument \"[topic]\"\nOption")
    unknown = fake_tool(None, stage="run", logger="Fake")
    assert outcome(unknown, capsys, "--zookeeper", "x") == (
        1, "", "zookeeper is not a recognized option\n")


def test_without_a_logger_failures_stay_on_stderr(capsys: pytest.CaptureFixture[str]) -> None:
    tool = fake_tool(KafkaToolError(36, "Topic 't' already exists."), stage="run")
    assert outcome(tool, capsys) == (1, "", PREFIX + "Topic 't' already exists.\n")
    plain = fake_tool(ArgumentError("bad value"), stage="run")
    assert outcome(plain, capsys) == (1, "", "bad value\n")
    assert outcome(fake_tool(None, stage="run"), capsys) == (0, "done\n", "")


@pytest.mark.parametrize(("code", "java_class"), [
    # the classes of kafka-clients 3.9.1's Errors for these codes
    (3, "org.apache.kafka.common.errors.UnknownTopicOrPartitionException"),
    (7, "org.apache.kafka.common.errors.TimeoutException"),
    (17, "org.apache.kafka.common.errors.InvalidTopicException"),
    (29, "org.apache.kafka.common.errors.TopicAuthorizationException"),
    (36, "org.apache.kafka.common.errors.TopicExistsException"),
    (37, "org.apache.kafka.common.errors.InvalidPartitionsException"),
    (38, "org.apache.kafka.common.errors.InvalidReplicationFactorException"),
    (40, "org.apache.kafka.common.errors.InvalidConfigurationException"),
    (68, "org.apache.kafka.common.errors.GroupNotEmptyException"),
    (69, "org.apache.kafka.common.errors.GroupIdNotFoundException"),
    (-1, "org.apache.kafka.common.errors.UnknownServerException"),
    (9999, "org.apache.kafka.common.errors.UnknownServerException"),
])
def test_exception_classes_are_kafkas(code: int, java_class: str) -> None:
    assert exception_class(code) == java_class
