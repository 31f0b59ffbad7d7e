"""`moldau dev-cluster up|status|down`: the quick start works as documented."""

from __future__ import annotations

import shutil
import socket
import subprocess
import sys

from moldau.devcluster.brokers import free_port


def moldau(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "moldau.cli", *args], capture_output=True,
                          text=True, timeout=120)


def test_up_status_down(tmp_path) -> None:
    port = free_port()
    directory = str(tmp_path / "dev")
    up = moldau("dev-cluster", "up", "--dir", directory, "--port", str(port))
    assert up.returncode == 0, up.stderr
    try:
        assert f"bootstrap servers: 127.0.0.1:{port}" in up.stdout
        assert "healthy" in up.stdout and "standalone" in up.stdout
        kcat = shutil.which("kcat")
        assert kcat
        subprocess.run([kcat, "-b", f"127.0.0.1:{port}", "-P", "-t", "quickstart"],
                       input=b"hello\n", check=True, timeout=60)
        out = subprocess.run([kcat, "-b", f"127.0.0.1:{port}", "-C", "-t", "quickstart", "-e"],
                             capture_output=True, check=True, timeout=60).stdout
        assert out == b"hello\n"
        again = moldau("dev-cluster", "up", "--dir", directory, "--port", str(port))
        assert again.returncode == 0  # idempotent: already running
        status = moldau("dev-cluster", "status", "--dir", directory)
        assert status.returncode == 0 and "healthy" in status.stdout
    finally:
        down = moldau("dev-cluster", "down", "--dir", directory)
    assert down.returncode == 0, down.stderr
    status = moldau("dev-cluster", "status", "--dir", directory)
    assert "broker 1" in status.stdout and "stopped" in status.stdout
    assert "healthy" not in status.stdout


def test_status_without_a_cluster_says_so(tmp_path) -> None:
    status = moldau("dev-cluster", "status", "--dir", str(tmp_path / "none"))
    assert status.returncode == 1
    assert "moldau dev-cluster up" in status.stderr


def free_ports(count: int) -> int:
    """The first of `count` consecutive free ports (dev-cluster numbers brokers' ports
    on from the first), so brokers of tests beside this one are not in the way."""
    while True:
        port = free_port()
        sockets = []
        try:
            for offset in range(count):
                sock = socket.socket()
                sockets.append(sock)
                sock.bind(("127.0.0.1", port + offset))
            return port
        except OSError:
            continue
        finally:
            for sock in sockets:
                sock.close()


def test_three_brokers_replicate(tmp_path) -> None:
    """The README's replicated quick start (issue 41, item 1: it was refused)."""
    port = free_ports(3)
    directory = str(tmp_path / "dev3")
    bootstrap = f"127.0.0.1:{port}"
    up = moldau("dev-cluster", "up", "--dir", directory, "--port", str(port), "--brokers", "3")
    assert up.returncode == 0, up.stderr
    try:
        assert up.stdout.count("healthy") == 3, up.stdout
        assert f"bootstrap servers: {bootstrap},127.0.0.1:{port + 1},127.0.0.1:{port + 2}" \
            in up.stdout
        create = moldau("topics", "--bootstrap-server", bootstrap, "--create",
                        "--topic", "replicated", "--partitions", "2",
                        "--replication-factor", "3")
        assert create.returncode == 0, create.stderr
        kcat = shutil.which("kcat")
        assert kcat
        subprocess.run([kcat, "-b", bootstrap, "-P", "-t", "replicated", "-X", "acks=all",
                        "-p", "0"], input=b"hello\n", check=True, timeout=60)
        out = subprocess.run([kcat, "-b", bootstrap, "-C", "-t", "replicated", "-p", "0", "-e"],
                             capture_output=True, check=True, timeout=60).stdout
        assert out == b"hello\n"
        described = moldau("topics", "--bootstrap-server", bootstrap, "--describe",
                           "--topic", "replicated").stdout
        assert described.count("Replicas: ") == 2 and "ReplicationFactor: 3" in described
        for line in described.splitlines()[1:]:
            isr = line.split("Isr: ")[1].split()[0]
            assert sorted(isr.split(",")) == ["1", "2", "3"], described
        config = (tmp_path / "dev3" / "broker-2" / "server.properties").read_text()
        assert "offsets.topic.replication.factor=3" in config
    finally:
        down = moldau("dev-cluster", "down", "--dir", directory)
    assert down.returncode == 0, down.stderr


def test_zero_brokers_is_refused(tmp_path) -> None:
    up = moldau("dev-cluster", "up", "--dir", str(tmp_path / "none"), "--brokers", "0")
    assert up.returncode == 2
    assert "--brokers and --zookeepers need at least 1" in up.stderr
    assert not (tmp_path / "none").exists()
