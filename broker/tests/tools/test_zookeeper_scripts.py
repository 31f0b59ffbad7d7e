"""zookeeper-server-start.sh / zookeeper-server-stop.sh: Debian's ZooKeeper started with
Kafka's command line from a Kafka-style zookeeper.properties serves znodes, and stops on
SIGTERM from zookeeper-server-stop.sh. Stop is always given this test's properties file
here: the bare form stops every ZooKeeper on the host, other tests' ensembles too."""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from kazoo.client import KazooClient

from moldau.cluster.zk_ensemble import MAIN_CLASS, four_letter_word, free_ports
from moldau.tools.zookeeper_scripts import is_zookeeper, parse_signal, zookeeper_pids

from .toolrun import BIN, die_with_parent, run, wait_for

MARKER = "-Dmoldau.test.zookeeper-scripts=1"  # shows that KAFKA_OPTS reached the JVM


@pytest.fixture
def zk_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The environment the scripts see: logs in tmp, a small JVM, no JMX port."""
    monkeypatch.setenv("LOG_DIR", str(tmp_path / "logs"))
    monkeypatch.setenv("KAFKA_HEAP_OPTS", "-Xmx128M -Xms32M")
    monkeypatch.setenv("KAFKA_JVM_PERFORMANCE_OPTS", "-XX:+UseSerialGC -XX:TieredStopAtLevel=1")
    monkeypatch.setenv("KAFKA_OPTS", MARKER)
    for name in ("JMX_PORT", "EXTRA_ARGS", "KAFKA_LOG4J_OPTS", "KAFKA_GC_LOG_OPTS", "SIGNAL"):
        monkeypatch.delenv(name, raising=False)
    return tmp_path / "logs"


@pytest.fixture
def properties(tmp_path: Path) -> Iterator[tuple[Path, int]]:
    """Kafka's config/zookeeper.properties on a free port, plus a zoo.cfg key; any
    ZooKeeper still running with it is killed afterwards."""
    port = free_ports(1)[0]
    path = tmp_path / "config" / "zookeeper.properties"
    path.parent.mkdir()
    path.write_text("\n".join([
        f"dataDir={tmp_path / 'zookeeper'}", f"clientPort={port}", "maxClientCnxns=0",
        "admin.enableServer=false", "clientPortAddress=127.0.0.1",
        "4lw.commands.whitelist=srvr"]) + "\n")
    try:
        yield path, port
    finally:
        for leftover in zookeeper_pids(str(path)):
            os.kill(leftover, signal.SIGKILL)


def _serves(port: int) -> bool:
    return "Mode: standalone" in (four_letter_word(port, "srvr", timeout=1.0) or "")


def _cmdline(pid: int) -> list[str]:
    return Path(f"/proc/{pid}/cmdline").read_bytes().decode().rstrip("\0").split("\0")


def test_daemon_start_serves_znodes_then_stop(zk_env: Path, properties: tuple[Path, int],
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    config, port = properties
    usage = run("zookeeper-server-start.sh")
    assert (usage.code, usage.out) == (
        1, "USAGE: zookeeper-server-start.sh [-daemon] zookeeper.properties\n")
    started = run("zookeeper-server-start.sh", "-daemon", str(config))
    assert (started.code, started.out, started.err) == (0, "", "")
    wait_for(lambda: _serves(port), what="ZooKeeper to serve")
    [pid] = zookeeper_pids(str(config))
    cmdline = _cmdline(pid)
    assert cmdline[-2:] == [MAIN_CLASS, str(config)]
    assert {"-Xmx128M", "-Xms32M", "-XX:+UseSerialGC", MARKER} <= set(cmdline)

    client = KazooClient(hosts=f"127.0.0.1:{port}", timeout=10)
    client.start(timeout=15)
    try:
        client.create("/quickstart", b"hello")
        assert client.get("/quickstart")[0] == b"hello"
    finally:
        client.stop()
        client.close()
    shell = run("zookeeper-shell.sh", f"127.0.0.1:{port}", "get", "/quickstart")
    assert shell.out.splitlines()[-1] == "hello", shell.err

    # Kafka's -name zookeeper -loggc: console output and the GC log in $LOG_DIR
    console = (zk_env / "zookeeper.out").read_text()
    assert "org.apache.zookeeper" in console and f":{port}" in console
    assert (zk_env / "zookeeper-gc.log").stat().st_size > 0

    monkeypatch.setenv("SIGNAL", "NOSUCH")
    bad = run("zookeeper-server-stop.sh", str(config))
    assert (bad.code, bad.err) == (1, "kill: NOSUCH: invalid signal specification\n")
    assert _serves(port)
    monkeypatch.delenv("SIGNAL")

    stopped = run("zookeeper-server-stop.sh", str(config))
    assert (stopped.code, stopped.out, stopped.err) == (0, "", "")
    wait_for(lambda: not zookeeper_pids(str(config)), what="ZooKeeper to exit")
    assert not _serves(port)
    again = run("zookeeper-server-stop.sh", str(config))
    assert (again.code, again.out) == (1, "No zookeeper server to stop\n")


def test_foreground_start_from_a_relative_path(zk_env: Path, properties: tuple[Path, int],
                                              tmp_path: Path) -> None:
    """The quick start's form: `zookeeper-server-start.sh config/zookeeper.properties` in
    the foreground, its log on the console; the script's process becomes ZooKeeper's."""
    config, port = properties
    with open(tmp_path / "console.txt", "wb") as console:
        proc = subprocess.Popen([str(BIN / "zookeeper-server-start.sh"),
                                 "config/zookeeper.properties"], cwd=tmp_path,
                                stdout=console, stderr=subprocess.STDOUT,
                                preexec_fn=die_with_parent)
    try:
        wait_for(lambda: _serves(port), what="ZooKeeper to serve")
        assert zookeeper_pids(str(config)) == [proc.pid]  # found through the process's cwd
        stopped = run("zookeeper-server-stop.sh", str(config))
        assert stopped.code == 0, stopped.out + stopped.err
        assert proc.wait(timeout=30) == 128 + signal.SIGTERM
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert "binding to port" in (tmp_path / "console.txt").read_text()
    assert not (zk_env / "zookeeper.out").exists()


def test_a_missing_properties_file_starts_nothing(zk_env: Path, tmp_path: Path) -> None:
    missing = tmp_path / "zookeeper.properties"
    for args in (["-daemon", str(missing)], [str(missing)]):
        out = run("zookeeper-server-start.sh", *args)
        assert (out.code, out.out, out.err) == (
            2, "", f"Invalid config, exiting abnormally: {missing} file is missing\n")
    assert not zk_env.exists()
    assert zookeeper_pids(str(missing)) == []


def test_which_processes_are_zookeeper_servers() -> None:
    java = ["/usr/bin/java", "-Xmx512M", "-cp", "/usr/share/java/zookeeper.jar"]
    assert is_zookeeper([*java, MAIN_CLASS, "config/zookeeper.properties"])
    assert is_zookeeper(["java", "org.apache.zookeeper.server.quorum.quorumpeermain", "z.cfg"])
    assert not is_zookeeper([*java, "org.apache.zookeeper.ZooKeeperMain"])  # zkCli
    assert not is_zookeeper(["python", "-m", "moldau.tools.zookeeper_scripts", "QuorumPeerMain"])


def test_signals_as_kill_takes_them() -> None:
    assert parse_signal("TERM") == parse_signal("SIGTERM") == parse_signal("15") \
        == signal.SIGTERM
    assert parse_signal("kill") == signal.SIGKILL
    assert parse_signal("NOSUCH") is None and parse_signal("999") is None
