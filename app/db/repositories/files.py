"""SQL for files. Every read is scoped to a project (another project's id simply isn't found)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence

from sqlalchemy import Select, delete, or_, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from app.db.models import File


class FileRepository:
    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    def _visible(self, project: str, now: int) -> Select[tuple[File]]:
        return select(File).where(
            File.project == project,
            File.deleted_at.is_(None),
            or_(File.expires_at.is_(None), File.expires_at > now),
        )

    async def add(self, file: File) -> File:
        self.session.add(file)
        await self.session.flush()
        return file

    async def get(self, project: str, file_id: str, now: int) -> File | None:
        result = await self.session.execute(self._visible(project, now).where(File.id == file_id))
        return result.scalar_one_or_none()

    async def cursor_seq(self, project: str, file_id: str) -> int | None:
        """Position of a cursor id, deleted or expired ones included, so pagination survives
        deletes made while iterating."""
        result = await self.session.execute(select(File.seq).where(File.project == project, File.id == file_id))
        return result.scalar_one_or_none()

    async def list(
        self,
        project: str,
        now: int,
        *,
        purpose: str | None,
        after_seq: int | None,
        descending: bool,
        limit: int,
    ) -> Sequence[File]:
        statement = self._visible(project, now)
        if purpose is not None:
            statement = statement.where(File.purpose == purpose)
        if after_seq is not None:
            statement = statement.where(File.seq < after_seq if descending else File.seq > after_seq)
        statement = statement.order_by(File.seq.desc() if descending else File.seq.asc()).limit(limit)
        return (await self.session.execute(statement)).scalars().all()

    async def mark_deleted(self, file: File, now: int) -> None:
        await self.session.execute(
            update(File).where(File.seq == file.seq, File.deleted_at.is_(None)).values(deleted_at=now)
        )

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
        return result.rowcount

    async def live_ids(self) -> AsyncIterator[tuple[str, str]]:
        """(project, id) of every file not deleted, streamed: what the blob store may hold."""
        result = await self.session.stream(select(File.project, File.id).where(File.deleted_at.is_(None)))
        async for project, file_id in result:
            yield project, file_id
