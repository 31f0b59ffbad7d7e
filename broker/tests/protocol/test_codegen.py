"""The committed generated code is exactly what the generator makes from Kafka's JSON.

Needs the message definitions in ../shared/kafka-protocol next to the repository; without
them the tests skip (the committed code is then all there is to test).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

BROKER = Path(__file__).resolve().parents[2]
PROTOCOL_DIR = BROKER.parent / ".." / "shared" / "kafka-protocol"
OUT = BROKER / "src" / "moldau" / "protocol"

pytestmark = pytest.mark.skipif(
    not (PROTOCOL_DIR / "messages").is_dir(),
    reason=f"Kafka's message definitions are not at {PROTOCOL_DIR.resolve()}",
)


@pytest.fixture(scope="module")
def codegen():
    sys.path.insert(0, str(BROKER))
    try:
        import codegen.__main__ as main
    finally:
        sys.path.remove(str(BROKER))
    return main


@pytest.fixture(scope="module")
def rendered(codegen):
    return codegen.render(PROTOCOL_DIR)


def test_generated_files_are_up_to_date(rendered):
    stale = [rel for rel, text in rendered.items() if (OUT / rel).read_text() != text]
    assert not stale, f"regenerate with `python -m codegen` in broker/: {stale[:10]}"
    on_disk = {str(p.relative_to(OUT)) for p in (OUT / "generated").glob("*.py")}
    assert on_disk == {rel for rel in rendered if rel.startswith("generated/")}
    assert len(rendered) == 212  # 210 message modules, the index and the API table


def test_generator_is_deterministic(codegen, rendered):
    assert codegen.render(PROTOCOL_DIR) == rendered


def test_check_mode_in_a_subprocess(tmp_path):
    run = [sys.executable, "-m", "codegen", "--protocol", str(PROTOCOL_DIR)]
    result = subprocess.run([*run, "--check"], cwd=BROKER, capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stderr
    assert "212 files checked, 0 stale" in result.stdout

    # --check notices a hand edit and an orphan, and writes nothing
    copy = tmp_path / "protocol"
    shutil.copytree(OUT, copy, ignore=shutil.ignore_patterns("__pycache__"))
    edited = copy / "generated" / "produce_request.py"
    edited.write_text(edited.read_text() + "# edited by hand\n")
    (copy / "generated" / "orphan.py").write_text("")
    result = subprocess.run([*run, "--check", "--out", str(copy)], cwd=BROKER,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 1
    assert "2 generated files are out of date" in result.stderr
    assert "generated/produce_request.py" in result.stderr
    assert edited.read_text().endswith("# edited by hand\n")

    # without --check it repairs the copy
    result = subprocess.run([*run, "--out", str(copy)], cwd=BROKER, capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert edited.read_text() == (OUT / "generated" / "produce_request.py").read_text()
    assert not (copy / "generated" / "orphan.py").exists()
