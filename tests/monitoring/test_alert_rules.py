"""The alert rules pass Prometheus's own checks (`promtool check rules`), their unit tests
(`promtool test rules`, alerts_test.yml: each alert fires on bad series and not on
healthy ones), and query only names that exist: the Kafka and ZooKeeper names are in the
reference lists of what Kafka's exporters serve (exporters/tests/data)."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
RULES = REPO / "roles" / "monitoring" / "files" / "alerts" / "moldau.rules.yml"
DATA = REPO / "exporters" / "tests" / "data"
OURS = {"jmx_scrape_error", "moldau_zookeeper_exporter_up", "up",
        "moldau_tls_certificate_not_after_seconds",
        # the Prometheus client's process metrics, which the broker exporter serves
        # (PROCESS_SAMPLES) as the JMX exporter's agent does for a JVM
        "process_max_fds",
        # Moldau's own broker figures (exporters/tests/test_broker_exporter.py, MOLDAU_NAMES)
        "moldau_eventloop_lagms", "moldau_index_mappings", "moldau_max_map_count"}
PROMQL_WORDS = {"sum", "count", "and", "or", "increase", "rate", "delta", "absent",
                "label_replace", "time", "min_over_time", "resets"}


def promtool(*args: str) -> subprocess.CompletedProcess[str]:
    tool = shutil.which("promtool")
    if tool is None:
        pytest.fail("promtool is missing: `make deps` installs Debian's prometheus package")
    return subprocess.run([tool, *args], capture_output=True, text=True, cwd=HERE, timeout=120)


def test_the_rules_pass_promtool_check() -> None:
    result = promtool("check", "rules", str(RULES))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS: 29 rules found" in result.stdout


def test_every_alert_has_a_passing_unit_test() -> None:
    result = promtool("test", "rules", "alerts_test.yml")
    assert result.returncode == 0, result.stdout + result.stderr
    alerts = {r["alert"] for g in yaml.safe_load(RULES.read_text())["groups"] for r in g["rules"]}
    tests = yaml.safe_load((HERE / "alerts_test.yml").read_text())["tests"]
    tested = {t["alertname"] for group in tests for t in group["alert_rule_test"]}
    assert alerts == tested


def known_names() -> set[str]:
    names = set(OURS)
    for path in DATA.glob("*.txt"):
        names |= {line.split("\t")[0] for line in path.read_text().splitlines()
                  if line and not line.startswith("#")}
    return names


def test_the_rules_query_names_the_exporters_serve() -> None:
    known = known_names()
    groups = yaml.safe_load(RULES.read_text())["groups"]
    for rule in (r for g in groups for r in g["rules"]):
        # drop strings, label matchers, ranges, offsets and by/on clauses: metric names
        # remain
        expr = re.sub(r'"[^"]*"|\{[^}]*\}|\[[^\]]*\]|\boffset\s+\w+|\b(by|on)\s*\([^)]*\)',
                      "", rule["expr"])
        for name in set(re.findall(r"[a-zA-Z_:][a-zA-Z0-9_:]*", expr)) - PROMQL_WORDS:
            if name.startswith("node_"):
                continue  # node-exporter's, on every host
            assert name in known, f"{rule['alert']}: {name} is served by no exporter"
