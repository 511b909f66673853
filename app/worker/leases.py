"""Keeping a lease alive while its holder works."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from app.db.repositories.batches import LeaseLost

log = logging.getLogger("batchd.worker")


async def keep_lease(renew: Callable[[], Awaitable[None]], interval: float, holder: asyncio.Task, what: str) -> None:
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
