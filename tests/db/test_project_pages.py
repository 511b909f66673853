"""Cursor pages of the project-scoped repository base (app/db/repositories/base.py), on both
databases: `after` is exclusive in either order, `has_more` is exact at the boundary, a hidden
(deleted) row still works as a cursor, and another project's id is no cursor at all."""

from __future__ import annotations

import asyncio

import pytest

from app.db.engine import Database
from app.db.migrate import upgrade
from app.db.models import File
from app.db.repositories.base import UnknownCursor
from app.db.repositories.files import FileRepository


def _file(file_id: str, project: str = "p") -> File:
    return File(
        id=file_id,
        project=project,
        filename=f"{file_id}.jsonl",
        purpose="batch",
        bytes=1,
        created_at=0,
        status="processed",
        sha256="0" * 64,
    )


async def _scenario(url: str) -> None:
    await upgrade(url)
    db = Database(url)
    try:
        async with db.write() as session:
            repo = FileRepository(session)
            for file_id in ("f1", "f2", "f3", "f4", "f5"):
                await repo.add(_file(file_id))
            await repo.add(_file("other", project="q"))
            await repo.mark_deleted(await repo.get("p", "f3"), 1)

        async with db.read() as session:
            repo = FileRepository(session)

            async def ids(**kwargs) -> tuple[list[str], bool]:
                page = await repo.page("p", **kwargs)
                return [f.id for f in page.items], page.has_more

            assert await ids(after=None, limit=2) == (["f5", "f4"], True)
            assert await ids(after="f4", limit=2) == (["f2", "f1"], False)  # f3 is deleted
            assert await ids(after="f2", limit=2) == (["f1"], False)
            assert await ids(after="f1", limit=2) == ([], False)
            assert await ids(after=None, limit=2, descending=False) == (["f1", "f2"], True)
            assert await ids(after="f2", limit=2, descending=False) == (["f4", "f5"], False)
            # The deleted f3 keeps its place as a cursor, in both orders.
            assert await ids(after="f3", limit=10) == (["f2", "f1"], False)
            assert await ids(after="f3", limit=10, descending=False) == (["f4", "f5"], False)
            assert await ids(after=None, limit=10, where=[File.id.in_(["f1", "f5"])]) == (["f5", "f1"], False)
            assert await repo.get("p", "f3") is None
            assert await repo.get("p", "other") is None
            for cursor in ("other", "file-missing"):
                with pytest.raises(UnknownCursor):
                    await repo.page("p", after=cursor, limit=2)
    finally:
        await db.dispose()


def test_pages_after_a_cursor(database_factory, tmp_path):
    url = database_factory() or f"sqlite+aiosqlite:///{tmp_path / 'batchd.db'}"
    asyncio.run(_scenario(url))
