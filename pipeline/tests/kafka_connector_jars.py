"""Spark's own Kafka connector and the jars it needs beyond PySpark's (compat/spark-pom.xml):
`compat/fetch spark` copies them once into the cache and checks them against
compat/spark-jars.lock; later calls only check."""

from __future__ import annotations

import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
LOCK = REPO / "compat" / "spark-jars.lock"


def connector_jars() -> list[str]:
    fetch = subprocess.run([str(REPO / "compat" / "fetch"), "spark"], capture_output=True,
                           text=True, timeout=600)
    if fetch.returncode != 0:
        raise RuntimeError("compat/fetch spark failed (`make spark-deps` installs maven and "
                           f"fetches the jars):\n{fetch.stderr}")
    return sorted(str(jar) for jar in Path(fetch.stdout.strip()).glob("*.jar"))
