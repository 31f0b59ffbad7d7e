"""The lab's Java programs (compat/java/*.java), compiled at test time against the cached
kafka-clients jar, once per source text: the classes live in the cache under a digest
of the sources, so an edit recompiles and nothing compiled lands in the checkout."""

from __future__ import annotations

import hashlib
import subprocess
import threading
from pathlib import Path

from compat import launcher

JAVA_DIR = launcher.COMPAT_DIR / "java"
_lock = threading.Lock()  # both columns of a scenario may ask at once


def classes_dir() -> Path:
    sources = sorted(JAVA_DIR.glob("*.java"))
    digest = hashlib.sha256()
    for source in sources:
        digest.update(source.name.encode() + b"\0" + source.read_bytes())
    out = launcher.cache_dir() / "classes" / digest.hexdigest()[:16]
    with _lock:
        if not (out / ".compiled").exists():
            out.mkdir(parents=True, exist_ok=True)
            javac = Path(launcher.java()).resolve().parent / "javac"
            if not javac.exists():
                raise launcher.LabSetupError(f"{javac} not found: install a JDK (make "
                                             "compat-deps installs openjdk-17-jdk-headless)")
            done = subprocess.run([str(javac), "-cp", launcher.kafka_classpath(), "-d", str(out),
                                   *map(str, sources)],
                                  capture_output=True, text=True, timeout=300)
            if done.returncode != 0:
                raise launcher.LabSetupError(f"javac failed on {JAVA_DIR}:\n{done.stderr}")
            (out / ".compiled").touch()
    return out
