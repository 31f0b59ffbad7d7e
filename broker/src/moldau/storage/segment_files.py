"""The files of a segment on disk: Kafka's names, and renaming, deleting and syncing them.

A segment is `<base offset>.log` with `.index`, `.timeindex` and (from transactions)
`.txnindex` beside it, each name optionally followed by a state suffix (`.deleted`,
`.cleaned`, `.swap`). The base offset is written with 20 digits so `ls` sorts numerically.
"""

from __future__ import annotations

import os
from collections.abc import Iterable

from moldau.errors import KafkaStorageError

LOG_SUFFIX = ".log"
OFFSET_INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
TXN_INDEX_SUFFIX = ".txnindex"
DELETED_SUFFIX = ".deleted"
CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"
# Every file a segment may have, in the order they are deleted.
SEGMENT_FILE_KINDS = (LOG_SUFFIX, OFFSET_INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX)


def segment_file_name(base_offset: int, suffix: str) -> str:
    """`00000000000000000042.index` for (42, ".index"): 20 digits so `ls` sorts numerically."""
    if base_offset < 0:
        raise ValueError(f"base offset must not be negative, got {base_offset}")
    return f"{base_offset:020d}{suffix}"


def base_offset_of(path: str | os.PathLike[str]) -> int:
    """The base offset in a segment file name: the digits before the first dot.

    Works for every suffix Kafka uses (`.log`, `.index.deleted`, `.timeindex.swap`, ...).
    """
    name = os.path.basename(os.fspath(path))
    prefix = name.split(".", 1)[0]
    if not prefix.isascii() or not prefix.isdigit():
        raise ValueError(f"not a segment file name (expected <digits>.<suffix>): {name!r}")
    return int(prefix)


def segment_path(directory: str, base_offset: int, kind: str, suffix: str = "") -> str:
    """The path of one file of a segment: kind is `.log`, `.index`, ...; suffix its state."""
    return os.path.join(directory, segment_file_name(base_offset, kind) + suffix)


def fsync_path(path: str) -> None:
    """fsync a file by name; a file that does not exist (an index never written) is fine."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def rename_if_present(old: str, new: str) -> None:
    """Rename a file a segment may lack (an unmapped index, a transaction index)."""
    if os.path.exists(old):
        os.rename(old, new)


def delete_files(paths: Iterable[str]) -> None:
    """Remove a segment's files; those already gone are fine."""
    for path in paths:
        try:
            os.remove(path)
        except FileNotFoundError:
            pass
        except OSError as exc:
            raise KafkaStorageError(f"deleting {path} failed: {exc}") from exc
