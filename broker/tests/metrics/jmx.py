"""Reading a broker's metrics endpoint in tests."""

from __future__ import annotations

import json
import urllib.request
from typing import Any


def beans(port: int, query: str) -> dict[str, dict[str, Any]]:
    url = f"http://127.0.0.1:{port}/jmx?qry={query}"
    with urllib.request.urlopen(url, timeout=10) as answer:
        return {b["name"]: b for b in json.load(answer)["beans"]}


def broker_beans(broker: Any, query: str) -> dict[str, dict[str, Any]]:
    """`beans` of a BrokerProcess started with MOLDAU_METRICS_PORT in its environment."""
    return beans(int(broker.env["MOLDAU_METRICS_PORT"]), query)
