"""Keeping the database's size bounded by what is in flight or kept, not by what was ever run."""

from __future__ import annotations

import logging
import time
import weakref

from app.db.engine import Database

log = logging.getLogger("batchd.db")

# At most one VACUUM of batch_chunks per process this often: the sweep that deletes the chunks
# of expired results runs every sweep interval, and VACUUMs would otherwise queue behind each other.
RECLAIM_INTERVAL_SECONDS = 10.0
# No TRUNCATE: giving the file's tail back to the OS takes an ACCESS EXCLUSIVE lock, and while
# it waits for one every checkpoint insert waits behind it (the load test stalled the worker
# for good that way). The freed space is reused by later batches, which is what bounds the size.
# SKIP_LOCKED: another replica's VACUUM of the table is doing the work already.
VACUUM_SQL = "VACUUM (SKIP_LOCKED, TRUNCATE FALSE) batch_chunks"

_last_reclaim: weakref.WeakKeyDictionary[Database, float] = weakref.WeakKeyDictionary()


async def reclaim_checkpoint_space(db: Database) -> None:
    """Make the space of deleted checkpoint chunk rows reusable. Postgres only marks deleted rows
    dead; without VACUUM (autovacuum may be off, or run late) every batch's rows would add to
    the table for good. SQLite reuses freed pages by itself."""
    if db.is_sqlite:
        return
    now = time.monotonic()
    if now - _last_reclaim.get(db, float("-inf")) < RECLAIM_INTERVAL_SECONDS:
        return
    _last_reclaim[db] = now
    try:
        async with db.write_engine.connect() as connection:
            connection = await connection.execution_options(isolation_level="AUTOCOMMIT")
            await connection.exec_driver_sql(VACUUM_SQL)
    except Exception:  # noqa: BLE001 - a later finalize tries again
        log.warning("VACUUM of batch_chunks failed", exc_info=True)
