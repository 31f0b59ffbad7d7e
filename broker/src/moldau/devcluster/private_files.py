"""Files only their owner may read (mode 0600): keys, passwords, client.properties."""

from __future__ import annotations

import os
from pathlib import Path

PRIVATE_MODE = 0o600


def write_private_file(path: Path, data: bytes) -> None:
    """Write `data` to `path` with mode 0600. The file is written beside it first and
    renamed over it, so no reader ever sees it half written or readable by others."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.tmp")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, PRIVATE_MODE)
    try:
        with os.fdopen(fd, "wb") as fh:
            os.fchmod(fh.fileno(), PRIVATE_MODE)  # a leftover temporary file kept its mode
            fh.write(data)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
    os.replace(temporary, path)
