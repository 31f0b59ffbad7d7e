"""Small file helpers shared by the storage modules: durable, atomic replacement of a file."""

from __future__ import annotations

import contextlib
import os

__all__ = ["atomic_write", "fsync_dir", "temp_path_for"]


def temp_path_for(path: str | os.PathLike[str]) -> str:
    """The temporary sibling a file is written to before the swap (Kafka's `<name>.tmp`)."""
    return os.fspath(path) + ".tmp"


def fsync_dir(path: str | os.PathLike[str]) -> None:
    """fsync a directory so a rename or create inside it survives a crash."""
    fd = os.open(os.fspath(path), os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write(path: str | os.PathLike[str], data: bytes, *, sync: bool = True) -> None:
    """Replace `path` with `data` so readers see the old or the new content, never a mix.

    Write `<path>.tmp`, fsync it, rename it over `path`, then fsync the directory so the
    rename itself is durable. With `sync=False` only the rename's atomicity is kept.
    """
    target = os.fspath(path)
    tmp = temp_path_for(target)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        try:
            _write_all(fd, data)
            if sync:
                os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, target)
    except BaseException:
        # A failed write must not leave a half-written temp file behind for the next reader.
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    if sync:
        fsync_dir(os.path.dirname(os.path.abspath(target)))


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]
