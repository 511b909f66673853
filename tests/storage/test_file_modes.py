"""Data at rest on disk: a server started with a permissive umask keeps its data dir and blob
directories 0700, and its SQLite database (with its -wal and -shm files), its secret.key and every
blob 0600, checked with os.stat after real writes; a data dir left readable by an older release is
tightened when the server starts."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from tests.support.app_server import AppServer

KEY = "key-modes"


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture
def open_umask():
    """The loosest umask: every mode below is batchd's own, not the umask's."""
    previous = os.umask(0)
    yield
    os.umask(previous)


def _upload_and_read(data_dir: Path) -> str:
    # serve's own database URL, named: the app makes the data dir and database itself (an
    # AppServer's default is a copy of a migrated one, in a data dir made beforehand).
    database_url = f"sqlite+aiosqlite:///{(data_dir / 'batchd.db').resolve()}"
    env = {"BATCHD_API_KEYS": f"{KEY}=proj-modes", "BATCHD_SWEEP_INTERVAL": "3600"}
    with AppServer(data_dir, database_url, env) as app:
        created = app.http.post(
            "/v1/files",
            headers=app.as_key(KEY),
            files={"file": ("notes.txt", b"private bytes")},
            data={"purpose": "user_data"},
        )
        assert created.status_code == 200, created.text
        file_id = created.json()["id"]
        content = app.http.get(f"/v1/files/{file_id}/content", headers=app.as_key(KEY))
        assert content.content == b"private bytes"
        # While the server runs: the WAL and shared-memory files exist now.
        names = ("batchd.db", "batchd.db-wal", "batchd.db-shm")
        assert {name: _mode(data_dir / name) for name in names} == dict.fromkeys(names, 0o600)
    return file_id


def test_a_new_data_dir_database_and_blobs_are_owner_only(tmp_path, open_umask):
    data_dir = tmp_path / "fresh" / "data"  # its parent is made too
    _upload_and_read(data_dir)

    assert _mode(data_dir) == 0o700
    assert _mode(data_dir.parent) == 0o700
    blobs = [path for path in (data_dir / "blobs").rglob("*") if path.is_file()]
    assert len(blobs) == 1
    assert _mode(blobs[0]) == 0o600
    directories = [data_dir / "blobs", *(path for path in (data_dir / "blobs").rglob("*") if path.is_dir())]
    assert {str(d.relative_to(data_dir)): _mode(d) for d in directories} == {
        str(d.relative_to(data_dir)): 0o700 for d in directories
    }
    assert _mode(data_dir / "batchd.db") == 0o600
    assert _mode(data_dir / "secret.key") == 0o600


def test_an_existing_readable_data_dir_is_tightened_at_start(tmp_path, open_umask):
    data_dir = tmp_path / "data"
    _upload_and_read(data_dir)
    # As an older release left them: readable by every local user.
    for path in (data_dir, data_dir / "blobs", data_dir / "blobs" / "files"):
        path.chmod(0o755)
    for path in (data_dir / "batchd.db", data_dir / "secret.key"):
        path.chmod(0o644)

    _upload_and_read(data_dir)

    assert [_mode(p) for p in (data_dir, data_dir / "blobs", data_dir / "blobs" / "files")] == [0o700] * 3
    assert [_mode(data_dir / name) for name in ("batchd.db", "secret.key")] == [0o600] * 2
