"""Each replica with engines publishes the models it serves to the database, so that replicas
started with --api-only (no engines) can list them."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any

from app.db.engine import Database
from app.db.repositories.served_models import ServedModelRepository
from app.domains.models.service import PUBLISH_SECONDS, STALE_AFTER_SECONDS

log = logging.getLogger("batchd.models")


async def publish_models_forever(db: Database, replica: str, entries: Callable[[], list[dict[str, Any]]]) -> None:
    """Every PUBLISH_SECONDS, replace this replica's rows with `entries()` and drop the rows of
    replicas that stopped publishing; on cancel (shutdown), withdraw this replica's rows."""
    try:
        while True:
            try:
                now = time.time()
                async with db.write() as session:
                    repo = ServedModelRepository(session)
                    await repo.replace(replica, entries(), now)
                    await repo.remove_older_than(now - STALE_AFTER_SECONDS)
            except Exception as exc:  # the database may be down: the rows age out meanwhile
                log.warning("could not publish the served models (%s); will retry", exc)
            await asyncio.sleep(PUBLISH_SECONDS)
    finally:
        try:
            # Bounded: a database that is down must not hold up the shutdown.
            await asyncio.wait_for(_withdraw(db, replica), timeout=PUBLISH_SECONDS)
        except Exception as exc:
            log.warning("could not withdraw the served models at shutdown (%s)", exc)


async def _withdraw(db: Database, replica: str) -> None:
    async with db.write() as session:
        await ServedModelRepository(session).remove(replica)
