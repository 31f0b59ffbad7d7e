"""Exactly-once output under SIGKILL: the sensor pipeline (pipeline/examples), killed at
fixed points and restarted from its checkpoints five times (trials.py, started with the
session), then left to finish. Every expected alert must be in the alerts topic exactly
once, and every expected aggregate in the Parquet table exactly once."""

from __future__ import annotations

import json
import signal
import time

import sensor_pipeline as sp
from kafka_helpers import read_all
from trials import RUNS, Trials, expected

WAIT_S = 1800  # six Spark start-ups on a loaded 2-core machine


def test_killed_and_restarted_pipeline_writes_everything_once(spark, sigkill_trials: Trials
                                                              ) -> None:
    trials = sigkill_trials
    trials.wait(WAIT_S)
    log = trials.log.read_text()[-8000:]
    assert [kill for kill, _, _ in trials.exits] == RUNS
    codes = [code for _, code, _ in trials.exits]
    assert codes == [-signal.SIGKILL] * (len(RUNS) - 1) + [0], (trials.exits, log)
    kills = trials.kills.read_text().splitlines()
    assert [k.split()[1] for k in kills] == [r.split(":")[0] for r in RUNS[:-1]], kills

    aggregates = expected(trials.readings)
    assert len(aggregates) > 100
    table = [(int(r.window_start.timestamp() * 1000), r.stage, r.sensor, r.avg_temperature,
              r.max_vibration, r.readings)
             for r in spark.read.parquet(str(trials.table)).collect()]
    assert sorted(table) == aggregates  # each aggregate once, none missing

    alerts = sorted((json.loads(m.value()) | {"key": m.key().decode()}
                     for m in read_all(trials.bootstrap, trials.alerts_topic)),
                    key=json.dumps)
    want = sorted(({"stage": stage, "sensor": sensor,
                    "window": time.strftime("%H:%M:%S", time.gmtime(start // 1000)),
                    "avg_temperature": avg,
                    "level": "CRITICAL" if avg >= sp.CRITICAL_C else "WARNING", "key": stage}
                   for start, stage, sensor, avg, _, _ in aggregates if avg >= sp.WARNING_C),
                  key=json.dumps)
    assert len(want) > 20
    assert alerts == want  # each alert exactly once
