"""A migrated database (SQLite or Postgres, by the `backend` parameter), emptied before each
scenario, for tests of code that takes a `Database` (the worker, the background jobs) without a
server."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path

from app.db.base import Base
from app.db.engine import Database
from app.db.migrate import upgrade_sync

Scenario = Callable[[Database], Awaitable[None]]


def migrated_database(database_factory, tmp_path: Path) -> str:
    """The URL of a database of the backend's kind, migrated to head."""
    url = database_factory() or f"sqlite+aiosqlite:///{tmp_path / 'batchd.db'}"
    upgrade_sync(url)
    return url


def run_on_database(url: str, scenario: Scenario) -> None:
    """Run `scenario` against the database at `url`, emptied first (it is migrated once and
    shared by a package's tests: migrating takes longer than the tests)."""

    async def main() -> None:
        db = Database(url)
        try:
            async with db.write() as session:
                for table in reversed(Base.metadata.sorted_tables):
                    await session.execute(table.delete())
            await scenario(db)
        finally:
            await db.dispose()

    asyncio.run(main())
