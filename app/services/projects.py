"""Operators' per-project settings: the fair-share weight and the enqueued-token limit
(`batchd projects set | list`). A project nobody configured has weight 1 and the server-wide limit."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Literal

from app.db.engine import Database
from app.db.models import Project
from app.db.repositories.projects import ProjectRepository

DEFAULT_WEIGHT = 1


@dataclass(frozen=True)
class ProjectSettings:
    name: str
    weight: int = DEFAULT_WEIGHT
    max_enqueued_tokens: int | None = None  # None: BATCHD_PROJECT_MAX_ENQUEUED_TOKENS applies

    def line(self) -> str:
        limit = "default" if self.max_enqueued_tokens is None else str(self.max_enqueued_tokens)
        return f"{self.name}\tweight {self.weight}\tmax enqueued tokens {limit}"


USE_DEFAULT = "default"  # the limit a project goes back to the server-wide one with


def _settings_of(row: Project) -> ProjectSettings:
    return ProjectSettings(row.name, row.weight, row.max_enqueued_tokens)


async def set_project(
    db: Database, name: str, weight: int | None = None, max_enqueued_tokens: int | Literal["default"] | None = None
) -> ProjectSettings:
    """Change what is given (None: keep it) and keep the rest; a new project starts from the defaults."""
    if weight is not None and weight < 1:
        raise ValueError("weight must be a whole number of at least 1")
    if isinstance(max_enqueued_tokens, int) and max_enqueued_tokens < 0:
        raise ValueError("max enqueued tokens must not be negative")
    async with db.write() as session:
        projects = ProjectRepository(session)
        row = await projects.get(name) or Project(name=name, weight=DEFAULT_WEIGHT, max_enqueued_tokens=None)
        if weight is not None:
            row.weight = weight
        if max_enqueued_tokens is not None:
            row.max_enqueued_tokens = None if max_enqueued_tokens == USE_DEFAULT else int(max_enqueued_tokens)
        row.updated_at = int(time.time())
        return _settings_of(await projects.save(row))


async def list_projects(db: Database) -> list[ProjectSettings]:
    async with db.read() as session:
        return [_settings_of(row) for row in await ProjectRepository(session).list_all()]


async def project_settings(db: Database, name: str) -> ProjectSettings:
    async with db.read() as session:
        row = await ProjectRepository(session).get(name)
    return _settings_of(row) if row else ProjectSettings(name)
