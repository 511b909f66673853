"""A quote before submitting (`POST /v1/batches/estimate`, batchd's): create's checks, the file
validated by the run's own validation, the project's limits included (validation.py: streamed,
with its token counts), the output bound priced as usage is (at the prices read as the engines
started), and where the batch would land in the live queue. Nothing is created or held.

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
from app.domains.batches.schemas import BatchCreateRequest, BatchError, BatchErrors, BatchEstimate, BatchEstimateCost
from app.domains.batches.service import BatchService
from app.domains.batches.validation import BatchInputValidator
from app.domains.limits.costs import line_items
from app.engine.config.specs import ModelTable
from app.engine.protocol import Engines
from app.pipeline.validation import ValidationResult
from app.scheduling.projection import Projection, project_new_batch, throughput
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
        models: ModelTable,
    ) -> None:
        self.db = db
        self.settings = settings
        self.store = store
        self.engines = engines
        self.worker = worker
        self.models = models  # read once as the engines started, not per quote

    async def estimate(self, project: str, request: BatchCreateRequest) -> BatchEstimate:
        if self.engines is None or self.worker is None:
            raise ServiceUnavailable(
                "Estimates run on a replica that serves the models, and this one serves none now "
                "(it runs with --api-only, or its engines are still loading). Retry shortly, or ask another replica."
            )
        # A read session: a create's write session would hold SQLite's writer while the file streams.
        async with self.db.read() as session:
            checked = await BatchService(session, self.settings, self.store).checked(project, request)
        validator = BatchInputValidator(self.db, self.settings, self.store, self.engines)
        validated = await validator.quote(
            project, checked.input_file.id, checked.params.endpoint, mixed_models=checked.params.allow_mixed_models
        )
        result = validated.result
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
        if result.errors:  # the run would fail with these
            quote.errors = BatchErrors(data=[BatchError(**e) for e in result.errors])
            quote.feasible = False
            if validated.over_limit is None:
                return quote  # line errors: the file's counts are moot
        model = result.model
        assert model is not None, "a file without errors has lines, and each names the model"
        quote.lines = result.total
        quote.input_tokens = result.prompt_tokens or 0
        quote.max_output_tokens = self._output_bound(model, result)
        quote.cost = self._cost(model, quote.input_tokens, quote.max_output_tokens)
        if validated.over_limit is not None:  # its lines and tokens said, no projection
            return quote
        projection = await self._projection(project, model, result.total, now, expires_at)
        quote.lines_per_second = projection.rate
        quote.projected_start_at = None if projection.start_at is None else int(projection.start_at)
        quote.projected_finish_at = None if projection.finish_at is None else int(projection.finish_at)
        quote.feasible = projection.feasible
        quote.at_risk = projection.at_risk
        return quote

    def _output_bound(self, model: str, result: ValidationResult) -> int | None:
        """The lines' own caps, and for each line without one the model's context length less
        its prompt; None when such a line's model has no configured context length."""
        if not result.uncapped_lines:
            return result.capped_output_tokens
        context = self.models.context_lengths.get(model)
        if context is None:
            return None
        uncapped = result.uncapped_lines * context - result.uncapped_prompt_tokens
        return result.capped_output_tokens + max(0, uncapped)

    def _cost(self, model: str, input_tokens: int, output_tokens: int | None) -> BatchEstimateCost | None:
        price = self.models.prices.get(model)
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
            deadline=expires_at,  # a batch's own: it has no due_at
            finished_rate=throughput(finished),
        )
