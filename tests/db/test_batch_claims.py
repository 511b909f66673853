"""Batch steps (validate, finalize) are claimed by turns across projects, on both databases: a
project whose batches are being validated somewhere waits behind another project's, smallest
input file then oldest first among equals, and past the replica's limit only a project with no step running anywhere
is taken (so one team's ten large files do not hold another team's small batch back)."""

from __future__ import annotations

import asyncio

from app.core.statuses import BatchStatus
from app.db.engine import Database
from app.db.migrate import upgrade_sync
from app.db.models import Batch, File
from app.db.repositories.batches import BatchRepository

NOW = 1_800_000_000.0
LEASE = 30.0


def _batch(batch_id: str, project: str, seq_time: int) -> Batch:
    return Batch(
        id=batch_id,
        project=project,
        endpoint="/v1/chat/completions",
        input_file_id=f"file-{batch_id}",
        completion_window="24h",
        status=BatchStatus.VALIDATING,
        created_at=seq_time,
        expires_at=seq_time + 86_400,
    )


def _file(file_id: str, size: int) -> File:
    return File(
        id=file_id, project="p", filename="in.jsonl", purpose="batch", bytes=size, created_at=0, sha256="0" * 64
    )


async def _claim(db: Database, owner: str, idle_projects_only: bool = False) -> str | None:
    async with db.write() as session:
        claim = await BatchRepository(session).claim(owner, NOW, LEASE, [], idle_projects_only)
    return None if claim is None else claim.batch_id


async def _scenario(url: str) -> None:
    db = Database(url)
    try:
        async with db.write() as session:
            session.add_all([_batch(f"a{n}", "team-a", n) for n in range(10)])
        async with db.write() as session:
            session.add(_batch("b0", "team-b", 100))
        # The oldest goes first while no project has a step running.
        assert await _claim(db, "replica-1") == "a0"
        # team-a has a step running: team-b's younger batch goes before team-a's older ones.
        assert await _claim(db, "replica-0") == "b0"
        # Both have one running: oldest first again.
        assert await _claim(db, "replica-0") == "a1"
        # Past the limit, only a project with nothing running anywhere: none left.
        assert await _claim(db, "replica-0", idle_projects_only=True) is None
        async with db.write() as session:
            session.add(_batch("c0", "team-c", 200))
        assert await _claim(db, "replica-0", idle_projects_only=True) == "c0"
        # Among projects with nothing running, the smallest input goes first, whatever its age.
        async with db.write() as session:
            session.add_all([_batch("d0", "team-d", 300), _batch("e0", "team-e", 301)])
            session.add_all([_file("file-d0", 50_000_000), _file("file-e0", 6_000)])
        assert await _claim(db, "replica-0", idle_projects_only=True) == "e0"
        # A small input goes first even from a project with steps running, and past the limit.
        async with db.write() as session:
            session.add_all([_batch("f0", "team-f", 400), _batch("a-small", "team-a", 401)])
            session.add_all([_file("file-f0", 40_000_000), _file("file-a-small", 9_000)])
        assert await _claim(db, "replica-0", idle_projects_only=True) == "a-small"
        # Among small inputs the smallest goes first, even from a project with steps running: a
        # team's 60-line batch does not wait for its own 2,000-line one to be validated.
        async with db.write() as session:
            session.add_all([_batch("g0", "team-g", 500), _batch("a-tiny", "team-a", 501)])
            session.add_all([_file("file-g0", 500_000), _file("file-a-tiny", 3_000)])
        assert await _claim(db, "replica-0") == "a-tiny"
    finally:
        await db.dispose()


def test_batch_steps_take_turns_across_projects(database_factory, tmp_path):
    url = database_factory() or f"sqlite+aiosqlite:///{tmp_path / 'batchd.db'}"
    upgrade_sync(url)
    asyncio.run(_scenario(url))
