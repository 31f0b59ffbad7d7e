"""Running Apache Kafka's classes from the cached jars, as Kafka's bin scripts would.

Maven Central has no `bin/` or `config/`, so this is the lab's own kafka-run-class: the
same JVM flags as Kafka 3.9's kafka-run-class.sh (G1 with a 20 ms pause goal, 256 MiB of
heap for a tool) and kafka-server-start.sh (1 GiB fixed heap for a broker), the lab's own
log4j files, and every cached jar on the classpath. JMX stays off unless a caller asks
for it (`jmx_options`: kafka-run-class.sh's JMX_PORT settings; compat/quotas.py reads the
broker's quota sensors with Kafka's JmxTool).

    python -m compat.launcher kafka.Kafka server.properties
    python -m compat.launcher org.apache.kafka.tools.TopicCommand --bootstrap-server ... --list
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

KAFKA_VERSION = "3.9.1"
COMPAT_DIR = Path(__file__).resolve().parent
FETCH_SCRIPT = COMPAT_DIR / "fetch"
BROKER_LOG4J = COMPAT_DIR / "log4j" / "broker.properties"
TOOLS_LOG4J = COMPAT_DIR / "log4j" / "tools.properties"

# kafka-server-start.sh's KAFKA_HEAP_OPTS, and kafka-run-class.sh's default for the rest.
BROKER_HEAP = ("-Xmx1G", "-Xms1G")
TOOL_HEAP = ("-Xmx256M",)
# kafka-run-class.sh's KAFKA_JVM_PERFORMANCE_OPTS (MaxInlineLevel=15 is JDK 14's default
# already; Kafka keeps it for older JDKs, and so do we, to run the same command line).
JVM_PERFORMANCE_OPTS = (
    "-server", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20",
    "-XX:InitiatingHeapOccupancyPercent=35", "-XX:+ExplicitGCInvokesConcurrent",
    "-XX:MaxInlineLevel=15", "-Djava.awt.headless=true",
)
KAFKA_MAIN = "kafka.Kafka"


class LabSetupError(RuntimeError):
    """Java or Kafka's jars are missing (`make compat-deps` installs them)."""


def cache_dir() -> Path:
    """Where compat/fetch keeps the jars: outside the checkout, shared by worktrees."""
    explicit = os.environ.get("MOLDAU_COMPAT_CACHE")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(Path.home(), ".cache")
    return Path(base) / "moldau" / "compat"


def lib_dir() -> Path:
    return cache_dir() / "lib"


def java() -> str:
    home = os.environ.get("JAVA_HOME")
    found = os.path.join(home, "bin", "java") if home else shutil.which("java")
    if not found or not os.access(found, os.X_OK):
        raise LabSetupError("java not found: install a JDK 17 (Debian's default-jdk-headless)")
    return found


def kafka_classpath() -> str:
    """The cached jars as one wildcard entry (the JVM expands `dir/*` itself)."""
    lib = lib_dir()
    if not (lib / f"kafka_2.13-{KAFKA_VERSION}.jar").exists():
        raise LabSetupError(f"Apache Kafka {KAFKA_VERSION} is not in {lib}: run `make "
                            "compat-deps` (compat/fetch)")
    return f"{lib}/*"


def jmx_options(port: int, host: str = "127.0.0.1") -> tuple[str, ...]:
    """kafka-run-class.sh's KAFKA_JMX_OPTS with JMX_PORT set (remote JMX without
    authentication or TLS, the RMI registry and server on one port), bound to `host`."""
    return ("-Dcom.sun.management.jmxremote=true",
            "-Dcom.sun.management.jmxremote.authenticate=false",
            "-Dcom.sun.management.jmxremote.ssl=false",
            f"-Dcom.sun.management.jmxremote.port={port}",
            f"-Dcom.sun.management.jmxremote.rmi.port={port}",
            f"-Dcom.sun.management.jmxremote.host={host}",
            f"-Djava.rmi.server.hostname={host}")


def jmx_url(port: int, host: str = "127.0.0.1") -> str:
    """The JMX service URL of a JVM started with `jmx_options(port)` (JmxTool's --jmx-url)."""
    return f"service:jmx:rmi:///jndi/rmi://{host}:{port}/jmxrmi"


def java_command(main_class: str, args: Sequence[str], *, broker: bool = False,
                 log_dir: str | os.PathLike[str] | None = None,
                 extra_classpath: Sequence[str] = (),
                 jvm_options: Sequence[str] = ()) -> list[str]:
    """The JVM command line of kafka-run-class.sh for `main_class`: a broker's heap and
    log4j file when `broker`, a tool's otherwise; `jvm_options` go before the class
    (`jmx_options`, say)."""
    heap = BROKER_HEAP if broker else TOOL_HEAP
    log4j = BROKER_LOG4J if broker else TOOLS_LOG4J
    logs = os.fspath(log_dir) if log_dir is not None else os.getcwd()
    classpath = os.pathsep.join([*extra_classpath, kafka_classpath()])
    return [java(), *heap, *JVM_PERFORMANCE_OPTS, *jvm_options, f"-Dkafka.logs.dir={logs}",
            f"-Dlog4j.configuration=file:{log4j}", "-cp", classpath, main_class, *args]


@dataclass(frozen=True)
class ToolRun:
    """What one run of a command printed and how it ended."""

    exit_code: int
    stdout: str
    stderr: str


def run_tool(main_class: str, args: Sequence[str], *, timeout: float = 120.0,
             stdin: str | None = None, extra_classpath: Sequence[str] = (),
             env: Mapping[str, str] | None = None,
             jvm_options: Sequence[str] = ()) -> ToolRun:
    """Run one of Kafka's tools to completion (TopicCommand, DumpLogSegments, ...)."""
    command = java_command(main_class, args, extra_classpath=extra_classpath,
                           jvm_options=jvm_options)
    return run_command(command, timeout=timeout, stdin=stdin, env=env)


def run_command(command: Sequence[str], *, timeout: float = 120.0, stdin: str | None = None,
                env: Mapping[str, str] | None = None) -> ToolRun:
    done = subprocess.run(list(command), input=stdin, capture_output=True, text=True,
                          timeout=timeout, env=dict(os.environ, **(env or {})),
                          stdin=None if stdin is not None else subprocess.DEVNULL)
    return ToolRun(done.returncode, done.stdout, done.stderr)


def main(argv: Sequence[str]) -> int:
    if not argv:
        print("usage: python -m compat.launcher MAIN_CLASS [ARGS...]", file=sys.stderr)
        return 2
    main_class, *args = argv
    command = java_command(main_class, args, broker=main_class == KAFKA_MAIN)
    os.execv(command[0], command)
    return 0  # not reached: execv replaces this process


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
