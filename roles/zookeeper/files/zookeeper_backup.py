#!/usr/bin/env python3
"""A ZooKeeper 3.8 member's data as a backup archive, and the archive back into a member's
directories (roles/zookeeper/tasks/backup.yml and restore.yml, run by playbooks/zookeeper-backup.yml
and zookeeper-restore.yml; docs/operations.md).

ZooKeeper 3.8 has no command that writes a snapshot on demand, so a backup is what a
member restarts from: the newest complete `snapshot.<zxid>`, every transaction log that
may hold a later transaction, and the epoch files. Copied in that order while the member
runs:

- the snapshot first. A snapshot being written is incomplete (it lacks the trailer
  ZooKeeper checks at load: a length of 1 and "/"); the copy is checked and an older
  snapshot taken instead;
- then the logs: the newest one starting at or before the snapshot's zxid (a snapshot is
  fuzzy, taken while transactions go on, so its own zxid's log is replayed over it) and
  every later one. Logs are append-only: a copy is a prefix of the member's history, and
  ZooKeeper stops replaying at the first torn or zero-filled record;
- the epoch files last, so `currentEpoch` is never older than the epoch of the last zxid
  copied (ZooKeeper refuses to start otherwise).

The result is the member's state at the last transaction copied. `myid` is not part of
it: each member of a restored ensemble keeps its own.

Standard library only: it runs with the ZooKeeper host's /usr/bin/python3.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import pwd
import re
import shutil
import sys
import tarfile
import tempfile
import time
from pathlib import Path

SNAPSHOT = re.compile(r"^snapshot\.([0-9a-f]+)$")
LOG = re.compile(r"^log\.([0-9a-f]+)$")
EPOCH_FILES = ("acceptedEpoch", "currentEpoch")
VERSION_DIR = "version-2"  # ZooKeeper's on-disk format directory under dataDir/dataLogDir
# FileSnap's trailer: a 4-byte length of 1, then "/".
SNAPSHOT_TRAILER = b"\x00\x00\x00\x01/"
MANIFEST = "MANIFEST.json"


class BackupError(Exception):
    """A backup or restore that cannot go on; nothing was changed."""


def zxids(directory: Path, pattern: re.Pattern[str]) -> list[tuple[int, Path]]:
    """The files of `directory` whose names match, with their zxids, oldest first."""
    found = []
    for entry in directory.iterdir() if directory.is_dir() else []:
        match = pattern.match(entry.name)
        if match and entry.is_file():
            found.append((int(match.group(1), 16), entry))
    return sorted(found)


def snapshot_complete(path: Path) -> bool:
    """ZooKeeper's own test of a snapshot file (SnapStream.isValidSnapshot, uncompressed)."""
    size = path.stat().st_size
    if size < 10:
        return False
    with path.open("rb") as snapshot:
        snapshot.seek(size - len(SNAPSHOT_TRAILER))
        return snapshot.read() == SNAPSHOT_TRAILER


def logs_after(logs: list[tuple[int, Path]], snapshot_zxid: int) -> list[tuple[int, Path]]:
    """The logs to replay over a snapshot: the last one starting at or before its zxid (it
    holds the transactions the fuzzy snapshot may have missed) and every later one."""
    earlier = [item for item in logs if item[0] <= snapshot_zxid]
    return earlier[-1:] + [item for item in logs if item[0] > snapshot_zxid]


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as data:
        for block in iter(lambda: data.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def copy_snapshot(data: Path, into: Path) -> tuple[int, Path]:
    """Copy the newest complete snapshot into `into`; an incomplete copy is dropped."""
    for zxid, source in reversed(zxids(data, SNAPSHOT)):
        copied = into / source.name
        shutil.copyfile(source, copied)
        if snapshot_complete(copied):
            return zxid, copied
        copied.unlink()
    raise BackupError(f"no complete snapshot.* in {data}")


def collect(data_dir: Path, log_dir: Path, work: Path) -> dict[str, object]:
    """Copy snapshot, logs and epoch files (in that order) into work/data and work/txlog;
    the manifest describing them."""
    data, txlog = data_dir / VERSION_DIR, log_dir / VERSION_DIR
    (work / "data").mkdir()
    (work / "txlog").mkdir()
    snapshot_zxid, snapshot = copy_snapshot(data, work / "data")
    logs = logs_after(zxids(txlog, LOG), snapshot_zxid)
    for _, source in logs:
        shutil.copyfile(source, work / "txlog" / source.name)
    for name in EPOCH_FILES:
        if not (data / name).is_file():
            raise BackupError(f"{data / name} is missing: is {data_dir} a quorum member's?")
        shutil.copyfile(data / name, work / "data" / name)
    files = sorted(p for p in work.rglob("*") if p.is_file())
    return {
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "snapshot_zxid": f"0x{snapshot_zxid:x}",
        "snapshot": snapshot.name,
        "logs": [source.name for _, source in logs],
        "epochs": {name: (work / "data" / name).read_text().strip() for name in EPOCH_FILES},
        "sha256": {str(p.relative_to(work)): sha256(p) for p in files},
    }


def backup(data_dir: Path, log_dir: Path, archive: Path) -> dict[str, object]:
    """Write the archive (data/, txlog/, MANIFEST.json); its manifest."""
    with tempfile.TemporaryDirectory(prefix="zookeeper-backup-", dir=archive.parent) as tmp:
        work = Path(tmp)
        manifest = collect(data_dir, log_dir, work)
        (work / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n")
        partial = archive.with_name(archive.name + ".partial")
        with tarfile.open(partial, "w:gz") as tar:
            for name in (MANIFEST, "data", "txlog"):
                tar.add(work / name, arcname=name)
        partial.rename(archive)
    return manifest


def extract_checked(archive: Path, into: Path) -> dict[str, object]:
    """Extract the archive into `into` and check every file against its manifest."""
    with tarfile.open(archive, "r:gz") as tar:
        for member in tar.getmembers():  # the Python of Debian 12 may predate filter="data"
            if not (member.isfile() or member.isdir()) or member.name.startswith("/") \
                    or ".." in Path(member.name).parts:
                raise BackupError(f"{archive}: unexpected entry {member.name!r}")
        tar.extractall(into)
    manifest_path = into / MANIFEST
    if not manifest_path.is_file():
        raise BackupError(f"{archive} holds no {MANIFEST}: not a zookeeper-backup.yml archive")
    manifest: dict[str, object] = json.loads(manifest_path.read_text())
    expected = manifest["sha256"]
    assert isinstance(expected, dict)
    for name, digest in expected.items():
        path = into / name
        if not path.is_file() or sha256(path) != digest:
            raise BackupError(f"{archive}: {name} is missing or damaged")
    return manifest


def install(source: Path, target: Path, stamp: str, owner: pwd.struct_passwd) -> str | None:
    """Replace target/version-2 by source's files; the old one is renamed (nothing lost).
    The name it was given, if there was one."""
    current = target / VERSION_DIR
    kept = None
    if current.exists():
        kept = f"{VERSION_DIR}.before-restore-{stamp}"
        current.rename(target / kept)
    shutil.copytree(source, current)
    for path in [current, *current.iterdir()]:
        os.chown(path, owner.pw_uid, owner.pw_gid)
    return kept


def restore(archive: Path, data_dir: Path, log_dir: Path, user: str) -> dict[str, object]:
    """Put the archive's files in place as this member's version-2 directories (the member
    is stopped); myid and everything else in the directories stay."""
    owner = pwd.getpwnam(user)
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    with tempfile.TemporaryDirectory(prefix="zookeeper-restore-", dir=archive.parent) as tmp:
        manifest = extract_checked(archive, Path(tmp))
        if log_dir.resolve() == data_dir.resolve():  # no separate dataLogDir
            for log in (Path(tmp) / "txlog").iterdir():
                log.rename(Path(tmp) / "data" / log.name)
        kept = {"data": install(Path(tmp) / "data", data_dir, stamp, owner)}
        if log_dir.resolve() != data_dir.resolve():
            kept["txlog"] = install(Path(tmp) / "txlog", log_dir, stamp, owner)
    return {"snapshot_zxid": manifest["snapshot_zxid"], "set_aside": kept}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    for name in ("backup", "restore"):
        command = sub.add_parser(name)
        command.add_argument("archive", type=Path)
        command.add_argument("--data-dir", type=Path, required=True)
        command.add_argument("--log-dir", type=Path, required=True)
    sub.choices["restore"].add_argument("--user", default="zookeeper")
    args = parser.parse_args(argv)
    try:
        if args.command == "backup":
            result = backup(args.data_dir, args.log_dir, args.archive)
        else:
            result = restore(args.archive, args.data_dir, args.log_dir, args.user)
    except (BackupError, OSError, tarfile.TarError, KeyError) as exc:
        print(f"{args.command} failed: {exc}", file=sys.stderr)
        return 1
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
