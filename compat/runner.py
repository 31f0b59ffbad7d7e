"""Running scenarios on a lab: both columns of a scenario side by side (two threads: each
mostly waits on a JVM or a broker), each column normalised, then compared under the
allowlist. A column that another scenario already ran (same Side key) is reused."""

from __future__ import annotations

import time
import traceback
import uuid
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from compat.allowlist import Entry
from compat.compare import Hunk, Verdict, hunks, verdict
from compat.lab import Lab
from compat.normalise import apply_all, common_rules
from compat.scenarios.base import Context, Scenario, Side, lab_broker
from compat.transcript import Transcript


@dataclass(frozen=True)
class Column:
    """One side's outcome: its transcript (raw and normalised) or the error it hit."""

    transcript: Transcript | None
    normalised: list[str]
    error: str | None = None

    @property
    def summary(self) -> str:
        if self.transcript is None:
            return "error"
        return self.transcript.summary


@dataclass(frozen=True)
class Result:
    scenario: Scenario
    kafka: Column
    moldau: Column
    hunks: list[Hunk]
    verdict: Verdict
    seconds: float


@dataclass
class Runner:
    lab: Lab
    allowlist: Sequence[Entry]
    out_dir: Path  # transcripts, normalised, for reading after the run
    _done: dict[str, tuple[Transcript | None, str | None, str]] = field(default_factory=dict)

    def run_side(self, side: Side) -> tuple[Transcript | None, str | None, str]:
        """(transcript, error, token) of a side, run once per key."""
        if side.key not in self._done:
            token = uuid.uuid4().hex[:6]
            scratch = self.out_dir / "scratch" / side.key.replace("/", "_")
            scratch.mkdir(parents=True, exist_ok=True)
            try:
                transcript: Transcript | None = side.run(Context(self.lab, side.broker, token,
                                                                 scratch, side.pair))
                error = None
            except Exception as exc:  # a side that cannot run is the scenario's result
                transcript, error = None, "".join(traceback.format_exception_only(exc)).strip()
                (scratch / "error.txt").write_text(traceback.format_exc())
            self._done[side.key] = (transcript, error, token)
        return self._done[side.key]

    def column(self, scenario: Scenario, side: Side) -> Column:
        transcript, error, token = self.run_side(side)
        if transcript is None:
            return Column(None, [], error)
        broker = lab_broker(self.lab, side.pair, side.broker)
        paths = [(str(broker.data_dir), "<data>"), (str(self.lab.directory), "<lab>"),
                 (broker.zookeeper_connect, "<zookeeper>"), (token, "<run>")]
        lines = apply_all(transcript.lines, [*common_rules(paths), *scenario.rules])
        return Column(transcript, lines)

    def run(self, scenario: Scenario) -> Result:
        started = time.monotonic()
        with ThreadPoolExecutor(2, thread_name_prefix=scenario.name) as pool:
            kafka_future = pool.submit(self.column, scenario, scenario.kafka)
            moldau_future = pool.submit(self.column, scenario, scenario.moldau)
            kafka, moldau = kafka_future.result(), moldau_future.result()
        if kafka.error or moldau.error:
            found: list[Hunk] = []
            outcome = Verdict.ERROR
        else:
            found = hunks(scenario.name, kafka.normalised, moldau.normalised, self.allowlist)
            outcome = verdict(found)
        result = Result(scenario, kafka, moldau, found, outcome, time.monotonic() - started)
        self._write(result)
        return result

    def _write(self, result: Result) -> None:
        base = self.out_dir / "transcripts"
        base.mkdir(parents=True, exist_ok=True)
        for name, column in (("kafka", result.kafka), ("moldau", result.moldau)):
            text = "\n".join(column.normalised) if column.error is None else column.error
            (base / f"{result.scenario.name}.{name}.txt").write_text(text + "\n")
        (base / f"{result.scenario.name}.diff").write_text(
            "\n".join(h.render() for h in result.hunks) + "\n")
