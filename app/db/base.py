"""Declarative base with a naming convention so Alembic batch mode can name constraints."""

from typing import Any, cast

from sqlalchemy import CursorResult, MetaData, Result
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import DeclarativeBase

NAMING_CONVENTION = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING_CONVENTION)


def rowcount(result: Result[Any]) -> int:
    """Rows an UPDATE or DELETE matched (its result is a CursorResult; the session types it as Result)."""
    return cast(CursorResult[Any], result).rowcount


def dialect_of(session: AsyncSession) -> str:
    """`postgresql` or `sqlite`: the few statements without a portable form (upserts) pick by it."""
    assert session.bind is not None, "sessions come bound from Database"
    return session.bind.dialect.name
