"""SQL for the models replicas publish (see app/domains/models/service.py)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import delete, select
from sqlalchemy.ext.asyncio import AsyncSession

from app.db.models import ServedModel


class ServedModelRepository:
    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    async def replace(self, replica: str, entries: Sequence[dict[str, Any]], now: float) -> None:
        """This replica's models are exactly `entries` as of `now` (a model it stopped serving goes)."""
        await self.remove(replica)
        columns = {column.name for column in ServedModel.__table__.columns}
        self.session.add_all(
            ServedModel(
                **{key: value for key, value in entry.items() if key in columns},
                model_id=entry["id"],
                replica=replica,
                published_at=now,
            )
            for entry in entries
        )

    async def remove(self, replica: str) -> None:
        await self.session.execute(delete(ServedModel).where(ServedModel.replica == replica))

    async def remove_older_than(self, cutoff: float) -> None:
        await self.session.execute(delete(ServedModel).where(ServedModel.published_at < cutoff))

    async def published_since(self, cutoff: float) -> Sequence[ServedModel]:
        result = await self.session.execute(
            select(ServedModel)
            .where(ServedModel.published_at >= cutoff)
            .order_by(ServedModel.model_id, ServedModel.replica)
        )
        return result.scalars().all()
