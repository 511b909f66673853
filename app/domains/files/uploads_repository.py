"""SQL for uploads and their parts. Reads are scoped to a project; status changes are guarded
`UPDATE ... WHERE status = 'pending'` so a racing complete/cancel/expiry cannot both win."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence

from sqlalchemy import delete, func, select, update

from app.core.statuses import UploadStatus
from app.db.base import rowcount
from app.db.models import Upload, UploadPart
from app.db.repositories.base import ProjectScopedRepository


class UploadRepository(ProjectScopedRepository[Upload]):
    model = Upload

    async def add_part(self, part: UploadPart) -> None:
        self.session.add(part)
        await self.session.flush()

    async def get(self, project: str, upload_id: str, *, for_update: bool = False) -> Upload | None:
        statement = self.scoped(project).where(Upload.id == upload_id)
        if for_update:
            # Postgres: a part insert and a completion of the same upload serialize here.
            statement = statement.with_for_update()
        return (await self.session.execute(statement)).scalar_one_or_none()

    async def parts_bytes(self, upload_id: str) -> int:
        result = await self.session.execute(
            select(func.coalesce(func.sum(UploadPart.bytes), 0)).where(UploadPart.upload_id == upload_id)
        )
        return int(result.scalar_one())

    async def parts(self, upload_id: str, part_ids: Sequence[str]) -> dict[str, UploadPart]:
        result = await self.session.execute(
            select(UploadPart).where(UploadPart.upload_id == upload_id, UploadPart.id.in_(list(part_ids)))
        )
        return {part.id: part for part in result.scalars()}

    async def finish(self, upload: Upload, status: UploadStatus, file_id: str | None = None) -> bool:
        """pending -> `status`; False if the upload was no longer pending."""
        result = await self.session.execute(
            update(Upload)
            .where(Upload.seq == upload.seq, Upload.status == UploadStatus.PENDING)
            .values(status=status, file_id=file_id)
        )
        if rowcount(result) == 1:
            upload.status, upload.file_id = status, file_id
        return rowcount(result) == 1

    async def expire_due(self, now: int) -> int:
        result = await self.session.execute(
            update(Upload)
            .where(Upload.status == UploadStatus.PENDING, Upload.expires_at <= now)
            .values(status=UploadStatus.EXPIRED)
        )
        return rowcount(result)

    async def finished_parts(self, limit: int, upload_id: str | None = None) -> Sequence[UploadPart]:
        """Parts of uploads that take no more parts (completed, cancelled, expired): garbage."""
        statement = (
            select(UploadPart)
            .join(Upload, Upload.id == UploadPart.upload_id)
            .where(Upload.status != UploadStatus.PENDING)
            .order_by(UploadPart.seq)
            .limit(limit)
        )
        if upload_id is not None:
            statement = statement.where(UploadPart.upload_id == upload_id)
        return (await self.session.execute(statement)).scalars().all()

    async def part_ids(self) -> AsyncIterator[tuple[str, str]]:
        """(project, id) of every part still recorded, streamed: blobs the store holds for uploads."""
        result = await self.session.stream(select(UploadPart.project, UploadPart.id))
        async for project, part_id in result:
            yield project, part_id

    async def delete_parts(self, parts: Sequence[UploadPart]) -> None:
        await self.session.execute(delete(UploadPart).where(UploadPart.seq.in_([p.seq for p in parts])))
