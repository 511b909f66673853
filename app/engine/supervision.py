"""Keeps an in-process engine serving: an engine whose core process died is restarted with
backoff, and a line that keeps killing it is quarantined.

vLLM's ``AsyncLLM`` runs its engine core in a child process; once that process dies (a CUDA
error, the OOM killer, a segfault) the ``AsyncLLM`` is dead for good. :class:`EngineSupervisor`
notices (a line that met the dead engine says so at once, a poll finds an idle one), stops the
dead engine and starts a new one; lines wait meanwhile and run again on the new engine (see
:meth:`app.engine.local.registry.EngineRegistry.execute`). Up to ``max_restarts`` restarts within
the window come quickly; after that the supervisor backs off (each wait twice the one before, at
most ``max_backoff_seconds``) but never stops: the model serves again once what killed it is gone.

The lines in flight at a death are suspects (:mod:`app.engine.poison`): they run again one at a
time, and one in flight at a second death fails with ``engine_crashed`` and never runs again.
Imports no vLLM: the engine is whatever the ``start`` and ``stop`` callables give and take.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import time
from collections.abc import Awaitable, Callable, Hashable
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from typing import Generic, Protocol, TypeVar

from app.core import metrics
from app.core.config import Settings
from app.engine.errors import EngineCrashedError, EngineDeadError, EngineNotReadyError, EngineUnavailableError
from app.engine.poison import LINE_KEY, Suspects, new_life

log = logging.getLogger("batchd.engine")

# How often an idle engine is checked for a dead core (a line in flight notices at once).
POLL_SECONDS = 0.5
# The longest wait between two restarts within the burst (max_restarts within the window).
MAX_BACKOFF_SECONDS = 60.0
RESTARTING = "its engine is restarting"


@dataclass(frozen=True)
class RestartPolicy:
    """How often an engine is restarted: ``max_restarts`` within ``window_seconds`` quickly, the
    first after ``backoff_seconds``, each further one after twice the wait before (at most a
    minute); any more in the window back off further, to at most ``max_backoff_seconds``."""

    max_restarts: int = 3
    window_seconds: float = 600.0
    backoff_seconds: float = 1.0
    max_backoff_seconds: float = 300.0

    @classmethod
    def from_settings(cls, settings: Settings) -> RestartPolicy:
        return cls(
            settings.engine_max_restarts,
            settings.engine_restart_window_seconds,
            settings.engine_restart_backoff_seconds,
            settings.engine_restart_max_backoff_seconds,
        )

    def backoff(self, restart: int) -> float:
        """The wait before the ``restart``-th restart of a window (1-based)."""
        cap = MAX_BACKOFF_SECONDS if restart <= self.max_restarts else self.max_backoff_seconds
        return min(cap, self.backoff_seconds * 2 ** min(restart - 1, 64))


class SupervisedEngine(Protocol):
    @property
    def errored(self) -> bool:
        """True once the engine can run no more lines."""
        ...

    def exit_cause(self) -> str:
        """How its core process ended, for the log (exit code or signal)."""
        ...


E = TypeVar("E", bound=SupervisedEngine)
T = TypeVar("T")


class Supervision(StrEnum):
    SERVING = "serving"
    RESTARTING = "restarting"
    BACKING_OFF = "backing off"  # died more often than the burst allows: the next restart waits longer
    CLOSED = "closed"


class EngineSupervisor(Generic[E]):
    """One model's engine: the current one, and a new one whenever it dies."""

    def __init__(
        self,
        model: str,
        engine: E,
        policy: RestartPolicy,
        start: Callable[[], Awaitable[E]],
        stop: Callable[[E], Awaitable[None]],
        suspects: Suspects | None = None,
    ) -> None:
        self.model = model
        self.engine = engine
        self.policy = policy
        self._start = start
        self._stop = stop
        # The model's suspect lines: the registry's, so they outlive an engine unloaded on demand.
        self.suspects = suspects or Suspects(model)
        self._life = new_life()  # the current engine's
        self._probation = asyncio.Lock()  # one suspect line in flight at a time
        self.state = Supervision.SERVING
        self._problem: str | None = None
        self.next_restart_at: float | None = None  # epoch seconds, while backing off
        self._settled = asyncio.Event()  # set while serving, or closed
        self._settled.set()
        self._deaths: list[float] = []  # monotonic times of the deaths and failed starts in the window
        self._restart: asyncio.Task | None = None
        self._watch = asyncio.create_task(self._watch_engine(), name=f"batchd-engine-watch-{model}")

    @property
    def problem(self) -> str | None:
        """Why the model takes no lines now (for ``/health``), or None while it serves."""
        if self.state is Supervision.SERVING:
            return RESTARTING if self.engine.errored else None  # dead: about to restart
        if self.state is Supervision.BACKING_OFF and self.next_restart_at is not None:
            at = datetime.fromtimestamp(self.next_restart_at, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
            wait = max(0, math.ceil(self.next_restart_at - time.time()))
            return f"{self._problem}; backing off: next restart at {at} (in {wait} s)"
        return self._problem

    @property
    def serving(self) -> bool:
        """True while the current engine takes lines (its death may not be noticed yet)."""
        return self.state is Supervision.SERVING and not self.engine.errored

    async def run(self, call: Callable[[E], Awaitable[T]], start_by: float = math.inf) -> T:
        """``call`` on the serving engine; if that engine dies meanwhile (``call`` raises
        EngineDeadError), once more on the engine that replaces it, and so on. The line is
        :data:`~app.engine.poison.LINE_KEY` (else this call): once it was in flight at a death it
        runs alone among suspects, and at a second death it raises
        :class:`~app.engine.errors.EngineCrashedError` (and does on any later call).
        Raises :class:`~app.engine.errors.EngineUnavailableError` if no engine serves by
        ``start_by`` (epoch seconds) for the line to (re)start on."""
        key: Hashable = LINE_KEY.get() or object()
        while True:
            if self.suspects.quarantined(key):
                raise EngineCrashedError(self.model, self.suspects.deaths(key))
            suspect = self.suspects.suspected(key)
            async with self._probation if suspect else contextlib.nullcontext():
                engine = self.engine if self.serving else await self.wait_serving(start_by)
                life = self._life
                try:
                    result = await call(engine)
                except EngineDeadError:
                    if self.state is Supervision.CLOSED:
                        raise
                    self.notice_death(engine)
                    if self.suspects.record(key, life) > 1:
                        log.error(
                            "engine for %s: a line (%s) was in flight at %d of its deaths: it fails with "
                            "engine_crashed and is not run again",
                            self.model,
                            _line_name(key),
                            self.suspects.deaths(key),
                        )
                    continue
            if suspect:
                self.suspects.clear(key)
            return result

    async def wait_serving(self, start_by: float = math.inf) -> E:
        """The engine to run a line on, once one serves. Raises
        :class:`~app.engine.errors.EngineUnavailableError` if none does by ``start_by`` (epoch
        seconds), and :class:`~app.engine.errors.EngineNotReadyError` after :meth:`close`."""
        while True:
            if self.serving:
                return self.engine
            if self.state is Supervision.SERVING:  # dead, not yet noticed
                self.notice_death(self.engine)
            try:
                timeout = None if math.isinf(start_by) else max(0.0, start_by - time.time())
                await asyncio.wait_for(self._settled.wait(), timeout)
            except TimeoutError:
                raise EngineUnavailableError(self.model, self.problem or RESTARTING) from None
            if self.state is Supervision.CLOSED:
                raise EngineNotReadyError("The engines were shut down.")

    def notice_death(self, engine: E) -> None:
        """``engine`` was found dead: restart it, unless that is already under way (or done)."""
        if engine is not self.engine or self.state is not Supervision.SERVING:
            return
        self.state = Supervision.RESTARTING
        self._problem = RESTARTING
        self._settled.clear()
        self._restart = asyncio.create_task(self._restart_engine(engine), name=f"batchd-engine-restart-{self.model}")

    async def close(self) -> None:
        """Stop watching and restarting; waiting lines get EngineNotReadyError."""
        self.state = Supervision.CLOSED
        self._settled.set()
        for task in (self._watch, self._restart):
            if task is not None:
                task.cancel()
        await asyncio.gather(*(t for t in (self._watch, self._restart) if t is not None), return_exceptions=True)

    async def _watch_engine(self) -> None:
        while self.state is not Supervision.CLOSED:
            if self.state is Supervision.SERVING and self.engine.errored:
                self.notice_death(self.engine)
            await asyncio.sleep(POLL_SECONDS)

    async def _restart_engine(self, dead: E) -> None:
        cause = f"its engine core {dead.exit_cause()}"
        await self._stop(dead)
        while True:
            now = time.monotonic()
            self._deaths = [at for at in self._deaths if now - at < self.policy.window_seconds] + [now]
            restart = len(self._deaths)
            delay = self.policy.backoff(restart)
            if restart > self.policy.max_restarts:
                self._back_off(cause, delay)
            else:
                log.warning(
                    "engine for %s: %s; restarting it in %.1f s (restart %d of at most %d within %.0f s)",
                    self.model,
                    cause,
                    delay,
                    restart,
                    self.policy.max_restarts,
                    self.policy.window_seconds,
                )
            metrics.record_engine_restart(self.model)
            await asyncio.sleep(delay)
            self.state, self._problem, self.next_restart_at = Supervision.RESTARTING, RESTARTING, None
            try:
                engine = await self._start()
            except Exception as exc:  # noqa: BLE001 - a failed start counts as one more death
                log.exception("engine for %s: the restart failed", self.model)
                cause = f"its restart failed ({type(exc).__name__}: {exc})"
                continue
            self.engine, self._life = engine, new_life()
            self.state, self._problem, self.next_restart_at = Supervision.SERVING, None, None
            self._settled.set()
            log.warning("engine for %s: restarted; its lines run again", self.model)
            return

    def _back_off(self, cause: str, delay: float) -> None:
        """More deaths within the window than the burst allows: the next restart waits longer (a
        crash-looping engine stops taking the machine's time), but it comes; lines wait."""
        deaths = len(self._deaths)
        self.state = Supervision.BACKING_OFF
        self.next_restart_at = time.time() + delay
        self._problem = (
            f"its engine died {deaths} times within {self.policy.window_seconds:.0f} s "
            f"(more than BATCHD_ENGINE_MAX_RESTARTS={self.policy.max_restarts} restarts)"
        )
        log.error("engine for %s: %s; last: %s. Restarting it in %.1f s", self.model, self._problem, cause, delay)


def _line_name(key: Hashable) -> str:
    """A line key for the log: ``batch_id`` line ``n``."""
    if isinstance(key, tuple) and len(key) == 2:
        return f"{key[0]} line {key[1]}"
    return "a request"
