"""The differential scenarios against one shared Apache Kafka 3.9.1 + Moldau pair (and the
ACL scenarios' pair without a super user): each scenario of the fast subset must be the
same on both brokers or differ only as compat/allowlist.yaml says. Needs `make
compat-deps` (Kafka's jars, maven, javac); a missing piece fails the tests, it does not
skip them."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from compat import allowlist, report, scenarios
from compat.lab import Lab
from compat.runner import Runner

FAST = scenarios.select(fast_only=True)


@pytest.fixture(scope="module")
def runner(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Runner]:
    directory: Path = tmp_path_factory.mktemp("compat")
    lab = Lab.start(directory / "lab", with_acl_pair=scenarios.need_acl_pair(FAST))
    exit_codes: dict[str, int | None] = {}
    try:
        yield Runner(lab, allowlist.load(), directory)
    finally:
        exit_codes = lab.stop()
    # Both brokers shut down cleanly on SIGTERM: Moldau exits 0; Kafka's JVM exits 143
    # (128 + SIGTERM) once its shutdown hook has stopped the broker.
    for prefix in ("", "acl-") if lab.acl_pair else ("",):
        assert exit_codes[prefix + "moldau"] == 0, exit_codes
        assert exit_codes[prefix + "kafka"] in (0, 143), exit_codes
    assert "shut down completed" in (lab.kafka.log_dir / "server.log").read_text()


@pytest.mark.parametrize("scenario", FAST, ids=[s.name for s in FAST])
def test_scenario_matches_kafka(runner: Runner, scenario: scenarios.Scenario) -> None:
    index = scenarios.by_name()
    for required in scenario.requires:  # run once, reused (a Runner remembers its sides)
        runner.run(index[required])
    result = runner.run(scenario)
    assert result.verdict.passed, (
        report.table([result]) + "\n" + report.failures([result])
        + f"\ntranscripts: {runner.out_dir / 'transcripts'}")


def test_the_lab_runs_kafka_3_9_1_beside_moldau(runner: Runner) -> None:
    lab = runner.lab
    assert lab.kafka.bootstrap != lab.moldau.bootstrap
    # Two chroots of one ZooKeeper: each broker's cluster is its own.
    assert lab.kafka.zookeeper_connect != lab.moldau.zookeeper_connect
    assert lab.kafka.zookeeper_connect.split("/")[0] == lab.zookeeper.connect_string
    assert "Kafka version: 3.9.1" in (lab.kafka.log_dir / "server.log").read_text()
