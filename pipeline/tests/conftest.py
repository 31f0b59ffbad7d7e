"""Fixtures of the pipeline suite: the real ZooKeeper ensemble of the broker tests, one
real Moldau broker process, and one local[2] SparkSession for the whole session (Spark
takes 10-20 s to start, so every test shares it)."""

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
def spark() -> Iterator[object]:
    # Spark starts its Python workers with PYSPARK_PYTHON: it must be this venv's python.
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    import moldau_spark

    session = (SparkSession.builder.master("local[2]").appName("moldau-spark-tests")
               .config("spark.ui.enabled", "false")
               .config("spark.sql.shuffle.partitions", "2")
               .config("spark.sql.session.timeZone", "UTC")
               .getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    moldau_spark.register(session)
    yield session
    session.stop()
