"""Operators' per-project settings: the fair-share weight, the enqueued-token limit and the
completion windows (`batchd projects set | list`). A project nobody configured has weight 1, the
server-wide limit and the server's windows."""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

from sqlalchemy.ext.asyncio import AsyncSession

from app.core.config import parse_window
from app.core.errors import InvalidRequest
from app.db.engine import Database
from app.db.models import Project
from app.db.repositories.projects import ProjectRepository
from app.services.organization.audit_log import record

DEFAULT_WEIGHT = 1
MAX_RETENTION_DAYS = 36_500


@dataclass(frozen=True)
class ProjectSettings:
    name: str
    weight: int = DEFAULT_WEIGHT
    max_enqueued_tokens: int | None = None  # None: BATCHD_PROJECT_MAX_ENQUEUED_TOKENS applies
    completion_windows: tuple[str, ...] | None = None  # None: BATCHD_COMPLETION_WINDOWS applies
    retention_days: int | None = None  # None: files are kept until they expire

    def line(self) -> str:
        limit = "default" if self.max_enqueued_tokens is None else str(self.max_enqueued_tokens)
        windows = "default" if self.completion_windows is None else ",".join(self.completion_windows)
        retention = NO_RETENTION if self.retention_days is None else str(self.retention_days)
        return (
            f"{self.name}\tweight {self.weight}\tmax enqueued tokens {limit}\tcompletion windows {windows}"
            f"\tretention days {retention}"
        )


USE_DEFAULT = "default"  # the value a setting goes back to the server-wide one with
NO_RETENTION = "none"  # the value that turns a project's retention period off


def _settings_of(row: Project) -> ProjectSettings:
    windows = tuple(row.completion_windows.split(",")) if row.completion_windows is not None else None
    return ProjectSettings(row.name, row.weight, row.max_enqueued_tokens, windows, row.retention_days)


def _windows_value(windows: Sequence[str]) -> str:
    """The stored form of a window list (checked: each window parses, at least one)."""
    cleaned = [w.strip() for w in windows if w.strip()]
    if not cleaned:
        raise ValueError("completion windows must name at least one window, e.g. 24h")
    for window in cleaned:
        parse_window(window)  # ValueError: "invalid completion window '...'"
    return ",".join(dict.fromkeys(cleaned))


async def set_project(
    db: Database,
    name: str,
    weight: int | None = None,
    max_enqueued_tokens: int | Literal["default"] | None = None,
    completion_windows: Sequence[str] | Literal["default"] | None = None,
    retention_days: int | Literal["none"] | None = None,
) -> ProjectSettings:
    """Change what is given (None: keep it) and keep the rest; a new project starts from the defaults."""
    if weight is not None and weight < 1:
        raise ValueError("weight must be a whole number of at least 1")
    if isinstance(retention_days, int) and not 1 <= retention_days <= MAX_RETENTION_DAYS:
        raise ValueError(f"retention days must be a whole number from 1 to {MAX_RETENTION_DAYS}")
    if isinstance(max_enqueued_tokens, int) and max_enqueued_tokens < 0:
        raise ValueError("max enqueued tokens must not be negative")
    windows = None if completion_windows in (None, USE_DEFAULT) else _windows_value(completion_windows or ())
    async with db.write() as session:
        projects = ProjectRepository(session)
        row = await projects.get(name) or Project(
            name=name, weight=DEFAULT_WEIGHT, max_enqueued_tokens=None, created_at=int(time.time())
        )
        if weight is not None:
            row.weight = weight
        if max_enqueued_tokens is not None:
            row.max_enqueued_tokens = None if max_enqueued_tokens == USE_DEFAULT else int(max_enqueued_tokens)
        if completion_windows is not None:
            row.completion_windows = windows
        retention_changed = retention_days is not None and row.retention_days != _retention_value(retention_days)
        if retention_changed:
            row.retention_days = _retention_value(retention_days)
        row.updated_at = int(time.time())
        saved = _settings_of(await projects.save(row))
        if retention_changed:  # what is deleted, and when, is the audit log's business
            changes = {"changes_requested": {"retention_days": saved.retention_days}}
            await record(session, None, "project.updated", name, name, changes)
        return saved


def _retention_value(retention_days: int | str | None) -> int | None:
    return None if retention_days in (None, NO_RETENTION) else int(retention_days)


async def list_projects(db: Database) -> list[ProjectSettings]:
    async with db.read() as session:
        return [_settings_of(row) for row in await ProjectRepository(session).list_all()]


async def project_settings(db: Database, name: str) -> ProjectSettings:
    async with db.read() as session:
        row = await ProjectRepository(session).get(name)
    return _settings_of(row) if row else ProjectSettings(name)


async def check_completion_window(session: AsyncSession, project: str, window: str, offered: Iterable[str]) -> None:
    """Refuse a window (one of the server's `offered`, checked by the caller) that the project's
    operator has not allowed it; a project without its own list may use every offered window."""
    row = await ProjectRepository(session).get(project)
    allowed = _settings_of(row).completion_windows if row else None
    if allowed is None or window in allowed:
        return
    usable = [w for w in offered if w in allowed]
    raise InvalidRequest(
        f"Invalid value for 'completion_window': '{window}'. Project '{project}' may use only: "
        + (", ".join(f"'{w}'" for w in usable) or "no window this server offers")
        + ".",
        param="completion_window",
        code="invalid_value",
    )
