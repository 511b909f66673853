"""Hooks that tie side effects outside the database (blob files) to a session's outcome.

Services never commit; the request's session dependency does, then runs these hooks."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager

from sqlalchemy.ext.asyncio import AsyncSession

Hook = Callable[[], Awaitable[object]]  # what a hook returns is ignored


def on_rollback(session: AsyncSession, hook: Hook) -> None:
    session.info.setdefault("on_rollback", []).append(hook)


def before_commit(session: AsyncSession, hook: Hook) -> None:
    """`hook` runs in the transaction just before it commits; raising rolls it back."""
    session.info.setdefault("before_commit", []).append(hook)


def after_commit(session: AsyncSession, hook: Hook) -> None:
    session.info.setdefault("after_commit", []).append(hook)


async def run_hooks(session: AsyncSession, kind: str) -> None:
    hooks = session.info.pop(kind, [])
    session.info.pop("on_rollback" if kind == "after_commit" else "after_commit", None)
    for hook in hooks:
        await hook()


@asynccontextmanager
async def unit_of_work(
    sessions: Callable[[], AbstractAsyncContextManager[AsyncSession]],
) -> AsyncIterator[AsyncSession]:
    """A session committed when the block ends, its after-commit hooks (blob deletes) run then;
    on an error rolled back, its on-rollback hooks (a blob just written is removed) run, and the
    error raised again."""
    async with sessions() as session:
        try:
            yield session
            for hook in session.info.pop("before_commit", []):
                await hook()
            await session.commit()
        except BaseException:
            await session.rollback()
            await run_hooks(session, "on_rollback")
            raise
        await run_hooks(session, "after_commit")
