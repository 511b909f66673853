"""The enqueued-token limit (OpenAI's batch queue limit): per project and model, the prompt tokens
of batches not yet finished. Counted at validation; a batch that would pass the limit fails
there with `token_limit_exceeded`, as OpenAI's does."""

from __future__ import annotations

from sqlalchemy.ext.asyncio import AsyncSession

from app.core.config import Settings
from app.db.engine import Database
from app.db.repositories.batches import BatchRepository
from app.services.projects import project_settings


async def enqueued_token_limit(db: Database, settings: Settings, project: str) -> int | None:
    """The project's limit (its own, else BATCHD_PROJECT_MAX_ENQUEUED_TOKENS); None when there is none."""
    own = (await project_settings(db, project)).max_enqueued_tokens
    if own is not None:
        return own  # 0 too: a project an operator has closed
    return settings.project_max_enqueued_tokens or None


async def limit_error(
    session: AsyncSession, batch_id: str, project: str, model: str, prompt_tokens: int, limit: int
) -> dict | None:
    """The batch's `token_limit_exceeded` error when its prompt tokens and those already enqueued
    for the model pass the limit, else None (read in the transaction that moves the batch on)."""
    enqueued = await BatchRepository(session).enqueued_prompt_tokens(project, model, other_than=batch_id)
    if enqueued + prompt_tokens <= limit:
        return None
    return {
        "code": "token_limit_exceeded",
        "message": (
            f"Enqueued token limit reached for {model} in project {project}. Limit: {limit:,} enqueued tokens. "
            "Please try submitting fewer tokens or try again once your in_progress batches have completed."
        ),
        "param": None,
        "line": None,
    }
