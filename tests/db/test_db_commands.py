"""`batchd db current | check | downgrade` as an operator types them (in process: tests/support/cli.py),
on a fresh database of each kind."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest
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


def _revision(tmp_path, url: str | None) -> str:
    return _batchd(tmp_path, url, "current").stdout


@pytest.mark.parametrize("backend", ["sqlite", "postgres"], indirect=True)
def test_admin_commands_refuse_a_database_not_at_head_and_leave_its_revision(tmp_path, database_factory):
    """Only `serve` and `db upgrade` migrate: `keys` and `projects` run by another release than
    the database's refuse in one line on stderr, naming what to do, and move nothing."""
    url = database_factory()
    sqlite_url = f"sqlite+aiosqlite:///{tmp_path / 'batchd.db'}"

    def refused(*command: str) -> str:
        done = batchd(tmp_path, url, *command, check=False)
        assert done.returncode == 1 and done.stdout == "", done
        assert len(done.stderr.splitlines()) == 1, done.stderr
        return done.stderr

    # An empty database stays empty (no SQLite file made).
    for command in (("keys", "list"), ("keys", "create", "--admin"), ("projects", "list")):
        assert "run `batchd db upgrade`" in refused(*command)
    assert not (tmp_path / "batchd.db").exists()

    assert _batchd(tmp_path, url, "upgrade").returncode == 0
    assert _batchd(tmp_path, url, "downgrade", "-1").returncode == 0
    behind = _revision(tmp_path, url)
    assert "(behind head" in behind
    for command in (("keys", "list"), ("projects", "set", "team-a", "--weight", "2")):
        line = refused(*command)
        assert "behind this batchd's head" in line and "run `batchd db upgrade`" in line, line
    assert _revision(tmp_path, url) == behind

    _set_revision(url or sqlite_url, "9999_future")
    line = refused("keys", "list")
    assert "the database is newer than this batchd" in line and "9999_future" in line, line
    assert _revision(tmp_path, url).startswith("9999_future (unknown to this batchd")

    _set_revision(url or sqlite_url, behind.split()[0])
    assert _batchd(tmp_path, url, "upgrade").returncode == 0
    assert batchd(tmp_path, url, "keys", "list").stdout == ""
