"""The Grafana dashboard (roles/monitoring/files/dashboards) is what the generator makes,
and every name its expressions query is in a real scrape of the three exporters."""

from __future__ import annotations

import json
from pathlib import Path

from moldau_exporters.dashboard import dashboard, queried_names

BOARD = (Path(__file__).resolve().parents[2] / "roles" / "monitoring" / "files" / "dashboards"
         / "moldau-overview.json")


def test_the_committed_dashboard_is_the_generated_one() -> None:
    assert json.loads(BOARD.read_text()) == dashboard(), \
        "run: python -m moldau_exporters.dashboard > " + str(BOARD)


def test_every_name_the_dashboard_queries_is_served(served: set[str]) -> None:
    missing = sorted(queried_names(dashboard()) - served)
    assert missing == [], f"the dashboard queries names no exporter serves: {missing}"
