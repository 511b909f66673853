"""Swapped-out engines that sleep instead of shutting down, where the hardware supports it
(engines on demand, #58).

On CUDA, vLLM's sleep mode (level 1) offloads an engine's weights to host memory and frees its
KV cache: the engine core stays alive and wakes in seconds, not a model load. Elsewhere (CPU)
an engine cannot sleep and a swap shuts it down as before. Which path a model takes is decided
once, at start, by what its engine says it can do (``can_sleep``).

:class:`SleepOrRestart` gives the residency manager (:class:`~app.engine.local.residency.Residency`)
its ``load`` and ``unload``: unloading a model that can sleep puts it to sleep (or, if that
fails, shuts it down); loading a sleeping one wakes it and runs a test generation, and if the
wake fails or the engine does not answer in time, shuts it down and starts it afresh (the
restart is the fallback: its lines keep waiting meanwhile and run once, on the new engine).
Imports no vLLM: the engine operations are the registry's callables.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

log = logging.getLogger("batchd.engine")

# A woken engine must answer its test generation within this long, else it is restarted.
WAKE_PROBE_SECONDS = 60.0

Op = Callable[[str], Awaitable[None]]


class SleepOrRestart:
    """The residency manager's load and unload for engines that may sleep.

    ``start`` loads an engine (a full start), ``stop`` shuts one down; ``sleep``, ``wake`` and
    ``probe`` (a test generation on the woken engine) act on a running engine; ``can_sleep``
    says whether a model's engine can (read once per model, at its first swap-out)."""

    def __init__(
        self,
        *,
        start: Op,
        stop: Op,
        sleep: Op,
        wake: Op,
        probe: Op,
        can_sleep: Callable[[str], bool],
        probe_seconds: float = WAKE_PROBE_SECONDS,
    ) -> None:
        self._start, self._stop = start, stop
        self._sleep, self._wake, self._probe = sleep, wake, probe
        self._can_sleep = can_sleep
        self._probe_seconds = probe_seconds
        self._capable: dict[str, bool] = {}
        self.asleep: set[str] = set()  # models whose engine sleeps (alive, weights offloaded)

    def sleeps(self, model: str) -> bool:
        """Whether ``model``'s engine sleeps when swapped out (decided once per model)."""
        if model not in self._capable:
            self._capable[model] = self._can_sleep(model)
        return self._capable[model]

    async def unload(self, model: str) -> None:
        if not self.sleeps(model):
            await self._stop(model)
            return
        try:
            await self._sleep(model)
        except Exception:  # noqa: BLE001 - the shutdown below frees its memory anyway
            log.exception("engine for %s: sleep failed; shutting it down instead", model)
            await self._stop(model)
            return
        self.asleep.add(model)
        log.info("engine for %s: asleep (weights offloaded to host memory)", model)

    async def load(self, model: str) -> None:
        if model not in self.asleep:
            await self._start(model)
            return
        self.asleep.discard(model)
        try:
            await self._wake(model)
            await asyncio.wait_for(self._probe(model), self._probe_seconds)
        except Exception as exc:  # noqa: BLE001 - a fresh start is the fallback
            log.warning("engine for %s: waking it failed (%r); restarting it", model, exc)
            await self._stop(model)
            await self._start(model)
            return
        log.info("engine for %s: awake, its test generation answered", model)


__all__ = ["WAKE_PROBE_SECONDS", "SleepOrRestart"]
