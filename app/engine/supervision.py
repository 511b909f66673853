"""Keeps an in-process engine serving: an engine whose core process died is restarted with
backoff, and after too many deaths within a window it is left down with the reason said.

vLLM's ``AsyncLLM`` runs its engine core in a child process; once that process dies (a CUDA
error, the OOM killer, a segfault) the ``AsyncLLM`` is dead for good. :class:`EngineSupervisor`
notices (a line that met the dead engine says so at once, a poll finds an idle one), stops the
dead engine and starts a new one; lines wait meanwhile and run again on the new engine (see
:meth:`app.engine.local.registry.EngineRegistry.execute`). Imports no vLLM: the engine is
whatever the ``start`` and ``stop`` callables give and take.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import Generic, Protocol, TypeVar

from app.core import metrics
from app.core.config import Settings
from app.engine.errors import EngineDeadError, EngineNotReadyError, EngineUnavailableError

log = logging.getLogger("batchd.engine")

# How often an idle engine is checked for a dead core (a line in flight notices at once).
POLL_SECONDS = 0.5
# The longest wait between two restarts, however many came before.
MAX_BACKOFF_SECONDS = 60.0
RESTARTING = "its engine is restarting"


@dataclass(frozen=True)
class RestartPolicy:
    """How often an engine is restarted: at most ``max_restarts`` within ``window_seconds``, the
    first after ``backoff_seconds``, each further one after twice the wait before."""

    max_restarts: int = 3
    window_seconds: float = 600.0
    backoff_seconds: float = 1.0

    @classmethod
    def from_settings(cls, settings: Settings) -> RestartPolicy:
        return cls(
            settings.engine_max_restarts,
            settings.engine_restart_window_seconds,
            settings.engine_restart_backoff_seconds,
        )

    def backoff(self, restart: int) -> float:
        """The wait before the ``restart``-th restart of a window (1-based)."""
        return min(MAX_BACKOFF_SECONDS, self.backoff_seconds * 2 ** (restart - 1))


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
    GAVE_UP = "gave up"
    CLOSED = "closed"


class EngineSupervisor(Generic[E]):
    """One model's engine: the current one, and a new one whenever it dies (within the policy)."""

    def __init__(
        self,
        model: str,
        engine: E,
        policy: RestartPolicy,
        start: Callable[[], Awaitable[E]],
        stop: Callable[[E], Awaitable[None]],
    ) -> None:
        self.model = model
        self.engine = engine
        self.policy = policy
        self._start = start
        self._stop = stop
        self.state = Supervision.SERVING
        self._problem: str | None = None
        self._settled = asyncio.Event()  # set while serving, once given up, or closed
        self._settled.set()
        self._deaths: list[float] = []  # monotonic times of the deaths and failed starts in the window
        self._restart: asyncio.Task | None = None
        self._watch = asyncio.create_task(self._watch_engine(), name=f"batchd-engine-watch-{model}")

    @property
    def problem(self) -> str | None:
        """Why the model takes no lines now (for ``/health``), or None while it serves."""
        if self.state is Supervision.SERVING:
            return RESTARTING if self.engine.errored else None  # dead: about to restart
        return self._problem

    @property
    def serving(self) -> bool:
        """True while the current engine takes lines (its death may not be noticed yet)."""
        return self.state is Supervision.SERVING and not self.engine.errored

    async def run(self, call: Callable[[E], Awaitable[T]]) -> T:
        """``call`` on the serving engine; if that engine dies meanwhile (``call`` raises
        EngineDeadError), once more on the engine that replaces it, and so on within the policy.
        Raises :class:`~app.engine.errors.EngineUnavailableError` once restarts were given up."""
        while True:
            engine = self.engine if self.serving else await self.wait_serving()
            try:
                return await call(engine)
            except EngineDeadError:
                if self.state is Supervision.CLOSED:
                    raise
                self.notice_death(engine)

    async def wait_serving(self) -> E:
        """The engine to run a line on, once one serves. Raises
        :class:`~app.engine.errors.EngineUnavailableError` once restarts were given up, and
        :class:`~app.engine.errors.EngineNotReadyError` after :meth:`close`."""
        while True:
            if self.serving:
                return self.engine
            if self.state is Supervision.SERVING:  # dead, not yet noticed
                self.notice_death(self.engine)
            await self._settled.wait()
            if self.state is Supervision.GAVE_UP:
                raise EngineUnavailableError(self.model, self.problem or "")
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
            if restart > self.policy.max_restarts:
                self._give_up(cause)
                return
            delay = self.policy.backoff(restart)
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
            try:
                engine = await self._start()
            except Exception as exc:  # noqa: BLE001 - a failed start counts as one more death
                log.exception("engine for %s: the restart failed", self.model)
                cause = f"its restart failed ({type(exc).__name__}: {exc})"
                continue
            self.engine, self.state, self._problem = engine, Supervision.SERVING, None
            self._settled.set()
            log.warning("engine for %s: restarted; its lines run again", self.model)
            return

    def _give_up(self, cause: str) -> None:
        self.state = Supervision.GAVE_UP
        self._problem = (
            f"its engine died {len(self._deaths)} time{'s' if len(self._deaths) > 1 else ''} within {self.policy.window_seconds:.0f} s "
            f"(at most {self.policy.max_restarts} restarts: BATCHD_ENGINE_MAX_RESTARTS); not restarted "
            "again until batchd restarts"
        )
        self._settled.set()
        log.error(
            "engine for %s: %s; last: %s. Its lines fail with engine_unavailable", self.model, self.problem, cause
        )
