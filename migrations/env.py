"""Alembic environment: async engine, batch mode for SQLite's limited ALTER TABLE."""

import asyncio

from alembic import context
from sqlalchemy import text
from sqlalchemy.ext.asyncio import create_async_engine
from sqlalchemy.pool import NullPool

import app.db.models  # noqa: F401  (registers the tables)
from app.db.base import Base

config = context.config
# Replicas starting together would race to create the same tables: on Postgres each takes this
# transaction-scoped advisory lock first, so one migrates and the others then find nothing to do.
MIGRATION_LOCK_KEY = 0x62617463  # "batc"
target_metadata = Base.metadata


def _database_url() -> str:
    return config.attributes.get("database_url") or config.get_main_option("sqlalchemy.url")


def _run(connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        render_as_batch=connection.dialect.name == "sqlite",
        compare_type=True,
    )
    with context.begin_transaction():
        context.run_migrations()


async def _run_online() -> None:
    engine = create_async_engine(_database_url(), poolclass=NullPool)
    async with engine.connect() as connection:
        if connection.dialect.name == "postgresql":
            await connection.execute(text(f"SELECT pg_advisory_xact_lock({MIGRATION_LOCK_KEY})"))
        await connection.run_sync(_run)
        await connection.commit()
    await engine.dispose()


if context.is_offline_mode():
    context.configure(url=_database_url(), target_metadata=target_metadata, literal_binds=True)
    with context.begin_transaction():
        context.run_migrations()
else:
    asyncio.run(_run_online())
