"""The enqueued-token limit (OpenAI's batch queue limit): per project and model, the prompt tokens
of batches not yet finished. Counted at validation, per model (a Message Batch's requests may
name several); a batch that would pass the limit for any of its models fails there with
`token_limit_exceeded`, as OpenAI's does (a Message Batch ends with every request errored,
`rate_limit_error`: app/domains/message_batches/service.py).

Check and count are one step: the project's lock is held from the read of what is enqueued to
the write of the batch's own counts (app/domains/limits/enqueued_tokens_repository.py), so two batches
validated at once, on any replicas, cannot both take the last room."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from sqlalchemy.ext.asyncio import AsyncSession

from app.core.config import Settings
from app.core.line_errors import LineErrorCode, batch_error
from app.db.engine import Database
from app.db.models import ProjectRateLimit
from app.domains.limits.enqueued_tokens_repository import EnqueuedTokenRepository
from app.domains.limits.rate_limits import check_daily_limits, daily_limits
from app.domains.organization.projects import project_settings

TOKEN_LIMIT_EXCEEDED = LineErrorCode.TOKEN_LIMIT_EXCEEDED


async def enqueued_token_limit(db: Database, settings: Settings, project: str) -> int | None:
    """The project's limit (its own, else BATCHD_PROJECT_MAX_ENQUEUED_TOKENS); None when there is none."""
    own = (await project_settings(db, project)).max_enqueued_tokens
    if own is not None:
        return own  # 0 too: a project an operator has closed
    return settings.project_max_enqueued_tokens or None


@dataclass(frozen=True)
class ProjectLimits:
    """What a project's batch is counted against at validation: the enqueued-token limit (None:
    none) and the daily limits by model."""

    enqueued_tokens: int | None = None
    daily: Mapping[str, ProjectRateLimit] = field(default_factory=dict)

    @property
    def apply(self) -> bool:
        """Whether any applies: else the prompt tokens need no count."""
        return self.enqueued_tokens is not None or bool(self.daily)


async def project_limits(db: Database, settings: Settings, project: str) -> ProjectLimits:
    return ProjectLimits(await enqueued_token_limit(db, settings, project), await daily_limits(db, project))


async def over_limits(
    session: AsyncSession,
    project: str,
    tokens_by_model: Mapping[str, int],
    limits: ProjectLimits,
    lines: int,
    *,
    batch_id: str = "",
) -> dict | None:
    """The error of a batch (`batch_id`; none yet for a quote) whose prompt tokens or lines would
    pass one of the project's limits for any of its models, else None. Records nothing."""
    if limits.enqueued_tokens is not None:
        limit = limits.enqueued_tokens
        enqueued = await EnqueuedTokenRepository(session).enqueued(project, tokens_by_model, other_than=batch_id)
        for model in sorted(tokens_by_model):
            if enqueued[model] + tokens_by_model[model] > limit:
                return _limit_error(project, model, limit)
    if limits.daily:
        return await check_daily_limits(session, limits.daily, batch_id, project, tokens_by_model, lines)
    return None


async def enqueue_tokens(
    session: AsyncSession,
    batch_id: str,
    project: str,
    tokens_by_model: Mapping[str, int],
    limits: ProjectLimits,
    lines: int = 0,
) -> dict | None:
    """Count the batch's prompt tokens against the project's limits (`over_limits`), model by
    model: the batch's error when any model would pass one (nothing is recorded), else None with
    the counts recorded. Call it in the transaction that moves the batch on."""
    repo = EnqueuedTokenRepository(session)
    await repo.lock_project(project)
    over = await over_limits(session, project, tokens_by_model, limits, lines, batch_id=batch_id)
    if over is None:
        await repo.record(batch_id, tokens_by_model)
    return over


def _limit_error(project: str, model: str, limit: int) -> dict:
    return batch_error(
        TOKEN_LIMIT_EXCEEDED,
        f"Enqueued token limit reached for {model} in project {project}. Limit: {limit:,} enqueued tokens. "
        "Please try submitting fewer tokens or try again once your in_progress batches have completed.",
    )
