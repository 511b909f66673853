"""The SQLite database file made owner-only before anything opens it: SQLite gives the file it
creates the umask's mode (0644 by default), and its -wal and -shm files copy the database's."""

from __future__ import annotations

import os
from pathlib import Path

from sqlalchemy.engine import make_url

from app.core.private_files import PRIVATE_FILE_MODE, create_private_file, tighten

COMPANIONS = ("", "-wal", "-shm", "-journal")


def sqlite_path(database_url: str) -> Path | None:
    """The file a SQLite URL names (None for another database or an in-memory one)."""
    url = make_url(database_url)
    if url.get_backend_name() != "sqlite" or url.database in (None, "", ":memory:"):
        return None
    return Path(url.database)


def make_sqlite_file_private(database_url: str) -> None:
    """Create the database file 0600 if it is not there yet (an empty file is an empty database),
    and tighten an existing one and its companions."""
    path = sqlite_path(database_url)
    if path is None:
        return
    try:
        os.close(create_private_file(path))
    except FileExistsError:
        pass
    for suffix in COMPANIONS:
        tighten(path.with_name(path.name + suffix), PRIVATE_FILE_MODE)
