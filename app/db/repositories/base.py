"""The base of every repository of an API resource: rows owned by a project (another project's
id simply isn't found), listed a page at a time after a cursor id.

Rows are ordered by `seq`, their monotonic insertion number. A cursor is found among all the
project's rows, hidden ones included (a deleted or expired file), so clients that delete while
iterating a list keep their place. Domain repositories add only their own queries."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

from sqlalchemy import ColumnElement, Select, select
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import Mapped


class ProjectRow(Protocol):
    """What a row needs to be scoped and paginated."""

    seq: Mapped[int]
    id: Mapped[str]
    project: Mapped[str]


M = TypeVar("M", bound=ProjectRow)


class UnknownCursor(LookupError):
    """The `after` id names no row of the project (the service answers 404 in its own words)."""


@dataclass
class Page(Generic[M]):
    """One page of a list: `has_more` says rows follow the last item (never set on an empty page)."""

    items: list[M]
    has_more: bool


class ProjectScopedRepository(Generic[M]):
    model: type[M]

    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    def scoped(self, project: str | None) -> Select[M]:
        """The project's rows the API shows (every project's for None: an admin's list); a
        repository whose rows can be hidden narrows it."""
        statement = select(self.model)
        return statement if project is None else statement.where(self.model.project == project)

    async def add(self, row: M) -> M:
        self.session.add(row)
        await self.session.flush()
        return row

    async def get(self, project: str, row_id: str) -> M | None:
        result = await self.session.execute(self.scoped(project).where(self.model.id == row_id))
        return result.scalar_one_or_none()

    async def cursor_seq(self, project: str | None, row_id: str) -> int | None:
        """Position of a cursor id among all the project's rows (every project's for None),
        hidden ones included."""
        statement = select(self.model.seq).where(self.model.id == row_id)
        if project is not None:
            statement = statement.where(self.model.project == project)
        result = await self.session.execute(statement)
        return result.scalar_one_or_none()

    async def page(
        self,
        project: str | None,
        *,
        after: str | None,
        limit: int,
        descending: bool = True,
        where: Sequence[ColumnElement[bool]] = (),
    ) -> Page[M]:
        """Up to `limit` rows strictly after the row `after` (newest first unless `descending` is
        False), filtered by `where`. One extra row is read to know whether more follow."""
        statement = self.scoped(project).where(*where)
        if after is not None:
            after_seq = await self.cursor_seq(project, after)
            if after_seq is None:
                raise UnknownCursor(after)
            statement = statement.where(self.model.seq < after_seq if descending else self.model.seq > after_seq)
        order = self.model.seq.desc() if descending else self.model.seq.asc()
        rows = (await self.session.execute(statement.order_by(order).limit(limit + 1))).scalars().all()
        items = list(rows[:limit])
        return Page(items, has_more=bool(items) and len(rows) > limit)
