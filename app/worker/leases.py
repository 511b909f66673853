"""Holding a lease (on a batch or a shard) while its holder works."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager, suppress

from app.db.repositories.batches import LeaseLost

log = logging.getLogger("batchd.worker")

Step = Callable[[], Awaitable[None]]


async def _keep_lease(renew: Step, interval: float, holder: asyncio.Task, what: str) -> None:
    """Renew every `interval` seconds; when the lease is lost, cancel the task that holds it."""
    while True:
        await asyncio.sleep(interval)
        try:
            await renew()
        except LeaseLost:
            log.warning("lost the lease on %s; another replica has it", what)
            holder.cancel()
            return
        except Exception:  # noqa: BLE001 - a busy database: try again next beat
            log.warning("lease heartbeat for %s failed", what, exc_info=True)


@asynccontextmanager
async def holding_lease(renew: Step, release: Step, interval: float, what: str) -> AsyncIterator[None]:
    """Renew the lease while the body runs; a write that finds it lost (LeaseLost) ends the body
    quietly. Afterwards the lease is released at once (best effort: it expires anyway), so
    another replica can take the work without waiting for expiry."""
    holder = asyncio.current_task()
    assert holder is not None, "holding_lease runs inside a task"
    heartbeat = asyncio.create_task(_keep_lease(renew, interval, holder, what))
    try:
        yield
    except LeaseLost:
        log.warning("lost the lease on %s; another replica has it", what)
    finally:
        heartbeat.cancel()
        with suppress(asyncio.CancelledError):
            await heartbeat
        with suppress(Exception):
            await release()
