"""BATCHD_DATABASE_POOL_SIZE caps the Postgres connections a replica holds (PgBouncer's session
pool or max_connections shared by the replicas)."""

from __future__ import annotations

import asyncio

import pytest
from starlette.testclient import TestClient

from app.api.runtime import runtime_of
from app.core.config import Settings
from app.db.engine import Database
from app.http.app import create_app

pytestmark = pytest.mark.parametrize("backend", ["postgres"], indirect=True)


def test_a_replica_holds_no_more_connections_than_its_pool_size(database_factory):
    url = database_factory()

    async def run() -> None:
        db = Database(url, postgres_pool=2)
        try:
            held = [await db.write_engine.connect() for _ in range(2)]
            with pytest.raises(TimeoutError):  # the third waits for one of the two, never a third
                await asyncio.wait_for(db.write_engine.connect(), 1.0)
            assert db.write_engine.pool.checkedout() == 2  # type: ignore[attr-defined]
            for connection in held:
                await connection.close()
        finally:
            await db.dispose()

    asyncio.run(run())


def test_the_setting_sizes_the_servers_pool(tmp_path, database_factory, monkeypatch):
    monkeypatch.setenv("BATCHD_DATABASE_POOL_SIZE", "3")
    settings = Settings(data_dir=tmp_path, database_url=database_factory(), no_models=True)
    assert settings.database_pool_size == 3
    with TestClient(create_app(settings), base_url="http://127.0.0.1:8000") as client:
        pool = runtime_of(client.app).db.write_engine.pool  # type: ignore[arg-type]
        # Three kept open when idle, none beyond (QueuePool keeps its overflow cap private).
        assert (pool.size(), pool._max_overflow) == (3, 0)  # type: ignore[attr-defined]
    assert Settings().database_pool_size == 3
    monkeypatch.delenv("BATCHD_DATABASE_POOL_SIZE")
    assert Settings().database_pool_size == 20
