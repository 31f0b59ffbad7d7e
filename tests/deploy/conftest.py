"""Fixtures of the deployment suite: the real ZooKeeper ensemble of the broker tests (the
health gate's tests read and write znodes in it)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "broker" / "tests"))

from zk_fixtures import zk_ensemble  # noqa: F401  (the real ZooKeeper ensemble)
