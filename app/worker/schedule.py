"""This replica's view of fair share: project weights (re-read every few seconds, so `batchd
projects set` reaches every replica within seconds), recent rates and at-risk batches, refreshed
from the shared database about once a second. The engine gates ask it for weights and risk; the
worker asks it which shard to claim next, so that across replicas every project with work runs
shards in proportion to its weight and, within a project, earliest deadline first."""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter
from collections.abc import Sequence

from app.core import metrics
from app.db.engine import Database
from app.db.repositories.queue import Claimable, QueueRepository
from app.services.fair_share import ProjectOutlook, RateMeter, at_risk_ids, local_weights, outlook
from app.services.projects import list_projects

log = logging.getLogger("batchd.schedule")

REFRESH_SECONDS = 1.0
WEIGHTS_TTL_SECONDS = 3.0


class Schedule:
    def __init__(self, db: Database, owner: str) -> None:
        self.db = db
        self.owner = owner  # this replica, as it appears in shard leases
        self._weights: dict[str, float] = {}
        self._weights_at = -WEIGHTS_TTL_SECONDS
        self._meter = RateMeter()
        self._at_risk: frozenset[str] = frozenset()
        self._local: dict[str, float] = {}

    # SharePolicy, for the engine gates
    def weight(self, project: str) -> float:
        """The project's weight in this replica's gates: its configured weight, adjusted for where
        the projects' shards run (fair_share.local_weights), so its share is of the whole fleet,
        wherever its lines run."""
        return self._local.get(project) or self._weights.get(project, 1)

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
        placement: dict[str, set[str]] = {}
        for project, replica, _ in running:
            placement.setdefault(project, set()).add(replica)
        self._local = local_weights(self._weights, placement, self.owner)
        self._meter.observe(now, batches)
        views = outlook(batches, self._weights, self._meter.rates(), now, self._at_risk)
        at_risk = at_risk_ids(views)
        self._log_changes(views, at_risk)
        self._at_risk = at_risk
        counts: Counter[str] = Counter()
        for view in views:
            counts[view.model or ""] += sum(1 for b in view.batches if b.at_risk)
        metrics.set_batches_at_risk(dict(counts))

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
                        batch.expires_at - now,
                    )
        for batch_id in self._at_risk - at_risk:
            log.info("batch %s no longer at risk", batch_id)

    def claim_order(self, candidates: Sequence[Claimable], running: Sequence[tuple[str, str, int]]) -> list[Claimable]:
        """Candidates in the order to try them: at-risk batches first; then the project with the
        fewest shards running on this replica for its weight (so every replica runs every project
        and its gate can share it out), then fewest everywhere; within a project the earliest
        deadline, then the oldest batch."""
        here: Counter[str] = Counter()
        everywhere: Counter[str] = Counter()
        for project, replica, count in running:
            everywhere[project] += count
            if replica == self.owner:
                here[project] += count

        def key(c: Claimable) -> tuple:
            weight = self._weights.get(c.project, 1)
            return (
                not self.at_risk(c.batch_id),
                here[c.project] / weight,
                everywhere[c.project] / weight,
                c.expires_at,
                c.seq,
            )

        return sorted(candidates, key=key)
