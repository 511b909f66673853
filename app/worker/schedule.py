"""This replica's view of fair share: project weights (re-read every few seconds, so `batchd
projects set` reaches every replica within seconds), recent rates and at-risk batches, refreshed
from the shared database about once a second. The engine gates ask it for weights and risk
(app.scheduling.gate_order); the worker asks it which shard to claim next
(app.scheduling.admission), so that across replicas every project with work on a model runs
shards of it and, within a project, earliest deadline first."""

from __future__ import annotations

import asyncio
import logging
import statistics
import time
from collections import Counter, deque
from collections.abc import Callable, Iterable, Mapping, Sequence

from app.core import metrics
from app.db.engine import Database
from app.db.repositories.queue import QueueRepository
from app.domains.organization.projects import list_projects
from app.scheduling.admission import Pick, ShardHere, Slots, next_pick
from app.scheduling.fair_share import (
    UNKNOWN_RATE_WAIT,
    ProjectOutlook,
    RateMeter,
    at_risk_ids,
    behind_ids,
    local_weights,
    model_rates,
    outlook,
    small_batch_ids,
)
from app.scheduling.projection import throughput
from app.scheduling.state import BatchProgress, Claimable, RunningShard

log = logging.getLogger("batchd.schedule")

REFRESH_SECONDS = 1.0
WEIGHTS_TTL_SECONDS = 3.0
# A model's served rate is the median of its last this many samples while it served (about a
# minute of refreshes): the tail of a drain or a swap-out (the rate falling to 0) barely moves it.
SERVED_SAMPLES = 60
# A model that never served here is projected at its throughput in its last finished batches,
# read again this often while it serves nothing.
PRIOR_TTL_SECONDS = 30.0
PRIOR_RUNS = 20


class Schedule:
    def __init__(
        self,
        db: Database,
        owner: str,
        at_risk_max_share: float,
        shared: Callable[[str | None], bool] = lambda model: False,
        unknown_rate_wait: float = UNKNOWN_RATE_WAIT,
    ) -> None:
        self.db = db
        self.owner = owner  # this replica, as it appears in shard leases
        self.at_risk_max_share = at_risk_max_share
        self.unknown_rate_wait = unknown_rate_wait
        self.shared = shared  # whether every replica sends a model's lines to one fleet
        self._weights: dict[str, float] = {}
        self._weights_at = -WEIGHTS_TTL_SECONDS
        self._meter = RateMeter()
        self._at_risk: frozenset[str] = frozenset()
        self._small: frozenset[str] = frozenset()
        self._behind: frozenset[str] = frozenset()
        self._local: dict[tuple[str | None, str], float] = {}
        self._window_parts: dict[str | None, float] = {}
        # What each model served lately while it served (lines/s), and priors for those that
        # have not served here yet: what fair_share.outlook projects a model serving nothing at.
        self._served_samples: dict[str | None, deque[float]] = {}
        self._priors: dict[str, tuple[float, float | None]] = {}  # model -> (read at, rate)
        self.served: dict[str | None, float] = {}  # as the last refresh projected with

    # SharePolicy, for the engine gates
    def weight(self, model: str, project: str) -> float:
        """The project's weight in this replica's gate of `model`: its configured weight,
        adjusted for where that model's shards run (fair_share.local_weights), so its share is
        of the whole fleet, wherever its lines run."""
        return self._local.get((model, project)) or self._weights.get(project, 1)

    def window_part(self, model: str) -> float:
        """The part of its window this replica's gate of `model` uses (fair_share.local_weights)."""
        return self._window_parts.get(model, 1.0)

    def small(self, batch_id: str) -> bool:
        return batch_id in self._small

    def waits_behind(self, batch_id: str) -> bool:
        return batch_id in self._behind

    def at_risk(self, batch_id: str) -> bool:
        return batch_id in self._at_risk

    @property
    def at_risk_ids(self) -> frozenset[str]:
        return self._at_risk

    def rates(self) -> dict[str, float]:
        return self._meter.rates()

    def weights(self) -> dict[str, float]:
        return dict(self._weights)

    async def run_forever(self) -> None:
        while True:
            try:
                await self.refresh()
            except Exception:  # noqa: BLE001 - e.g. a busy database; the last view stands meanwhile
                log.warning("refreshing the fair-share view failed", exc_info=True)
            await asyncio.sleep(REFRESH_SECONDS)

    async def refresh(self) -> None:
        now = time.time()
        if now - self._weights_at >= WEIGHTS_TTL_SECONDS:
            self._weights = {p.name: float(p.weight) for p in await list_projects(self.db)}
            self._weights_at = now
        async with self.db.read() as session:
            queue = QueueRepository(session)
            batches = await queue.active()
            running = await queue.running_shards(now)
        self._local, self._window_parts = local_weights(self._weights, running, self.owner, shared=self.shared)
        self._meter.observe(now, batches)
        rates = self._meter.rates()
        served = self.served = await self._served_rates(batches, rates, now)
        views = outlook(batches, self._weights, rates, now, self._at_risk, served, self.unknown_rate_wait)
        at_risk = at_risk_ids(views)
        self._log_changes(views, at_risk)
        self._at_risk = at_risk
        self._small = small_batch_ids(views)
        self._behind = behind_ids(views)
        counts: Counter[str] = Counter()
        for view in views:
            counts[view.model or ""] += sum(1 for b in view.batches if b.at_risk)
        metrics.set_batches_at_risk(dict(counts))

    def served_rates(self) -> dict[str | None, float]:
        """Each model's rate when it last served here (the median of its recent samples)."""
        return {model: statistics.median(samples) for model, samples in self._served_samples.items() if samples}

    async def _served_rates(
        self, batches: Iterable[BatchProgress], rates: Mapping[str, float], now: float
    ) -> dict[str | None, float]:
        """What a model serving nothing now (its engine unloaded or restarting) is projected at:
        its rate when it last served here, else its throughput in its recently finished
        batches, else in its running ones so far (their lines done since they started: a
        restarted replica's view of a model it has not served yet)."""
        batches = list(batches)
        for model, rate in model_rates(batches, rates).items():
            if rate > 0:
                self._served_samples.setdefault(model, deque(maxlen=SERVED_SAMPLES)).append(rate)
        served = self.served_rates()
        for model in {b.model for b in batches if b.runnable and b.model is not None} - set(served):
            read_at, prior = self._priors.get(model, (-PRIOR_TTL_SECONDS, None))
            if now - read_at >= PRIOR_TTL_SECONDS:
                async with self.db.read() as session:
                    prior = throughput(await QueueRepository(session).finished_runs(model, PRIOR_RUNS))
                self._priors[model] = (now, prior)
            if prior is None:
                prior = throughput(
                    (b.done, now - b.in_progress_at)
                    for b in batches
                    if b.model == model and b.runnable and b.done > 0 and b.in_progress_at is not None
                )
            if prior is not None:
                served[model] = prior
        return served

    def _log_changes(self, views: list[ProjectOutlook], at_risk: frozenset[str]) -> None:
        now = time.time()
        for view in views:
            for entry in view.batches:
                batch = entry.batch
                if batch.id in at_risk and batch.id not in self._at_risk:
                    log.warning(
                        "batch %s (project %s) at risk: projected to finish %.0f s from now, its deadline is in "
                        "%.0f s; it runs ahead of fair share until it is back on time",
                        batch.id,
                        batch.project,
                        (entry.finish_at or now) - now,
                        batch.deadline - now,
                    )
        for batch_id in self._at_risk - at_risk:
            log.info("batch %s no longer at risk", batch_id)

    def next_pick(
        self,
        candidates: Sequence[Claimable],
        here: Sequence[ShardHere],
        running: Sequence[RunningShard],
        slots: Callable[[str | None], Slots],
        waited_since: Mapping[tuple[str | None, str], float],
    ) -> Pick | None:
        """The next shard to claim here, and the shard to give back for it (admission.next_pick)."""
        return next_pick(
            candidates,
            here,
            running,
            self._weights,
            self._at_risk,
            slots,
            waited_since,
            time.time(),
            self.at_risk_max_share,
            self.owner,
        )
