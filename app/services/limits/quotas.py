"""Per-project limits: stored bytes (BATCHD_PROJECT_MAX_BYTES) and active batches
(BATCHD_PROJECT_MAX_ACTIVE_BATCHES); 0 means no limit.

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
from app.db.repositories.quotas import QuotaRepository


async def check_upload(session: AsyncSession, settings: Settings, project: str, size: int) -> None:
    """Refuse storing `size` more bytes when the project would exceed its stored-bytes limit."""
    limit = settings.project_max_bytes
    if not limit:
        return
    stored = await QuotaRepository(session).stored_bytes(project, int(time.time()))
    if stored + size > limit:
        raise QuotaExceeded(
            f"Storage quota exceeded for project '{project}': it stores {stored} bytes of files, "
            f"this file has {size} and the limit is {limit}. Delete files and try again.",
            type="insufficient_quota",
            code="insufficient_quota",
            param="file",
        )


async def check_batch_create(session: AsyncSession, settings: Settings, project: str) -> None:
    """Refuse a new batch when the project already has its limit of active ones."""
    limit = settings.project_max_active_batches
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
