"""The ZooKeeper backup's file handling (roles/zookeeper/files/zookeeper_backup.py) on
member directories laid out as ZooKeeper 3.8 writes them: which snapshot and logs a
backup takes, that an incomplete snapshot is passed over, that myid stays out, and that
a restore checks the archive, keeps myid and renames what it replaces. A real ensemble
restored from a real backup is the zookeeper-life Molecule scenario's."""

from __future__ import annotations

import io
import os
import pwd
import sys
import tarfile
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "roles" / "zookeeper" / "files"))

import zookeeper_backup

COMPLETE = b"snapshot body" + zookeeper_backup.SNAPSHOT_TRAILER
ME = pwd.getpwuid(os.getuid()).pw_name


def member(root: Path, snapshots: dict[str, bytes], logs: list[str]) -> tuple[Path, Path]:
    """A member's dataDir and dataLogDir with the given files (and myid, epochs)."""
    data, txlog = root / "data", root / "txlog"
    (data / "version-2").mkdir(parents=True)
    (txlog / "version-2").mkdir(parents=True)
    (data / "myid").write_text("2\n")
    for name, body in snapshots.items():
        (data / "version-2" / name).write_bytes(body)
    for name in logs:
        (txlog / "version-2" / name).write_bytes(name.encode())
    (data / "version-2" / "acceptedEpoch").write_text("3")
    (data / "version-2" / "currentEpoch").write_text("3")
    return data, txlog


def members_of(archive: Path) -> list[str]:
    with tarfile.open(archive) as tar:
        return sorted(m.name for m in tar.getmembers() if m.isfile())


def test_the_newest_snapshot_with_the_log_it_started_in_and_every_later_one(tmp_path: Path) -> None:
    data, txlog = member(tmp_path, {"snapshot.100000010": COMPLETE, "snapshot.300000005": COMPLETE},
                         ["log.100000001", "log.200000001", "log.300000001", "log.300000009",
                          "log.30000000a"])
    archive = tmp_path / "backup.tar.gz"
    manifest = zookeeper_backup.backup(data, txlog, archive)
    assert manifest["snapshot_zxid"] == "0x300000005"
    # log.300000001 may hold transactions the fuzzy snapshot missed; older ones are not needed
    assert manifest["logs"] == ["log.300000001", "log.300000009", "log.30000000a"]
    assert manifest["epochs"] == {"acceptedEpoch": "3", "currentEpoch": "3"}
    assert members_of(archive) == [
        "MANIFEST.json", "data/acceptedEpoch", "data/currentEpoch", "data/snapshot.300000005",
        "txlog/log.300000001", "txlog/log.300000009", "txlog/log.30000000a"]


def test_an_incomplete_snapshot_is_passed_over(tmp_path: Path) -> None:
    data, txlog = member(tmp_path, {"snapshot.10": COMPLETE, "snapshot.20": b"half written"},
                         ["log.1", "log.15", "log.21"])
    manifest = zookeeper_backup.backup(data, txlog, tmp_path / "backup.tar.gz")
    assert manifest["snapshot"] == "snapshot.10"
    assert manifest["logs"] == ["log.1", "log.15", "log.21"]


def test_no_complete_snapshot_is_an_error_and_writes_nothing(tmp_path: Path) -> None:
    data, txlog = member(tmp_path, {"snapshot.20": b"x"}, ["log.1"])
    archive = tmp_path / "backup.tar.gz"
    assert zookeeper_backup.main(["backup", str(archive), "--data-dir", str(data),
                                  "--log-dir", str(txlog)]) == 1
    assert not archive.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data", "txlog"]


def test_restore_keeps_myid_and_renames_what_it_replaces(tmp_path: Path) -> None:
    source_data, source_log = member(tmp_path / "a", {"snapshot.20": COMPLETE}, ["log.1", "log.21"])
    archive = tmp_path / "backup.tar.gz"
    zookeeper_backup.backup(source_data, source_log, archive)
    data, txlog = member(tmp_path / "b", {"snapshot.99": COMPLETE}, ["log.99"])
    (data / "myid").write_text("3\n")
    result = zookeeper_backup.restore(archive, data, txlog, ME)
    assert (data / "myid").read_text() == "3\n"
    assert sorted(p.name for p in (data / "version-2").iterdir()) == [
        "acceptedEpoch", "currentEpoch", "snapshot.20"]
    assert sorted(p.name for p in (txlog / "version-2").iterdir()) == ["log.1", "log.21"]
    set_aside = result["set_aside"]
    assert isinstance(set_aside, dict)
    assert (data / set_aside["data"] / "snapshot.99").is_file()
    assert (txlog / set_aside["txlog"] / "log.99").is_file()


def test_restore_with_the_logs_in_the_data_dir(tmp_path: Path) -> None:
    source_data, source_log = member(tmp_path / "a", {"snapshot.20": COMPLETE}, ["log.21"])
    archive = tmp_path / "backup.tar.gz"
    zookeeper_backup.backup(source_data, source_log, archive)
    data = tmp_path / "b"
    data.mkdir()
    zookeeper_backup.restore(archive, data, data, ME)
    assert sorted(p.name for p in (data / "version-2").iterdir()) == [
        "acceptedEpoch", "currentEpoch", "log.21", "snapshot.20"]


def test_a_damaged_archive_changes_nothing(tmp_path: Path) -> None:
    source_data, source_log = member(tmp_path / "a", {"snapshot.20": COMPLETE}, ["log.21"])
    archive = tmp_path / "backup.tar.gz"
    zookeeper_backup.backup(source_data, source_log, archive)
    damaged = tmp_path / "damaged.tar.gz"
    with tarfile.open(archive) as src, tarfile.open(damaged, "w:gz") as dst:
        for item in src.getmembers():
            body = src.extractfile(item) if item.isfile() else None
            if item.name == "txlog/log.21":
                item.size = 3
                body = io.BytesIO(b"bad")
            dst.addfile(item, body)
    data, txlog = member(tmp_path / "b", {"snapshot.99": COMPLETE}, ["log.99"])
    with pytest.raises(zookeeper_backup.BackupError, match=r"log\.21 is missing or damaged"):
        zookeeper_backup.restore(damaged, data, txlog, ME)
    assert sorted(p.name for p in data.iterdir()) == ["myid", "version-2"]
    assert (data / "version-2" / "snapshot.99").is_file()
    assert zookeeper_backup.extract_checked(archive, tmp_path / "x")["logs"] == ["log.21"]
