"""Projects' rate limits through the Administration API (`.../projects/{id}/rate_limits`): one
`project.rate_limit` per served model. Two of OpenAI's limits hold here, per project, model and
UTC day: `batch_1_day_max_input_tokens` (prompt tokens of the day's batches) and
`max_requests_per_1_day` (their lines). A batch that would pass either fails validation, as
OpenAI's does, with `token_limit_exceeded` or `request_limit_exceeded`; the check runs in the
transaction and under the lock that count enqueued tokens (app/domains/limits/token_limits.py), so two
batches validated at once cannot both take the last room."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from app.core.errors import InvalidRequest
from app.core.line_errors import LineErrorCode, batch_error
from app.db.engine import Database
from app.db.models import Project, ProjectRateLimit
from app.domains.limits.rate_limits_repository import RateLimitRepository
from app.domains.organization.audit_log import record
from app.domains.organization.auth import Caller
from app.domains.organization.org_projects import OrganizationProjects
from app.domains.organization.schemas import RateLimitObject, RateLimitUpdateParams
from app.schemas.common import ListPage

ID_PREFIX = "rl-"
PER_MINUTE = (
    "max_requests_per_1_minute",
    "max_tokens_per_1_minute",
    "max_audio_megabytes_per_1_minute",
    "max_images_per_1_minute",
)
DAILY = ("batch_1_day_max_input_tokens", "max_requests_per_1_day")
DAY = 86_400


def _object(project: Project, model: str, row: ProjectRateLimit | None) -> RateLimitObject:
    return RateLimitObject(
        id=ID_PREFIX + model,
        model=model,
        batch_1_day_max_input_tokens=row.batch_1_day_max_input_tokens if row else None,
        max_requests_per_1_day=row.max_requests_per_1_day if row else None,
        weight=project.weight,
        max_enqueued_tokens=project.max_enqueued_tokens,
    )


class RateLimits:
    def __init__(self, session: AsyncSession, caller: Caller) -> None:
        self.session = session
        self.caller = caller
        self.repo = RateLimitRepository(session)
        self.projects = OrganizationProjects(session, caller)

    async def page(
        self, project_id: str, served: list[str], *, after: str | None, before: str | None, limit: int
    ) -> ListPage[RateLimitObject]:
        """Every served model's limits, and those of models it once had limits for, by model."""
        project = await self.projects.get(project_id)
        rows = {row.model: row for row in await self.repo.of_project(project_id)}
        models = sorted(set(served) | set(rows))
        if after is not None:
            models = [m for m in models if ID_PREFIX + m > after]
        if before is not None:
            models = [m for m in models if ID_PREFIX + m < before][-limit:]
        items = [_object(project, m, rows.get(m)) for m in models[:limit]]
        return ListPage.of(items, len(models) > limit)

    async def update(self, project_id: str, rate_limit_id: str, params: RateLimitUpdateParams) -> RateLimitObject:
        project = await self.projects.get_active(project_id)
        model = rate_limit_id.removeprefix(ID_PREFIX)
        if model == rate_limit_id or not model or len(model) > 256:
            raise InvalidRequest(
                f"Invalid rate limit id '{rate_limit_id}': it is 'rl-' followed by a model name.",
                param="rate_limit_id",
                code="invalid_value",
            )
        extra = params.model_extra or {}
        refused = [name for name in PER_MINUTE if extra.get(name) is not None]
        if refused:
            raise InvalidRequest(
                f"Invalid parameter '{refused[0]}': batchd limits batches per day, not per minute.",
                param=refused[0],
                code="unsupported_parameter",
            )
        given = params.model_dump(exclude_unset=True, include={*DAILY, "weight", "max_enqueued_tokens"})
        now = int(time.time())
        row = await self.repo.get(project_id, model) or ProjectRateLimit(project=project_id, model=model)
        for name in DAILY:
            if name in given:
                setattr(row, name, given[name])
        row.updated_at = now
        row = await self.repo.save(row)
        if "weight" in given and given["weight"] is not None:
            project.weight = given["weight"]
        if "max_enqueued_tokens" in given:
            project.max_enqueued_tokens = given["max_enqueued_tokens"]
        project.updated_at = now
        await self.session.flush()
        await record(
            self.session,
            self.caller.key_id,
            "rate_limit.updated",
            ID_PREFIX + model,
            project_id,
            {"changes_requested": given},
        )
        return _object(project, model, row)


async def daily_limits(db: Database, project: str) -> dict[str, ProjectRateLimit]:
    """The project's daily limits by model (read before validation: whether to count tokens)."""
    async with db.read() as session:
        return {row.model: row for row in await RateLimitRepository(session).of_project(project)}


async def check_daily_limits(
    session: AsyncSession,
    limits: Mapping[str, ProjectRateLimit],
    batch_id: str,
    project: str,
    tokens_by_model: Mapping[str, int],
    lines: int,
) -> dict[str, Any] | None:
    """The batch's error when one of its models would pass a daily limit, else None. Call it
    under the project's enqueued-token lock, before the batch's own tokens are recorded."""
    repo = RateLimitRepository(session)
    since = int(time.time()) // DAY * DAY
    for model in sorted(tokens_by_model):
        row = limits.get(model)
        if row is None:
            continue
        cap = row.batch_1_day_max_input_tokens
        if cap is not None and await repo.tokens_since(project, model, since, batch_id) + tokens_by_model[model] > cap:
            return batch_error(
                LineErrorCode.TOKEN_LIMIT_EXCEEDED,
                f"Batch daily input token limit reached for {model} in project {project}. Limit: {cap:,} input "
                "tokens per day. Please try submitting fewer tokens or try again tomorrow (UTC).",
            )
        cap = row.max_requests_per_1_day
        if cap is not None and await repo.requests_since(project, model, since, batch_id) + lines > cap:
            return batch_error(
                LineErrorCode.REQUEST_LIMIT_EXCEEDED,
                f"Daily request limit reached for {model} in project {project}. Limit: {cap:,} requests per day. "
                "Please try submitting fewer requests or try again tomorrow (UTC).",
            )
    return None
