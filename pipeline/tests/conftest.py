"""Fixtures of the pipeline suite: the real ZooKeeper ensemble of the broker tests, one
real Moldau broker process, and one local[2] SparkSession for the whole session (Spark
takes 10-20 s to start, so every test shares it), with both format("moldau") and Spark's
own format("kafka") connector on it."""

from __future__ import annotations

import os
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "broker" / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(REPO / "pipeline" / "examples"))

from zk_fixtures import zk_ensemble  # noqa: E402, F401  (the real ZooKeeper ensemble)

from moldau.devcluster.brokers import BrokerProcess  # noqa: E402


@pytest.fixture(scope="session")
def broker(tmp_path_factory: pytest.TempPathFactory, zk_ensemble) -> Iterator[BrokerProcess]:  # noqa: F811
    process = BrokerProcess(str(tmp_path_factory.mktemp("broker")), 1,
                            zk_ensemble.connect_string + f"/spark-{uuid.uuid4().hex[:8]}",
                            properties={"num.partitions": "1",
                                        "auto.create.topics.enable": "false"})
    process.start(wait=60)
    yield process
    process.stop()


@pytest.fixture(scope="session")
def sigkill_trials(broker, tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    from trials import Trials

    trials = Trials(broker.bootstrap, tmp_path_factory.mktemp("trials")).start()
    yield trials
    trials.stop()


@pytest.fixture(scope="session", autouse=True)
def _trials_start_first(request: pytest.FixtureRequest) -> None:
    # The SIGKILL trials take minutes of separate Spark processes: when they are part of
    # the run, they start before everything else and run beside the other tests.
    if any(item.path.name == "test_exactly_once.py" for item in request.session.items):
        request.getfixturevalue("sigkill_trials")


@pytest.fixture(scope="session")
def spark() -> Iterator[object]:
    # Spark starts its Python workers with PYSPARK_PYTHON: it must be this venv's python.
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from kafka_connector_jars import connector_jars
    from sensor_pipeline import QUICK_JVM  # C1 only: a much quicker start on a busy machine

    os.environ.setdefault("PYSPARK_SUBMIT_ARGS", QUICK_JVM)
    from pyspark.sql import SparkSession

    import moldau_spark

    session = (SparkSession.builder.master("local[2]").appName("moldau-spark-tests")
               .config("spark.ui.enabled", "false")
               .config("spark.sql.shuffle.partitions", "2")
               .config("spark.sql.session.timeZone", "UTC")
               # Passed to spark-submit when the JVM starts, so it must be here, not later;
               # Spark's Ivy resolution (spark.jars.packages) would ignore Maven's settings.
               .config("spark.jars", ",".join(connector_jars()))
               .getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    moldau_spark.register(session)
    yield session
    session.stop()
