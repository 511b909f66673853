"""Models published by replicas with engines, as an --api-only replica lists them (real backends):
one entry per model with the readiest state and the loads added up; a replica that stopped
publishing drops out; a replica that shuts down withdraws its models at once."""

from __future__ import annotations

import asyncio
import time
from contextlib import suppress

from app.background.model_publisher import publish_models_forever
from app.db.engine import Database
from app.db.migrate import upgrade
from app.db.repositories.served_models import ServedModelRepository
from app.domains.models import service as models
from app.domains.models.service import published_entries


def _entry(model: str, state: str, in_flight: int, created: int = 100) -> dict:
    return {
        "id": model,
        "object": "model",
        "created": created,
        "owned_by": "batchd",
        "engine_state": state,
        "lines_in_flight": in_flight,
        "lines_waiting": 2 * in_flight,
        "max_lines_in_flight": 64,
        "loaded": state == "ready",
    }


async def _publish(db: Database, replica: str, entries: list[dict], at: float) -> None:
    async with db.write() as session:
        await ServedModelRepository(session).replace(replica, entries, at)


async def _scenario(url: str) -> None:
    await upgrade(url)
    db = Database(url)
    try:
        now = time.time()
        await _publish(db, "replica-a", [_entry("chat", "dead", 3, created=200), _entry("embed", "ready", 1)], now)
        await _publish(db, "replica-b", [_entry("chat", "ready", 5, created=150)], now)
        await _publish(db, "replica-gone", [_entry("old-model", "ready", 9)], now - models.STALE_AFTER_SECONDS - 1)
        assert await published_entries(db) == [
            {**_entry("chat", "ready", 8, created=150), "max_lines_in_flight": 128},
            _entry("embed", "ready", 1),
        ]
        # Republishing replaces: replica-a no longer serves chat, and has no engine loaded for embed.
        await _publish(db, "replica-a", [_entry("embed", "unloaded", 0)], now)
        assert [(e["id"], e["engine_state"], e["loaded"]) for e in await published_entries(db)] == [
            ("chat", "ready", True),
            ("embed", "unloaded", False),
        ]

        # The publishing loop: its first round prunes the stale replica's row, cancelling it withdraws.
        task = asyncio.create_task(publish_models_forever(db, "replica-c", lambda: [_entry("c-model", "ready", 1)]))
        for _ in range(100):
            if any(e["id"] == "c-model" for e in await published_entries(db)):
                break
            await asyncio.sleep(0.05)
        async with db.read() as session:
            replicas = {row.replica for row in await ServedModelRepository(session).published_since(0)}
        assert replicas == {"replica-a", "replica-b", "replica-c"}
        task.cancel()
        with suppress(asyncio.CancelledError):
            await task
        assert [e["id"] for e in await published_entries(db)] == ["chat", "embed"]
    finally:
        await db.dispose()


def test_published_models_merge_expire_and_withdraw(database_factory, tmp_path):
    url = database_factory() or f"sqlite+aiosqlite:///{tmp_path / 'batchd.db'}"
    asyncio.run(_scenario(url))
