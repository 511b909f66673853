"""SQL for files. Every read is scoped to a project (another project's id simply isn't found);
deleted files stay as tombstones until purged, so their ids still work as list cursors."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Sequence

from sqlalchemy import Select, delete, or_, select, update

from app.core.statuses import ACTIVE_BATCH_STATUSES
from app.db.base import rowcount
from app.db.models import Batch, File
from app.db.repositories.base import ProjectScopedRepository


class FileRepository(ProjectScopedRepository[File]):
    model = File

    def scoped(self, project: str | None) -> Select[File]:
        """The project's files that exist now: neither deleted nor expired."""
        return (
            super()
            .scoped(project)
            .where(File.deleted_at.is_(None), or_(File.expires_at.is_(None), File.expires_at > int(time.time())))
        )

    async def get_in_any_project(self, file_id: str) -> File | None:
        """A live file whatever its project (admins read every project's files)."""
        query = select(File).where(
            File.id == file_id,
            File.deleted_at.is_(None),
            or_(File.expires_at.is_(None), File.expires_at > int(time.time())),
        )
        return (await self.session.execute(query)).scalar_one_or_none()

    async def mark_deleted(self, file: File, now: int) -> None:
        await self.session.execute(
            update(File).where(File.seq == file.seq, File.deleted_at.is_(None)).values(deleted_at=now)
        )

    async def made_before(self, project: str, cutoff: int, limit: int) -> Sequence[File]:
        """The project's live files made at or before `cutoff`, oldest first, except the inputs
        of its batches still running (they are needed until the batch ends)."""
        running_inputs = select(Batch.input_file_id).where(
            Batch.project == project, Batch.status.in_(ACTIVE_BATCH_STATUSES)
        )
        result = await self.session.execute(
            self.scoped(project)
            .where(File.created_at <= cutoff, File.id.not_in(running_inputs))
            .order_by(File.seq)
            .limit(limit)
        )
        return result.scalars().all()

    async def take_expired(self, now: int, limit: int) -> Sequence[File]:
        """Expired files not yet swept, across projects, marked deleted in the same statement
        set; the caller removes their blobs after commit."""
        result = await self.session.execute(
            select(File)
            .where(File.deleted_at.is_(None), File.expires_at.is_not(None), File.expires_at <= now)
            .order_by(File.expires_at)
            .limit(limit)
        )
        files = result.scalars().all()
        if files:
            await self.session.execute(update(File).where(File.seq.in_([f.seq for f in files])).values(deleted_at=now))
        return files

    async def purge_tombstones(self, deleted_before: int) -> int:
        """Forget files deleted before `deleted_before` (their blobs went at delete time): a
        deleted id stays a valid list cursor only for the grace period."""
        result = await self.session.execute(
            delete(File).where(File.deleted_at.is_not(None), File.deleted_at < deleted_before)
        )
        return rowcount(result)

    async def live_ids(self) -> AsyncIterator[tuple[str, str]]:
        """(project, id) of every file not deleted, streamed: what the blob store may hold."""
        result = await self.session.stream(select(File.project, File.id).where(File.deleted_at.is_(None)))
        async for project, file_id in result:
            yield project, file_id
