"""Run Alembic migrations programmatically (used at server start and by `batchd db upgrade |
current | check | downgrade`)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from alembic.util.exc import CommandError
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import create_async_engine
from sqlalchemy.pool import NullPool

from app.db.sqlite_file import make_sqlite_file_private


def _migrations_dir() -> Path:
    """The installed `batchd_migrations` package (a wheel's copy of migrations/, or an editable
    install's link to the checkout's), else the checkout's migrations/ beside app/ (run from a
    checkout that is not installed, e.g. on PYTHONPATH)."""
    try:
        return Path(str(resources.files("batchd_migrations")))
    except ModuleNotFoundError:
        return Path(__file__).resolve().parents[2] / "migrations"


MIGRATIONS_DIR = _migrations_dir()


def alembic_config(database_url: str) -> Config:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    config.attributes["database_url"] = database_url
    return config


def upgrade_sync(database_url: str, revision: str = "head") -> None:
    make_sqlite_file_private(database_url)  # before Alembic's first connection creates it
    command.upgrade(alembic_config(database_url), revision)


async def upgrade(database_url: str, revision: str = "head") -> None:
    # env.py drives an async engine with asyncio.run, which needs a thread without a loop.
    await asyncio.to_thread(upgrade_sync, database_url, revision)


def downgrade_sync(database_url: str, revision: str) -> None:
    """Downgrade to `revision` (an id, `-1`, `base`); env.py takes the same advisory lock as
    upgrade, so a replica starting meanwhile waits instead of migrating half-way back up."""
    command.downgrade(alembic_config(database_url), revision)


@dataclass(frozen=True)
class RevisionState:
    """Where a database stands against this batchd's migrations."""

    current: str | None  # None: no batchd schema yet
    head: str
    known: bool  # `current` is one of this batchd's revisions (False: e.g. a newer batchd's)

    @property
    def at_head(self) -> bool:
        return self.current == self.head

    def describe(self) -> str:
        if self.at_head:
            return f"{self.head} (head)"
        if self.current is None:
            return f"none (empty database; head is {self.head}: run `batchd db upgrade`)"
        if not self.known:
            return (
                f"{self.current} (unknown to this batchd, whose head is {self.head}: "
                "a newer batchd migrated it, or it is not a batchd database)"
            )
        return f"{self.current} (behind head {self.head}: run `batchd db upgrade`)"


def revision_state(database_url: str) -> RevisionState:
    script = ScriptDirectory.from_config(alembic_config(database_url))
    head = script.get_current_head()
    assert head is not None  # the migrations are one line of history
    heads = asyncio.run(_current_heads(database_url))
    current = ",".join(heads) or None
    try:
        known = all(script.get_revision(h) is not None for h in heads)
    except CommandError:
        known = False
    return RevisionState(current, head, known)


async def _current_heads(database_url: str) -> tuple[str, ...]:
    url = make_url(database_url)
    if url.get_backend_name() == "sqlite" and not Path(url.database or "").is_file():
        return ()  # reading would create an empty database file
    engine = create_async_engine(url, poolclass=NullPool)
    try:
        async with engine.connect() as connection:
            return await connection.run_sync(lambda sync: tuple(MigrationContext.configure(sync).get_current_heads()))
    finally:
        await engine.dispose()
