"""Owner-only modes for what batchd keeps on disk: the data dir, the SQLite database and the blobs
hold every team's files and the webhook signing secrets, so no other local user may read them.
Modes are set with chmod, whatever the process umask."""

from __future__ import annotations

import logging
import os
import stat
from pathlib import Path

PRIVATE_DIR_MODE = 0o700
PRIVATE_FILE_MODE = 0o600

log = logging.getLogger("batchd")


def private_dir(path: Path) -> None:
    """Create `path` with any missing parents, each owner-only, and tighten it if it was there."""
    missing: list[Path] = []
    for level in (path, *path.parents):
        if level.is_dir():
            break
        missing.append(level)
    for level in reversed(missing):
        try:
            level.mkdir(mode=PRIVATE_DIR_MODE)
        except FileExistsError:  # another process made it meanwhile
            pass
    tighten(path, PRIVATE_DIR_MODE)
    for level in missing[1:]:
        tighten(level, PRIVATE_DIR_MODE)


def create_private_file(path: Path) -> int:
    """Open a new file for writing, owner-only from its first byte; returns the descriptor."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, PRIVATE_FILE_MODE)
    os.fchmod(fd, PRIVATE_FILE_MODE)
    return fd


def tighten(path: Path, mode: int) -> None:
    """Give an existing path `mode` if batchd's user owns it; one it does not own (a volume mounted
    by root, say) is left as it is, with a warning."""
    try:
        info = path.stat()
    except FileNotFoundError:
        return
    if stat.S_IMODE(info.st_mode) == mode:
        return
    if info.st_uid != os.geteuid():
        log.warning(
            "%s is mode %o and not ours to change: other local users may read it", path, stat.S_IMODE(info.st_mode)
        )
        return
    path.chmod(mode)
