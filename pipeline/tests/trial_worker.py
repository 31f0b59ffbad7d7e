"""One run of the sensor pipeline for the exactly-once trials, killed with SIGKILL at a
fixed point (test_exactly_once.py starts it as a separate process, in its own process
group, and restarts it from the same checkpoints).

    python trial_worker.py CONFIG_JSON

Kill points (`kill` in the config):
- "mid-write:K": a writer task of batch >= K with at least two alert rows writes half of
  them (acknowledged), then the whole process group dies;
- "before-commit:K": every task of batch >= K has written, the driver-side commit starts,
  Spark has not recorded the batch as committed: the process group dies;
- "source-commit": Spark has recorded a batch as committed and the next batch's offsets,
  and calls the source's commit(): the process group dies;
- "none": the run ends by itself once everything is processed.
The hooks are subclasses registered under the data source's own name, so the example
pipeline runs unchanged.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path

import sensor_pipeline
from pyspark import TaskContext

from moldau_spark import MoldauKafka
from moldau_spark.reader import StreamReader
from moldau_spark.writer import StreamWriter, Written

KILL = os.environ.get("MOLDAU_TRIAL_KILL", "none")


def die(where: str) -> None:
    """SIGKILL the driver's process group (the driver and Spark's JVM), then our own: the
    Python workers run in a process group of their own."""
    # Python workers' stdout does not reach the driver's log: the test reads this file.
    # Two writer tasks can reach the kill point together: only the first one logs it.
    pgid = os.environ["MOLDAU_TRIAL_PGID"]
    try:
        os.close(os.open(f"{os.environ['MOLDAU_TRIAL_KILLS']}.{pgid}",
                         os.O_CREAT | os.O_EXCL | os.O_WRONLY))
    except FileExistsError:
        pass
    else:
        with open(os.environ["MOLDAU_TRIAL_KILLS"], "a") as log:
            log.write(f"KILL {where}\n")
    os.killpg(int(pgid), signal.SIGKILL)
    os.killpg(os.getpgid(0), signal.SIGKILL)


def _point() -> tuple[str, int]:
    name, _, batch = KILL.partition(":")
    return name, int(batch or 0)


class HookedWriter(StreamWriter):
    def write(self, iterator) -> Written:
        name, at = _point()
        rows = list(iterator)
        batch = int(TaskContext.get().getLocalProperty("streaming.sql.batchId"))
        if name == "mid-write" and batch >= at and len(rows) >= 2:
            super().write(iter(rows[: len(rows) // 2]))
            die(f"mid-write batch {batch}")
        return super().write(iter(rows))

    def commit(self, messages, batchId: int) -> None:
        name, at = _point()
        if name == "before-commit" and batchId >= at:
            die(f"before-commit batch {batchId}")
        super().commit(messages, batchId)


class HookedReader(StreamReader):
    def commit(self, end: dict) -> None:
        if _point()[0] == "source-commit":
            die(f"source-commit {end}")
        super().commit(end)


class HookedKafka(MoldauKafka):
    def streamReader(self, schema):
        return HookedReader(super().streamReader(schema).options)

    def streamWriter(self, schema, overwrite):
        return HookedWriter(super().streamWriter(schema, overwrite).options)


def main() -> int:
    config = json.loads(sys.argv[1])
    os.environ["MOLDAU_TRIAL_PGID"] = str(os.getpgid(0))  # inherited by the JVM and workers
    spark = sensor_pipeline.session("exactly-once-trial")
    spark.dataSource.register(HookedKafka)
    queries = sensor_pipeline.start(
        spark, config["bootstrap"], Path(config["table"]), Path(config["checkpoints"]),
        config["readings"], config["alerts"], config["max_per_trigger"])
    for query in queries:
        query.awaitTermination()
    print("DONE", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
