"""What every command group shares: settings from the flags, the storage flags, a database at head."""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path

from pydantic import ValidationError

from app.core.config import Settings
from app.core.private_files import private_dir


def _settings(args: argparse.Namespace) -> Settings:
    overrides = {
        name: value
        for name in (
            "host",
            "port",
            "data_dir",
            "database_url",
            "storage_url",
            "models",
            "loras",
            "model_config_file",
            "max_resident_engines",
            "engine_memory_budget",
            "forwarded_allow_ips",
        )
        if (value := getattr(args, name, None)) is not None
    }
    for flag in ("no_models", "api_only", "allow_open_mode"):
        if getattr(args, flag, False):
            overrides[flag] = True
    try:
        return Settings(**overrides)
    except ValidationError as error:
        raise SystemExit(_settings_problems(error)) from None


def _settings_problems(error: ValidationError) -> str:
    """One line a refused setting, named as its variable: `batchd: BATCHD_S3_SSE: Input should be ...`."""
    lines = []
    for problem in error.errors():
        message = problem["msg"].removeprefix("Value error, ")
        where = "".join(f"BATCHD_{str(part).upper()}: " for part in problem["loc"][:1])
        lines.append(f"batchd: {where}{message}")
    return "\n".join(lines)


def _add_storage_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--data-dir", type=Path, help="SQLite file and blobs (env BATCHD_DATA_DIR)")
    parser.add_argument(
        "--database-url",
        help="e.g. postgresql+asyncpg://user@host/db (env BATCHD_DATABASE_URL; default SQLite)",
    )


async def _with_database(settings: Settings, work, *, migrate: bool = False):
    """Run `work(db)` against the settings' database. Only `serve` migrates it first (`migrate`);
    every other command refuses a database not at this batchd's head, in one line on stderr, so
    an admin command run with a newer or older release never moves (or trips over) production's
    revision mid-rollout."""
    from app.db.engine import Database
    from app.db.migrate import upgrade

    private_dir(settings.data_dir)
    url = settings.resolved_database_url()
    if migrate:
        await upgrade(url)
    else:
        refusal = await asyncio.to_thread(_not_at_head, url)
        if refusal is not None:
            print(f"batchd: error: {refusal}", file=sys.stderr)
            raise SystemExit(1)
    db = Database(url)
    try:
        return await work(db)
    finally:
        await db.dispose()


def _not_at_head(url: str) -> str | None:
    """Why a command other than `serve` or `db upgrade` must not use this database, or None."""
    from sqlalchemy.exc import SQLAlchemyError

    from app.db.migrate import revision_state

    try:
        state = revision_state(url)
    except (OSError, SQLAlchemyError) as error:
        return f"cannot read the database's revision: {getattr(error, 'orig', None) or error}"
    if state.at_head:
        return None
    if state.current is None:
        return f"the database has no batchd schema yet (head is {state.head}): run `batchd db upgrade` first"
    if not state.known:
        return (
            f"the database is newer than this batchd: its revision {state.current} is unknown to this "
            f"batchd (head {state.head}); use the batchd release that migrated it"
        )
    return (
        f"the database is at revision {state.current}, behind this batchd's head {state.head}: "
        "run `batchd db upgrade` first"
    )
