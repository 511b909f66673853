"""Every migration downgrades cleanly, on both databases: walking the history down one step at a
time gives back, at each revision, the schema its upgrade made, down to an empty database; then
it upgrades to head again. A migration added later (e.g. by another change) is walked too."""

from __future__ import annotations

import asyncio

from alembic.script import ScriptDirectory
from sqlalchemy import inspect
from sqlalchemy.ext.asyncio import create_async_engine
from sqlalchemy.pool import NullPool

from app.db.migrate import alembic_config, downgrade_sync, revision_state, upgrade_sync


def _schema(url: str) -> dict:
    """Tables with their columns, indexes and constraints, as the database reports them."""

    def read(connection) -> dict:
        inspector = inspect(connection)
        return {
            table: {
                "columns": [(c["name"], str(c["type"]), c["nullable"]) for c in inspector.get_columns(table)],
                "indexes": sorted(
                    (i["name"], tuple(i["column_names"]), i["unique"]) for i in inspector.get_indexes(table)
                ),
                "unique": sorted(
                    (u["name"] or "", tuple(u["column_names"])) for u in inspector.get_unique_constraints(table)
                ),
                "foreign_keys": sorted(
                    (tuple(f["constrained_columns"]), f["referred_table"], tuple(f["referred_columns"]))
                    for f in inspector.get_foreign_keys(table)
                ),
                "checks": sorted(c["sqltext"] for c in inspector.get_check_constraints(table)),
                "primary_key": tuple(inspector.get_pk_constraint(table)["constrained_columns"]),
            }
            for table in sorted(inspector.get_table_names())
            if table != "alembic_version"
        }

    async def run() -> dict:
        engine = create_async_engine(url, poolclass=NullPool)
        try:
            async with engine.connect() as connection:
                return await connection.run_sync(read)
        finally:
            await engine.dispose()

    return asyncio.run(run())


def test_every_migration_downgrades_to_the_schema_before_it_and_back(database_factory, tmp_path):
    url = database_factory() or f"sqlite+aiosqlite:///{tmp_path / 'batchd.db'}"
    script = ScriptDirectory.from_config(alembic_config(url))
    revisions = [r.revision for r in reversed(list(script.walk_revisions()))]  # base first
    assert len(revisions) >= 18

    schemas: dict[str | None, dict] = {None: {}}
    for revision in revisions:
        upgrade_sync(url, revision)
        schemas[revision] = _schema(url)
    assert revision_state(url).at_head

    below = [None, *revisions[:-1]]
    for revision, previous in zip(reversed(revisions), reversed(below), strict=True):
        downgrade_sync(url, "-1")
        assert revision_state(url).current == previous
        assert _schema(url) == schemas[previous], f"downgrading {revision} did not restore {previous}'s schema"
    assert _schema(url) == {}

    upgrade_sync(url)
    assert _schema(url) == schemas[revisions[-1]]
