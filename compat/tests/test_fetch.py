"""compat/fetch: once the cache holds the locked jars, a fetch checks them and downloads
nothing (it runs without Maven), and the lockfile pins every jar the lab runs."""

from __future__ import annotations

import hashlib
import os
import subprocess
from pathlib import Path

from compat import launcher

LOCK = launcher.COMPAT_DIR / "jars.lock"


def locked() -> dict[str, str]:
    pairs = (line.split() for line in LOCK.read_text().splitlines() if line.strip())
    return {name: digest for digest, name in pairs}


def test_a_second_fetch_verifies_without_maven(tmp_path: Path) -> None:
    first = subprocess.run([str(launcher.FETCH_SCRIPT)], capture_output=True, text=True,
                           timeout=600)
    assert first.returncode == 0, first.stderr
    # No mvn on the PATH: only the checks (bash, coreutils) may run now.
    bare = tmp_path / "bin"
    bare.mkdir()
    for tool in ("bash", "sha256sum", "awk", "sort", "diff", "ls", "dirname", "env"):
        os.symlink(subprocess.check_output(["which", tool], text=True).strip(), bare / tool)
    again = subprocess.run([str(launcher.FETCH_SCRIPT)], capture_output=True, text=True,
                           timeout=60, env={**os.environ, "PATH": str(bare)})
    assert again.returncode == 0, again.stderr
    assert Path(again.stdout.strip()) == launcher.lib_dir()
    assert "fetching" not in again.stderr


def test_the_lock_pins_kafka_and_its_logging_binding() -> None:
    pins = locked()
    for jar in (f"kafka_2.13-{launcher.KAFKA_VERSION}.jar",
                f"kafka-tools-{launcher.KAFKA_VERSION}.jar",
                f"kafka-clients-{launcher.KAFKA_VERSION}.jar",
                "reload4j-1.2.25.jar", "slf4j-reload4j-1.7.36.jar"):
        assert jar in pins, jar
    cached = launcher.lib_dir() / "kafka-clients-3.9.1.jar"
    assert hashlib.sha256(cached.read_bytes()).hexdigest() == pins[cached.name]
    assert sorted(p.name for p in launcher.lib_dir().glob("*.jar")) == sorted(pins)
