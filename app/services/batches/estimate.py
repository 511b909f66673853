"""A quote before submitting (`POST /v1/batches/estimate`, batchd's): create's checks, the file
validated as the worker validates it (streamed, with its token counts), the output bound priced
as usage is, and where the batch would land in the live queue. Nothing is created or held.

It runs where the engines are: validation needs their checks and tokenizers, the projection
the worker's measured rates."""

from __future__ import annotations

import time
from decimal import Decimal

from app.core.config import Settings
from app.core.errors import ServiceUnavailable
from app.core.worker_port import WorkerPort
from app.db.engine import Database
from app.db.repositories.queue import QueueRepository
from app.engine.config.specs import load_context_lengths, load_prices
from app.engine.protocol import Engines, adapter_bases
from app.pipeline.validation import ValidationResult, validate_input_file
from app.scheduling.projection import Projection, project_new_batch, throughput
from app.schemas.batches import BatchCreateRequest, BatchError, BatchErrors, BatchEstimate, BatchEstimateCost
from app.services.batches.batches import BatchService, CheckedRequest
from app.services.limits.costs import line_items
from app.services.limits.model_permissions import checker_for
from app.storage.base import BlobStore

# The model's completed batches whose throughput stands in for its rate while none of its
# batches runs.
FINISHED_RUNS = 5


class BatchEstimator:
    def __init__(
        self,
        db: Database,
        settings: Settings,
        store: BlobStore,
        engines: Engines | None,
        worker: WorkerPort | None,
    ) -> None:
        self.db = db
        self.settings = settings
        self.store = store
        self.engines = engines
        self.worker = worker

    async def estimate(self, project: str, request: BatchCreateRequest) -> BatchEstimate:
        if self.engines is None or self.worker is None:
            raise ServiceUnavailable(
                "Estimates run on a replica that serves the models, and this one serves none now "
                "(it runs with --api-only, or its engines are still loading). Retry shortly, or ask another replica."
            )
        # A read session: a create's write session would hold SQLite's writer while the file streams.
        async with self.db.read() as session:
            checked = await BatchService(session, self.settings, self.store).checked(project, request)
        result = await self._validated(project, checked)
        now = time.time()
        params = checked.params
        expires_at = int(now) + params.window_seconds
        quote = BatchEstimate(
            input_file_id=params.input_file_id,
            endpoint=params.endpoint,
            completion_window=params.completion_window,
            model=result.model,
            lines=None,
            input_tokens=None,
            max_output_tokens=None,
            cost=None,
            lines_per_second=None,
            projected_start_at=None,
            projected_finish_at=None,
            expires_at=expires_at,
            feasible=None,
            at_risk=None,
            errors=None,
        )
        if result.errors:
            quote.errors = BatchErrors(data=[BatchError(**e) for e in result.errors])
            return quote
        model = result.model
        assert model is not None, "a file without errors has lines, and each names the model"
        quote.lines = result.total
        quote.input_tokens = result.prompt_tokens or 0
        quote.max_output_tokens = self._output_bound(model, result)
        quote.cost = self._cost(model, quote.input_tokens, quote.max_output_tokens)
        projection = await self._projection(project, model, result.total, now, expires_at)
        quote.lines_per_second = projection.rate
        quote.projected_start_at = None if projection.start_at is None else int(projection.start_at)
        quote.projected_finish_at = None if projection.finish_at is None else int(projection.finish_at)
        quote.feasible = projection.feasible
        quote.at_risk = projection.at_risk
        return quote

    async def _validated(self, project: str, checked: CheckedRequest) -> ValidationResult:
        """As the worker validates a batch's file (app/worker/batch_run.py), tokens counted."""
        assert self.engines is not None, "estimate() refuses a replica without engines"
        return await validate_input_file(
            self.store.read(project, checked.input_file.id),
            checked.params.endpoint,
            await checker_for(self.db, project, self.engines),
            max_lines=self.settings.max_batch_lines,
            max_errors=self.settings.max_validation_errors,
            shard_lines=self.settings.shard_lines,
            count_tokens=True,
            adapter_bases=adapter_bases(self.engines),
        )

    def _output_bound(self, model: str, result: ValidationResult) -> int | None:
        """The lines' own caps, and for each line without one the model's context length less
        its prompt; None when such a line's model has no configured context length."""
        if not result.uncapped_lines:
            return result.capped_output_tokens
        context = load_context_lengths(self.settings.model_config_file).get(model)
        if context is None:
            return None
        uncapped = result.uncapped_lines * context - result.uncapped_prompt_tokens
        return result.capped_output_tokens + max(0, uncapped)

    def _cost(self, model: str, input_tokens: int, output_tokens: int | None) -> BatchEstimateCost | None:
        price = load_prices(self.settings.model_config_file).get(model)
        if price is None or output_tokens is None:
            return None
        usage = {"input_tokens": input_tokens, "cached_tokens": 0, "output_tokens": output_tokens, "seconds": 0}
        amounts = {item: amount for item, _, _, amount in line_items(model, usage, price)}
        input_cost = amounts.get(f"{model}, input", Decimal(0))
        output_cost = amounts.get(f"{model}, output", Decimal(0))
        return BatchEstimateCost(
            input=float(input_cost),
            output=float(output_cost),
            total=float(input_cost + output_cost),
            currency=price.currency,
        )

    async def _projection(self, project: str, model: str, lines: int, now: float, expires_at: int) -> Projection:
        """The batch put into the live queue with the worker's measured rates (GET /v1/queue's)."""
        assert self.worker is not None, "estimate() refuses a replica without a worker"
        snapshot = self.worker.queue_snapshot()
        async with self.db.read() as session:
            queue = QueueRepository(session)
            batches = await queue.active()
            finished = await queue.finished_runs(model, FINISHED_RUNS)
        return project_new_batch(
            batches,
            snapshot.weights,
            snapshot.rates,
            now,
            project=project,
            model=model,
            lines=lines,
            expires_at=expires_at,
            finished_rate=throughput(finished),
        )
