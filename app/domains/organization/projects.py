"""Operators' per-project settings: the fair-share weight, the enqueued-token, stored-bytes and
active-batch limits, the completion windows and retention (`batchd projects set | list`). A
project nobody configured has weight 1, the server-wide limits and the server's windows."""

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
from app.domains.organization.audit_log import record
from app.domains.organization.projects_repository import ProjectRepository

DEFAULT_WEIGHT = 1
MAX_RETENTION_DAYS = 36_500


@dataclass(frozen=True)
class ProjectSettings:
    name: str
    weight: int = DEFAULT_WEIGHT
    max_enqueued_tokens: int | None = None  # None: BATCHD_PROJECT_MAX_ENQUEUED_TOKENS applies
    completion_windows: tuple[str, ...] | None = None  # None: BATCHD_COMPLETION_WINDOWS applies
    retention_days: int | None = None  # None: files are kept until they expire
    # None: BATCHD_PROJECT_MAX_BYTES / BATCHD_PROJECT_MAX_ACTIVE_BATCHES apply; 0: no limit.
    max_bytes: int | None = None
    max_active_batches: int | None = None
    # The `s3://bucket/prefix/` URIs its files may be imported from, besides BATCHD_IMPORT_ALLOWED_URIS.
    allowed_import_uris: tuple[str, ...] = ()

    def line(self) -> str:
        limit = "default" if self.max_enqueued_tokens is None else str(self.max_enqueued_tokens)
        windows = "default" if self.completion_windows is None else ",".join(self.completion_windows)
        retention = NO_RETENTION if self.retention_days is None else str(self.retention_days)
        return (
            f"{self.name}\tweight {self.weight}\tmax enqueued tokens {limit}"
            f"\tmax bytes {_quota(self.max_bytes)}\tmax active batches {_quota(self.max_active_batches)}"
            f"\tcompletion windows {windows}\tretention days {retention}"
            + (f"\tallowed import uris {','.join(self.allowed_import_uris)}" if self.allowed_import_uris else "")
        )


def _quota(value: int | None) -> str:
    return USE_DEFAULT if value is None else NO_LIMIT if value == 0 else str(value)


USE_DEFAULT = "default"  # the value a setting goes back to the server-wide one with
NO_RETENTION = "none"  # the value that turns a project's retention period off
NO_LIMIT = "none"  # the value that lifts a project's stored-bytes or active-batch limit (stored as 0)
Quota = int | Literal["none", "default"]


def _settings_of(row: Project) -> ProjectSettings:
    windows = tuple(row.completion_windows.split(",")) if row.completion_windows is not None else None
    return ProjectSettings(
        row.name,
        row.weight,
        row.max_enqueued_tokens,
        windows,
        row.retention_days,
        max_bytes=row.max_bytes,
        max_active_batches=row.max_active_batches,
        allowed_import_uris=tuple(row.allowed_import_uris or ()),
    )


def import_uris_value(uris: Sequence[str]) -> list[str] | None:
    """The stored form of a project's allowed import prefixes (each an `s3://bucket/...` URI;
    none: None)."""
    from app.storage.s3 import split_s3_uri  # aiobotocore loads only when S3 is used

    cleaned = list(dict.fromkeys(uri.strip() for uri in uris if uri.strip()))
    for uri in cleaned:
        split_s3_uri(uri)  # ValueError: "expected s3://bucket/key, ..."
    return cleaned or None


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
    max_bytes: Quota | None = None,
    max_active_batches: Quota | None = None,
    allowed_import_uris: Sequence[str] | None = None,
) -> ProjectSettings:
    """Change what is given (None: keep it) and keep the rest; a new project starts from the defaults.
    `allowed_import_uris` replaces the project's list (empty: clears it)."""
    import_uris = None if allowed_import_uris is None else import_uris_value(allowed_import_uris)
    for label, quota in (("max bytes", max_bytes), ("max active batches", max_active_batches)):
        if isinstance(quota, int) and quota < 1:
            raise ValueError(f"{label} must be a whole number of at least 1, 'none' or 'default'")
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
        if max_bytes is not None:
            row.max_bytes = _quota_value(max_bytes)
        if max_active_batches is not None:
            row.max_active_batches = _quota_value(max_active_batches)
        imports_changed = allowed_import_uris is not None and (row.allowed_import_uris or None) != import_uris
        if imports_changed:
            row.allowed_import_uris = import_uris
        retention_changed = retention_days is not None and row.retention_days != _retention_value(retention_days)
        if retention_changed:
            row.retention_days = _retention_value(retention_days)
        row.updated_at = int(time.time())
        saved = _settings_of(await projects.save(row))
        audited: dict[str, object] = {}
        if retention_changed:  # what is deleted, and when, is the audit log's business
            audited["retention_days"] = saved.retention_days
        if imports_changed:  # and so is what the server reads with its own credentials
            audited["allowed_import_uris"] = import_uris
        if audited:
            await record(session, None, "project.updated", name, name, {"changes_requested": audited})
        return saved


def _quota_value(quota: Quota) -> int | None:
    return None if quota == USE_DEFAULT else 0 if quota == NO_LIMIT else int(quota)


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
