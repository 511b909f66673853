"""The sweeper (app/background/sweeper.py) runs each sweep on its own: one that fails does not
keep the retention, tombstone and idempotency-key sweeps from running (issue #54)."""

from __future__ import annotations

import asyncio
import contextlib
import time

from app.background import sweeper
from app.core.config import Settings
from app.db.engine import Database
from app.db.models import File, IdempotencyKey
from app.storage.local import LocalBlobStore
from tests.background.support import add_file, ids
from tests.support.database import run_on_database
from tests.worker.support import PROJECT

GRACE = 7 * 86_400


def test_one_failing_sweep_does_not_skip_the_others(db_url, tmp_path, monkeypatch, caplog):
    ran: list[str] = []

    async def broken(*_args) -> int:
        ran.append("expired files")
        raise RuntimeError("the store refused a delete")

    real_retention = sweeper.sweep_retention

    async def retention(*args) -> int:
        ran.append("retention")
        return await real_retention(*args)

    monkeypatch.setattr(sweeper, "sweep_expired_files", broken)  # the first sweep of every pass
    monkeypatch.setattr(sweeper, "sweep_retention", retention)
    settings = Settings(data_dir=tmp_path, sweep_interval=0.01)

    async def scenario(db: Database) -> None:
        store, now = LocalBlobStore(tmp_path / "blobs"), int(time.time())
        await add_file(db, store, "file-tombstone", deleted_at=now - GRACE - 60)
        async with db.write() as session:
            session.add(IdempotencyKey(project=PROJECT, key="old", created_at=now - 2 * 86_400))
        sweeping = asyncio.create_task(sweeper.sweep_forever(db, store, settings))
        try:
            for _ in range(500):
                if not await ids(db, File.id) and not await ids(db, IdempotencyKey.key):
                    break
                await asyncio.sleep(0.01)
        finally:
            sweeping.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await sweeping
        assert await ids(db, File.id) == set()  # the tombstone purge ran
        assert await ids(db, IdempotencyKey.key) == set()  # ... and the idempotency-key sweep
        assert "retention" in ran and "expired files" in ran

    run_on_database(db_url, scenario)
    assert "the expired files sweep failed" in caplog.text
