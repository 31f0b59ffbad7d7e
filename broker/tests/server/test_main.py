"""moldau-server's entry point: an error the broker did not expect leaves a traceback of
its own, not one chained to the optional uvloop import that failed before it (issue 41,
item 15)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

SCRIPT = """
import sys
from moldau.server import main as entry

async def broken(config):
    raise RuntimeError("the broker failed in a way nobody planned for")

entry._serve = broken
sys.exit(entry.main([sys.argv[1]]))
"""


def test_an_unexpected_error_is_not_chained_to_the_uvloop_import(tmp_path: Path) -> None:
    config = tmp_path / "server.properties"
    config.write_text("broker.id=1\nzookeeper.connect=127.0.0.1:1\n"
                      f"log.dirs={tmp_path / 'data'}\n")
    done = subprocess.run([sys.executable, "-c", SCRIPT, str(config)], capture_output=True,
                          text=True, timeout=60, cwd=tmp_path)  # its logs/ go there
    assert done.returncode == 1
    assert "RuntimeError: the broker failed in a way nobody planned for" in done.stderr
    assert "uvloop" not in done.stderr
    assert "During handling of the above exception" not in done.stderr
