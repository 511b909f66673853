"""Engines on demand: at most ``budget`` models have an engine at a time (or as many as fit
``memory_budget``); the others are loaded when their lines are due, in place of the least needed
engine (rules in :mod:`app.scheduling.residency`).

Every line runs inside :meth:`Residency.use`, which waits until its model's engine is resident
and counts it in flight meanwhile. One task makes the swaps, one at a time: it drains the
engine to unload (its new lines wait, those in flight finish), unloads it (its core process
exits, its memory is returned) and only then loads the needed one, so no more than ``budget``
engine cores are ever alive. With a memory budget, a model whose engine fits beside the loaded
ones loads at once, while they finish their lines (nothing is unloaded); one that does not fit
waits for as many engines to be unloaded, one swap each, as make room, so the resident engines'
memory needs never add up to more than the budget. Lines are never dropped: those that wait run
once their engine is back, and a crash meanwhile leaves their shards unrecorded, to run again
after a restart. Imports no vLLM: loading and unloading are the registry's callables.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass, field

from app.core import metrics
from app.engine.errors import EngineUnavailableError
from app.scheduling.residency import ModelDemand, Swap, SwapReason, Urgency, fits, plan_swap

log = logging.getLogger("batchd.engine")

# After a failed load, the next attempt waits this long (its lines keep waiting).
LOAD_RETRY_SECONDS = 5.0


@dataclass
class _Model:
    always: bool
    memory: int = 0  # bytes its engine takes (counted against a memory budget)
    resident: bool = False
    since: float = 0.0
    draining: bool = False  # chosen to unload: new lines wait, those in flight finish
    last_load: float | None = None  # when it was last loaded on demand (monotonic)
    idle_since: float = 0.0  # when its last line ended, or it became resident (monotonic)
    waiting_since: float | None = None  # when its waiting lines began waiting (monotonic)
    in_flight: Counter[Urgency] = field(default_factory=Counter)
    waiting: Counter[Urgency] = field(default_factory=Counter)

    @property
    def usable(self) -> bool:
        return self.resident and not self.draining

    def demand(self, name: str) -> ModelDemand:
        urgencies = [u for u, n in (self.in_flight + self.waiting).items() if n > 0]
        # A batch's lines speak for the model; single-request lanes' only when they are alone.
        ranked = [u for u in urgencies if not u.single] or urgencies
        return ModelDemand(
            name,
            self.resident,
            self.since,
            sum(self.in_flight.values()),
            sum(self.waiting.values()),
            min(ranked, default=Urgency()),
            self.always,
            self.last_load,
            # Each batch's at-risk state now, by its id (the scheduler's projection): not as it
            # was when its lines were granted.
            any(u.at_risk() for u in ranked),
            self.memory,
            self.idle_since,
            self.waiting_since,
        )


class Residency:
    """Which engines are loaded, and the swaps that load the ones lines wait for."""

    def __init__(
        self,
        always: Mapping[str, bool],
        budget: int | None,
        min_residency: float,
        load: Callable[[str], Awaitable[None]],
        unload: Callable[[str], Awaitable[None]],
        min_load_interval: float = 0.0,
        memory: Mapping[str, int] | None = None,
        memory_budget: int | None = None,
        drain_grace: float = 0.0,
    ) -> None:
        self.budget = budget
        self.drain_grace = drain_grace  # seconds an idle engine stays idle before it counts as drained
        self.memory_budget = memory_budget  # bytes; None: only the count limits
        self.min_residency = min_residency
        self.min_load_interval = min_load_interval
        needs = memory or {}
        self._models = {name: _Model(always=flag, memory=needs.get(name, 0)) for name, flag in always.items()}
        self._load = load
        self._unload = unload
        self._changed = asyncio.Condition()
        self._kick = asyncio.Event()
        self._closed = False
        self._task: asyncio.Task | None = None
        self.swapping: str | None = None  # the model being loaded, for status pages
        self._none_loaded_since: float | None = None  # monotonic; while no engine is loaded

    def start(self, resident: list[str]) -> None:
        """Begin with ``resident`` loaded (the registry started them) and make swaps from now on."""
        now = time.monotonic()
        for name, model in self._models.items():
            model.resident, model.since, model.idle_since = name in resident, now, now
            metrics.set_engine_resident(name, model.resident)
        self._task = asyncio.create_task(self._swap_forever(), name="batchd-engine-residency")

    def resident(self, model: str) -> bool:
        state = self._models.get(model)
        return state is not None and state.resident

    def demands(self) -> list[ModelDemand]:
        return [model.demand(name) for name, model in self._models.items()]

    @asynccontextmanager
    async def use(self, model: str, urgency: Urgency) -> AsyncIterator[None]:
        """Hold ``model``'s engine for one line: wait until it is resident, keep it from being
        unloaded until the line is done. Raises
        :class:`~app.engine.errors.EngineUnavailableError` if it is not resident by the line's
        ``start_by`` (a flex request's wait)."""
        state = self._models[model]
        if not state.usable:
            if not state.waiting:
                state.waiting_since = time.monotonic()
            state.waiting[urgency] += 1
            self._kick.set()
            try:
                timeout = None if math.isinf(urgency.start_by) else max(0.0, urgency.start_by - time.time())
                async with self._changed:
                    await asyncio.wait_for(self._changed.wait_for(lambda: state.usable or self._closed), timeout)
            except TimeoutError:
                raise EngineUnavailableError(model, "its engine is not loaded (another model's is busy)") from None
            finally:
                state.waiting[urgency] -= 1
                state.waiting += Counter()  # drop zero counts
                if not state.waiting:
                    state.waiting_since = None
        state.in_flight[urgency] += 1
        try:
            yield
        finally:
            state.in_flight[urgency] -= 1
            state.in_flight += Counter()
            if not state.in_flight:
                state.idle_since = time.monotonic()
                await self._notify()
            self._kick.set()

    async def close(self) -> None:
        """Make no more swaps; waiting lines go on (to the registry's shut-down error)."""
        self._closed = True
        if self._task is not None:
            self._task.cancel()
            with suppress(asyncio.CancelledError):
                await self._task
        await self._notify()

    async def _notify(self) -> None:
        async with self._changed:
            self._changed.notify_all()

    async def _swap_forever(self) -> None:
        while not self._closed:
            await self._kick.wait()
            self._kick.clear()
            try:
                swap = plan_swap(
                    self.demands(),
                    self.budget,
                    time.monotonic(),
                    self.min_residency,
                    self.min_load_interval,
                    self.memory_budget,
                    self.drain_grace,
                )
                if swap is None:
                    # A busy engine's turn may end later with no line finishing meanwhile: look again.
                    if any(d.waiting and not d.resident for d in self.demands()):
                        asyncio.get_running_loop().call_later(1.0, self._kick.set)
                    continue
                self._log_plan(swap)
                metrics.record_engine_swap(swap.reason)
                if swap.unload is not None:
                    await self._unload_engine(swap.unload, swap.reason)
                # With a memory budget more engines may have to go first: the next plan picks the next.
                if self._fits(swap.load):
                    await self._load_engine(swap.load)
            except asyncio.CancelledError:
                raise
            except Exception:  # noqa: BLE001 - its lines keep waiting; try again shortly
                log.exception("engine swap failed; trying again in %.0f s", LOAD_RETRY_SECONDS)
                await asyncio.sleep(LOAD_RETRY_SECONDS)
            self._kick.set()  # more may wait

    def _fits(self, model: str) -> bool:
        demands = self.demands()
        resident = [d for d in demands if d.resident]
        return fits(resident, next(d for d in demands if d.model == model), self.budget, self.memory_budget)

    def _log_plan(self, swap: Swap) -> None:
        """Say what the plan is and why (the reason is also ``batchd_engine_swaps_total``'s)."""
        demands = {d.model: d for d in self.demands()}
        wanting = demands[swap.load]
        why = {
            SwapReason.ROOM: "there is room for it",
            SwapReason.DRAINED: "the engine in its place has no line left",
            SwapReason.AT_RISK: "its work is at risk of missing its deadline and the busy engine's is not",
            SwapReason.DUE_EARLIER: "its work is at risk and due before the busy engine's (at risk too)",
            SwapReason.TURN: "both have work at risk due together and the busy engine's turn is over",
        }[swap.reason]
        if swap.unload is None:
            log.info("engine for %s: loading it for %d waiting lines (%s)", swap.load, wanting.waiting, why)
            return
        gone = demands[swap.unload]
        log.info(
            "engine for %s: loading it for %d waiting lines in place of %s's (%d lines in flight, %d waiting) "
            "(reason %s: %s)",
            swap.load,
            wanting.waiting,
            swap.unload,
            gone.in_flight,
            gone.waiting,
            swap.reason,
            why,
        )

    async def _unload_engine(self, name: str, reason: SwapReason) -> None:
        model = self._models[name]
        model.draining = True
        log.info(
            "engine for %s: unloading it for another model (%d lines in flight finish first)",
            name,
            sum(model.in_flight.values()),
        )
        try:
            async with self._changed:
                await self._changed.wait_for(lambda: not model.in_flight)
            await self._unload(name)
            model.resident = False
            metrics.set_engine_resident(name, False)
            metrics.record_engine_unload(name, reason)
            if not any(m.resident for m in self._models.values()):
                self._none_loaded_since = time.monotonic()
        finally:
            model.draining = False
        await self._notify()

    async def _load_engine(self, name: str) -> None:
        model = self._models[name]
        self.swapping = name
        started = time.monotonic()
        try:
            await self._load(name)
        finally:
            self.swapping = None
        model.resident, model.since = True, time.monotonic()
        model.idle_since = model.since
        model.last_load = model.since
        if self._none_loaded_since is not None:
            metrics.add_no_engine_loaded_seconds(model.since - self._none_loaded_since)
            self._none_loaded_since = None
        seconds = model.since - started
        metrics.record_engine_load(name, seconds)
        metrics.set_engine_resident(name, True)
        log.info("engine for %s: loaded on demand in %.1f s", name, seconds)
        await self._notify()
