"""The SIGKILL trials of test_exactly_once.py as a background job: the sensor pipeline
runs in a separate process (trial_worker.py) that is killed at fixed points and restarted
from its checkpoints. Each run starts its own Spark (10-30 s), so the chain starts with
the test session (conftest.py) and runs beside the other tests; the test waits for it."""

from __future__ import annotations

import ctypes
import json
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import sensor_pipeline as sp
from kafka_helpers import create_topic, topic_name

HERE = Path(__file__).resolve().parent
SECONDS = 240  # event time simulated: 120 readings per sensor, 240 per partition
PARTITIONS = 3
MAX_PER_TRIGGER = 120  # 40 per partition: 6 batches, each closing 4 windows per sensor
# Kill points in order (see trial_worker.py); the last run finishes by itself.
RUNS = ["mid-write:1", "before-commit:2", "source-commit", "mid-write:4", "before-commit:5",
        "none"]
RUN_TIMEOUT_S = 600


@dataclass
class Trials:
    bootstrap: str
    workdir: Path
    readings_topic: str = field(default_factory=lambda: topic_name("readings"))
    alerts_topic: str = field(default_factory=lambda: topic_name("alerts"))
    readings: list[sp.Reading] = field(default_factory=list)
    exits: list[tuple[str, int, float]] = field(default_factory=list)  # kill, code, seconds
    error: BaseException | None = None
    _thread: threading.Thread | None = None
    _current: subprocess.Popen | None = None
    _stopped: bool = False

    @property
    def table(self) -> Path:
        return self.workdir / "table"

    @property
    def log(self) -> Path:
        return self.workdir / "worker.log"

    @property
    def kills(self) -> Path:
        return self.workdir / "kills.log"

    def start(self) -> Trials:
        create_topic(self.bootstrap, self.readings_topic, PARTITIONS)
        create_topic(self.bootstrap, self.alerts_topic, PARTITIONS)
        start_ms = (int(time.time()) - 3600) // sp.WINDOW_S * sp.WINDOW_S * 1000
        self.readings = sp.simulate(SECONDS, start_ms)
        sp.produce_readings(self.bootstrap, self.readings_topic, self.readings, PARTITIONS)
        self._thread = threading.Thread(target=self._run_all, name="sigkill-trials",
                                        daemon=True)
        self._thread.start()
        return self

    def wait(self, timeout: float) -> None:
        assert self._thread is not None
        self._thread.join(timeout)
        if self._thread.is_alive():
            raise TimeoutError(f"the trials did not finish within {timeout}s; runs so far: "
                               f"{self.exits}")
        if self.error is not None:
            raise self.error

    def stop(self) -> None:
        self._stopped = True
        if self._current is not None and self._current.poll() is None:
            os.killpg(self._current.pid, signal.SIGKILL)
        if self._thread is not None:
            self._thread.join(60)

    def _run_all(self) -> None:
        try:
            for kill in RUNS:
                if self._stopped:
                    return
                if kill == "none":
                    self._produce_closing_reading()
                started = time.monotonic()
                code = self._run(kill)
                self.exits.append((kill, code, time.monotonic() - started))
        except BaseException as exc:  # handed to the test by wait()
            self.error = exc

    def _produce_closing_reading(self) -> None:
        """One reading well after the others, before the last run. A kill can land after a
        query's last data batch and before the no-data batch that advances its watermark;
        Spark does not run that batch after a restart without new data, so the windows it
        would close stay open. New data closes them, as in a live pipeline: this reading
        closes every window of the others, and its own window stays open."""
        last = self.readings[-1]
        closing = sp.Reading(last.stage, last.sensor,
                             last.ts_ms + 3 * (sp.WINDOW_S + sp.WATERMARK_S) * 1000, 20.0, 0.1)
        sp.produce_readings(self.bootstrap, self.readings_topic, [closing], PARTITIONS)
        self.readings.append(closing)

    def _run(self, kill: str) -> int:
        config = {"bootstrap": self.bootstrap, "readings": self.readings_topic,
                  "alerts": self.alerts_topic, "table": str(self.table),
                  "checkpoints": str(self.workdir / "checkpoints"),
                  "max_per_trigger": MAX_PER_TRIGGER}
        env = dict(os.environ, MOLDAU_TRIAL_KILL=kill, MOLDAU_TRIAL_KILLS=str(self.kills),
                   PYSPARK_PYTHON=sys.executable, SPARK_LOCAL_IP="127.0.0.1",
                   PYTHONPATH=os.pathsep.join([str(HERE), str(HERE.parent / "examples"),
                                               os.environ.get("PYTHONPATH", "")]))
        with self.log.open("a") as out:
            out.write(f"=== run with kill point {kill}\n")
            out.flush()
            self._current = subprocess.Popen(
                [sys.executable, str(HERE / "trial_worker.py"), json.dumps(config)],
                stdout=out, stderr=subprocess.STDOUT, env=env, preexec_fn=_own_group)
            try:
                return self._current.wait(RUN_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                os.killpg(self._current.pid, signal.SIGKILL)
                self._current.wait()
                raise


def _own_group() -> None:
    os.setsid()  # the hooks kill this whole group (the driver and Spark's JVM)
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def expected(readings: list[sp.Reading]) -> list[tuple]:
    """The aggregates Spark emits: every window the final watermark (latest event time
    minus the delay) has closed, as (window start ms, stage, sensor, avg, max, count)."""
    windows: dict[tuple, list[sp.Reading]] = {}
    for r in readings:
        start = r.ts_ms - r.ts_ms % (sp.WINDOW_S * 1000)
        windows.setdefault((start, r.stage, r.sensor), []).append(r)
    watermark = max(r.ts_ms for r in readings) - sp.WATERMARK_S * 1000
    return sorted(
        (start, stage, sensor, round(sum(r.temperature for r in rs) / len(rs), 3),
         max(r.vibration for r in rs), len(rs))
        for (start, stage, sensor), rs in windows.items()
        if start + sp.WINDOW_S * 1000 <= watermark)
