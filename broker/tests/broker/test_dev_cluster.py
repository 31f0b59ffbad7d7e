"""`moldau dev-cluster up|status|down`: the quick start works as documented."""

from __future__ import annotations

import shutil
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
