"""`batchd db current | check | downgrade` as an operator types them (in process: tests/support/cli.py),
on a fresh database of each kind."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

from alembic.script import ScriptDirectory
from sqlalchemy import text

from app.db.engine import Database
from app.db.migrate import alembic_config
from tests.support.cli import batchd


def _batchd(tmp_path, url: str | None, *args: str) -> SimpleNamespace:
    return batchd(tmp_path, url, "db", *args, check=False)


def _set_revision(url: str, revision: str) -> None:
    async def run() -> None:
        db = Database(url)
        try:
            async with db.write() as session:
                await session.execute(text("UPDATE alembic_version SET version_num = :r"), {"r": revision})
        finally:
            await db.dispose()

    asyncio.run(run())


def test_current_check_and_downgrade_report_and_move_the_revision(tmp_path, database_factory):
    url = database_factory()
    sqlite_url = f"sqlite+aiosqlite:///{tmp_path / 'batchd.db'}"
    script = ScriptDirectory.from_config(alembic_config(url or "sqlite://"))
    head = script.get_current_head()
    assert head is not None
    before_head = script.get_revision(head).down_revision

    # An empty database: not at head, and reading it creates no SQLite file.
    assert _batchd(tmp_path, url, "current").stdout.startswith("none (empty database")
    empty = _batchd(tmp_path, url, "check")
    assert empty.returncode == 1 and empty.stderr.startswith("database is not at head: none"), empty
    assert len(empty.stderr.splitlines()) == 1 and empty.stdout == ""
    assert not (tmp_path / "batchd.db").exists()

    assert _batchd(tmp_path, url, "upgrade").returncode == 0
    assert _batchd(tmp_path, url, "current").stdout == f"{head} (head)\n"
    at_head = _batchd(tmp_path, url, "check")
    assert (at_head.returncode, at_head.stdout) == (0, f"database is at head ({head})\n")

    # Downgrade needs a target, and says what it costs before it moves.
    untargeted = _batchd(tmp_path, url, "downgrade")
    assert untargeted.returncode == 2 and "REVISION" in untargeted.stderr
    assert _batchd(tmp_path, url, "check").returncode == 0
    bad = _batchd(tmp_path, url, "downgrade", "nosuchrev")
    assert bad.returncode == 2 and bad.stderr.splitlines()[-1].startswith("batchd db downgrade: error: ")
    down = _batchd(tmp_path, url, "downgrade", "-1")
    assert down.returncode == 0, down
    assert down.stderr.startswith("warning: downgrading to -1 drops what later migrations added")
    assert down.stdout.startswith(f"database is now at {before_head} (behind head {head}")
    behind = _batchd(tmp_path, url, "check")
    assert behind.returncode == 1 and behind.stderr.startswith(f"database is not at head: {before_head} (behind")

    # A revision this batchd does not know (a newer batchd's): reported, not at head.
    _set_revision(url or sqlite_url, "9999_future")
    ahead = _batchd(tmp_path, url, "check")
    assert ahead.returncode == 1 and ahead.stderr.startswith("database is not at head: 9999_future (unknown to this")
    _set_revision(url or sqlite_url, str(before_head))

    assert _batchd(tmp_path, url, "upgrade").returncode == 0
    assert _batchd(tmp_path, url, "check").returncode == 0


def test_check_says_in_one_line_when_the_database_cannot_be_read(tmp_path):
    """A readiness gate pointed at a database that is down gets exit 1 and the reason, no traceback."""
    for command in ("check", "current"):
        down = _batchd(tmp_path, "postgresql+asyncpg://postgres@127.0.0.1:1/batchd", command)
        assert down.returncode == 1 and down.stdout == "", down
        assert down.stderr.startswith(f"batchd db {command}: error: cannot read the database's revision: ")
        assert len(down.stderr.splitlines()) == 1
