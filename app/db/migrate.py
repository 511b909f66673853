"""Run Alembic migrations programmatically (used at server start and by `batchd db upgrade`)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from alembic import command
from alembic.config import Config

MIGRATIONS_DIR = Path(__file__).resolve().parents[2] / "migrations"


def alembic_config(database_url: str) -> Config:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    config.attributes["database_url"] = database_url
    return config


def upgrade_sync(database_url: str, revision: str = "head") -> None:
    command.upgrade(alembic_config(database_url), revision)


async def upgrade(database_url: str, revision: str = "head") -> None:
    # env.py drives an async engine with asyncio.run, which needs a thread without a loop.
    await asyncio.to_thread(upgrade_sync, database_url, revision)
