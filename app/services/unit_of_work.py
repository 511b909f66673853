"""Hooks that tie side effects outside the database (blob files) to a session's outcome.

Services never commit; the request's session dependency does, then runs these hooks."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from sqlalchemy.ext.asyncio import AsyncSession

Hook = Callable[[], Awaitable[object]]  # what a hook returns is ignored


def on_rollback(session: AsyncSession, hook: Hook) -> None:
    session.info.setdefault("on_rollback", []).append(hook)


def after_commit(session: AsyncSession, hook: Hook) -> None:
    session.info.setdefault("after_commit", []).append(hook)


async def run_hooks(session: AsyncSession, kind: str) -> None:
    hooks = session.info.pop(kind, [])
    session.info.pop("on_rollback" if kind == "after_commit" else "after_commit", None)
    for hook in hooks:
        await hook()
