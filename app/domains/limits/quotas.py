"""Per-project limits: stored bytes (BATCHD_PROJECT_MAX_BYTES, 100 GiB by default) and active
batches (BATCHD_PROJECT_MAX_ACTIVE_BATCHES, 1000 by default); 0 means no limit. The defaults are
far above one team's normal use (OpenAI takes 200 MB batch files, and no team runs a thousand
batches at once) and only stop one project from filling the server's disk or queue. A project's
own limits (`batchd projects set --max-bytes | --max-active-batches`) replace them; 0 there too
means no limit.

Refusals are OpenAI's 429 shapes (`insufficient_quota` for storage, like OpenAI's quota error;
`rate_limit_exceeded` for batches, like its enqueued-limit error) with `x-should-retry: false`:
retrying a few seconds later cannot help, the project must delete files or let batches end.
Checked inside the request's transaction; two concurrent requests can both pass the last free
slot (a soft limit: at most one request's worth over)."""

from __future__ import annotations

import time

from sqlalchemy.ext.asyncio import AsyncSession

from app.core.config import Settings
from app.core.errors import QuotaExceeded
from app.db.models import Project
from app.domains.limits.quotas_repository import QuotaRepository
from app.domains.organization.projects_repository import ProjectRepository


async def _limits(session: AsyncSession, project: str) -> Project | None:
    """The project's own limits (`batchd projects set --max-bytes | --max-active-batches`)."""
    return await ProjectRepository(session).get(project)


async def check_upload(session: AsyncSession, settings: Settings, project: str, size: int) -> None:
    """Refuse storing `size` more bytes when the project would exceed its stored-bytes limit."""
    own = await _limits(session, project)
    limit = settings.project_max_bytes if own is None or own.max_bytes is None else own.max_bytes
    if not limit:
        return
    stored = await QuotaRepository(session).stored_bytes(project, int(time.time()))
    if stored + size > limit:
        raise QuotaExceeded(
            f"Storage quota exceeded for project '{project}': it stores {stored} bytes of files "
            "(and of responses kept for Idempotency-Key repeats), "
            f"this file has {size} and the limit is {limit}. Delete files and try again.",
            type="insufficient_quota",
            code="insufficient_quota",
            param="file",
        )


async def check_batch_create(session: AsyncSession, settings: Settings, project: str) -> None:
    """Refuse a new batch when the project already has its limit of active ones."""
    own = await _limits(session, project)
    limit = (
        settings.project_max_active_batches if own is None or own.max_active_batches is None else own.max_active_batches
    )
    if not limit:
        return
    active = await QuotaRepository(session).active_batches(project)
    if active >= limit:
        raise QuotaExceeded(
            f"Active batch limit reached for project '{project}': Limit: {limit} active batches. "
            "Please try again once some in_progress batches have been completed.",
            type="invalid_request_error",
            code="rate_limit_exceeded",
        )
