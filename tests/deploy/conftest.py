"""Fixtures of the deployment suite: a real one-server ZooKeeper from the broker tests'
fixtures (the health gate's tests read and write znodes in it)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "broker" / "tests"))

from zk_fixtures import zk_single  # noqa: F401  (a real one-server ZooKeeper)
