"""The enqueued-token check on the real backends: per model, and atomic. Two batches of one
project checked at once against a limit that fits one of them: the second to check waits for
the first's transaction and fails `token_limit_exceeded` (a plain read-then-write let both pass
on Postgres, whose transactions do not see each other's uncommitted counts)."""

from __future__ import annotations

import asyncio

from app.db.engine import Database
from app.db.migrate import upgrade
from app.db.models import Batch
from app.domains.limits.enqueued_tokens_repository import EnqueuedTokenRepository
from app.domains.limits.token_limits import ProjectLimits, enqueue_tokens

LIMIT = 100


def _batch(batch_id: str, project: str = "p") -> Batch:
    return Batch(
        id=batch_id,
        project=project,
        endpoint="/v1/messages",
        input_file_id=f"file-{batch_id}",
        completion_window="24h",
        status="validating",
        created_at=0,
        expires_at=2**40,
    )


async def _enqueue(db: Database, batch_id: str, tokens: dict[str, int], project: str = "p") -> dict | None:
    async with db.write() as session:
        return await enqueue_tokens(session, batch_id, project, tokens, ProjectLimits(LIMIT))


async def _scenario(url: str) -> None:
    await upgrade(url)
    db = Database(url)
    try:
        async with db.write() as session:
            session.add_all(_batch(name) for name in ("first", "second", "third", "fourth"))
            session.add(_batch("elsewhere", project="q"))

        # Two checks at once: the first holds its transaction open while the second runs.
        async with db.write() as session:
            assert await enqueue_tokens(session, "first", "p", {"m": 60}, ProjectLimits(LIMIT)) is None
            second = asyncio.create_task(_enqueue(db, "second", {"m": 60}))
            # Long enough for an unguarded check to read, pass and commit; a guarded one waits.
            await asyncio.wait({second}, timeout=1.0)
        refused = await second
        assert refused is not None and refused["code"] == "token_limit_exceeded"
        assert refused["message"].startswith("Enqueued token limit reached for m in project p. Limit: 100")

        # Per model: another model has its own room, and any model over its limit refuses the batch.
        assert await _enqueue(db, "third", {"m": 40, "n": 100}) is None
        over = await _enqueue(db, "fourth", {"m": 0, "n": 1})
        assert over is not None and "for n in project p" in over["message"]
        # Another project's room is its own; a batch validated again (taken over) replaces its counts.
        assert await _enqueue(db, "elsewhere", {"m": 100}, project="q") is None
        assert await _enqueue(db, "elsewhere", {"m": 100}, project="q") is None

        async with db.read() as session:
            repo = EnqueuedTokenRepository(session)
            assert await repo.enqueued("p", ["m", "n", "o"], other_than="") == {"m": 100, "n": 100, "o": 0}
            assert await repo.enqueued("q", ["m"], other_than="") == {"m": 100}
    finally:
        await db.dispose()


def test_concurrent_checks_admit_only_what_fits(database_factory, tmp_path):
    url = database_factory() or f"sqlite+aiosqlite:///{tmp_path / 'batchd.db'}"
    asyncio.run(_scenario(url))
