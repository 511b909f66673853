"""A batch's input validated once, the same way for its run (the worker's validating step,
app/worker/batch_run.py) and for a quote (`POST /v1/batches/estimate`): the file's lines checked
as app/pipeline/validation.py checks them, then the project's enqueued-token and daily limits.
So a quote refuses, with the same error, what the run would fail."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy.ext.asyncio import AsyncSession

from app.core.batch_kinds import OPENAI_KIND, BatchKind
from app.core.config import Settings
from app.db.engine import Database
from app.domains.limits.model_permissions import checker_for
from app.domains.limits.token_limits import ProjectLimits, enqueue_tokens, over_limits, project_limits
from app.engine.protocol import Engines, adapter_bases
from app.pipeline.prefix_order import PrefixOrder
from app.pipeline.validation import ValidationResult, validate_input_file
from app.storage.base import BlobStore


@dataclass
class ValidatedInput:
    """A validated file and the limits its batch is counted against (`admit` applies them)."""

    project: str
    result: ValidationResult
    limits: ProjectLimits
    # The error of the limit the file's lines passed (then `result.errors`), once admitted.
    over_limit: dict | None = None

    async def admit(self, session: AsyncSession, batch_id: str | None) -> None:
        """Count the file's prompt tokens against the project's limits: a batch's (`batch_id`)
        are recorded, in the transaction that moves it on (so a check and its count are one
        step); a quote's (None) only checked. Passing one puts its error in `result.errors`."""
        result = self.result
        if result.errors or not self.limits.apply:
            return
        if batch_id is None:
            over = await over_limits(session, self.project, result.tokens_by_model, self.limits, result.total)
        else:
            over = await enqueue_tokens(
                session, batch_id, self.project, result.tokens_by_model, self.limits, result.total
            )
        if over:
            self.over_limit, result.errors = over, [over]


class BatchInputValidator:
    def __init__(self, db: Database, settings: Settings, store: BlobStore, engines: Engines) -> None:
        self.db = db
        self.settings = settings
        self.store = store
        self.engines = engines

    async def validate(
        self,
        project: str,
        input_file_id: str,
        endpoint: str,
        *,
        kind: BatchKind = OPENAI_KIND,
        order: PrefixOrder | None = None,
        count_tokens: bool = False,
        mixed_models: bool = False,
    ) -> ValidatedInput:
        """The project's file checked line by line, by its batch kind's rules (a Message Batch's
        one request at a time); its prompt tokens counted when a limit applies or `count_tokens` asks."""
        settings = self.settings
        limits = await project_limits(self.db, settings, project)
        result = await validate_input_file(
            self.store.read(project, input_file_id),
            endpoint,
            await checker_for(self.db, project, self.engines),
            max_lines=kind.max_lines(settings),
            max_errors=settings.max_validation_errors,
            shard_lines=settings.shard_lines,
            count_tokens=count_tokens or limits.apply,
            per_request=kind.lines_checked_as_they_run,
            order=order,
            adapter_bases=adapter_bases(self.engines),
            mixed_models=mixed_models,
        )
        return ValidatedInput(project, result, limits)

    async def quote(
        self, project: str, input_file_id: str, endpoint: str, *, mixed_models: bool = False
    ) -> ValidatedInput:
        """As `validate` and `admit` judge a batch of the file now, tokens always counted; nothing held."""
        validated = await self.validate(project, input_file_id, endpoint, count_tokens=True, mixed_models=mixed_models)
        async with self.db.read() as session:
            await validated.admit(session, None)
        return validated
