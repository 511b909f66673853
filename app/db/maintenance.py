"""Keeping the database's size bounded by what is in flight, not by what was ever run."""

from __future__ import annotations

import logging

from app.db.engine import Database

log = logging.getLogger("batchd.db")


async def reclaim_checkpoint_space(db: Database) -> None:
    """Make the space of deleted checkpoint rows reusable at once. Postgres only marks deleted
    rows dead; without VACUUM (autovacuum may be off, or run late) every batch's rows would add
    to the table for good. SQLite reuses freed pages by itself."""
    if db.is_sqlite:
        return
    try:
        async with db.write_engine.connect() as connection:
            connection = await connection.execution_options(isolation_level="AUTOCOMMIT")
            await connection.exec_driver_sql("VACUUM batch_lines")
    except Exception:  # noqa: BLE001 - the next finalize tries again
        log.warning("VACUUM of batch_lines failed", exc_info=True)
