"""One upstream URL's state, and the choice of URL for each request.

Each URL has a concurrency window (AIMD, as TCP's congestion window): it starts at the
configured maximum, halves on a 429 or a timeout (at most once per second, so one burst of
rejections counts once) and grows back by one per window's worth of successes. A URL whose
requests keep failing to connect (or answer 502/503/504) leaves the rotation for a cooldown
that doubles while its health probes fail; a successful probe brings it back.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections import deque
from collections.abc import Sequence
from contextlib import suppress
from typing import Literal

from app.core.statuses import UpstreamState

log = logging.getLogger("batchd.upstream")

# Whether lines to a URL carry vLLM's ``priority``: "off" (not configured), "on", or
# "unsupported" (the server answered that priority scheduling is not enabled).
PriorityState = Literal["off", "on", "unsupported"]

# Consecutive failures after which a URL leaves the rotation.
FAILURES_TO_EJECT = 3
FIRST_COOLDOWN_S = 1.0
# The window halves at most this often: the rejections of one burst arrive together.
DECREASE_EVERY_S = 1.0
# A window that has not shrunk for this long is given its full size back at the next probe:
# growth by successes alone never happens on a URL that gets little traffic.
RESTORE_AFTER_S = 10.0


class Target:
    """One upstream URL (ending in ``/v1``) of one model."""

    __slots__ = (
        "url",
        "max_window",
        "window",
        "outstanding",
        "state",
        "failures",
        "cooldown",
        "down_until",
        "max_cooldown",
        "priority",
        "adapters",
        "_priority_configured",
        "_last_decrease",
    )

    def __init__(self, url: str, max_window: int, max_cooldown: float, priority: bool = False) -> None:
        self.url = url
        self.max_window = max_window
        self.window = float(max_window)
        self.outstanding = 0
        self.state = UpstreamState.DOWN
        self.failures = 0
        self.cooldown = FIRST_COOLDOWN_S
        self.max_cooldown = max(FIRST_COOLDOWN_S, max_cooldown)
        self.down_until = 0.0
        self._priority_configured = priority
        self.priority: PriorityState = "on" if priority else "off"
        # The ids of the LoRA adapters its last probe listed on the model (discovery.read_models).
        self.adapters: frozenset[str] = frozenset()
        self._last_decrease = 0.0

    @property
    def in_rotation(self) -> bool:
        return self.state == UpstreamState.UP

    def has_room(self) -> bool:
        return self.outstanding < int(self.window)

    @property
    def sends_priority(self) -> bool:
        return self.priority == "on"

    def refuses_priority(self, model: str) -> None:
        """The URL answered that priority scheduling is not enabled: its lines go without
        ``priority`` until it comes back into the rotation (it may restart with it on)."""
        if self.priority == "on":
            log.warning(
                "upstream %s (%s) does not schedule by priority (start it with --scheduling-policy "
                "priority); its batch lines go without a priority and compete with online traffic",
                self.url,
                model,
            )
        self.priority = "unsupported"

    def status(self) -> dict:
        return {
            "state": self.state,
            "window": int(self.window),
            "outstanding": self.outstanding,
            "priority": self.priority,
        }


class TargetPool:
    """The URLs of one model. :meth:`acquire` picks the URL in rotation with the fewest
    outstanding requests and room in its window, waiting (FIFO) while none has room."""

    def __init__(self, model: str, targets: Sequence[Target]) -> None:
        self.model = model
        self.targets = list(targets)
        # Callers waiting for a slot, first come first served, each with its deadline (inf: none).
        self._waiters: deque[tuple[asyncio.Future, float]] = deque()
        # One timer for every waiter's deadline, due at the earliest it was set for (a timer per
        # waiting line was a cost per line: with the worker's surplus every line waits here).
        self._expiry: asyncio.TimerHandle | None = None
        self._expiry_at = math.inf

    @property
    def any_up(self) -> bool:
        return any(t.in_rotation for t in self.targets)

    def capacity(self) -> int:
        return sum(t.max_window for t in self.targets)

    def try_acquire(self) -> Target | None:
        """A URL with a slot reserved for the caller if one is free now and nobody queues before
        it, without an await (the common case); else None: wait in :meth:`acquire`."""
        if self._waiters:
            return None
        target = self._pick()
        if target is not None:
            target.outstanding += 1
        return target

    async def acquire(self, deadline: float = math.inf) -> Target:
        """A URL with a slot reserved for the caller; give it back with :meth:`release`.
        Raises TimeoutError if none is free by ``deadline`` (``time.monotonic()``)."""
        target = self.try_acquire()
        if target is not None:
            return target
        loop = asyncio.get_running_loop()
        woken_before = False
        while True:
            future = loop.create_future()
            waiter = (future, deadline)
            # Woken but no room after all: keep our turn at the front.
            (self._waiters.appendleft if woken_before else self._waiters.append)(waiter)
            if deadline < self._expiry_at:
                self._expire_at(loop, deadline)
            try:
                await future
            except asyncio.CancelledError:
                if future.done() and not future.cancelled():
                    if future.exception() is None:
                        self._wake()  # pass the wake-up on: we will not use it
                    # else its deadline passed meanwhile: _expire took it out of the queue
                else:
                    with suppress(ValueError):  # a release may have dropped it (cancelled) already
                        self._waiters.remove(waiter)
                raise
            target = self._pick()
            if target is not None:
                target.outstanding += 1
                if self._waiters and self._pick() is not None:
                    # Room is left (a window grew, a URL came back): chain on. Only then: a
                    # waiter woken with no room re-queues, a wasted wake-up per line (W8).
                    self._wake()
                return target
            woken_before = True

    def release(self, target: Target) -> None:
        target.outstanding -= 1
        self._wake()

    def _pick(self) -> Target | None:
        best, up = None, UpstreamState.UP
        for target in self.targets:
            outstanding = target.outstanding
            if (
                target.state == up
                and outstanding < int(target.window)
                and (best is None or outstanding < best.outstanding)
            ):
                best = target
        return best

    def _wake(self) -> None:
        while self._waiters:
            future, _ = self._waiters.popleft()
            if not future.done():
                future.set_result(None)
                return

    def _expire_at(self, loop: asyncio.AbstractEventLoop, deadline: float) -> None:
        if self._expiry is not None:
            self._expiry.cancel()
        self._expiry_at = deadline
        self._expiry = loop.call_later(max(deadline - time.monotonic(), 0.0), self._expire, loop)

    def _expire(self, loop: asyncio.AbstractEventLoop) -> None:
        """The earliest deadline is due: fail every waiter whose deadline passed (TimeoutError),
        and set the timer for the earliest of the others."""
        self._expiry, self._expiry_at = None, math.inf
        now, kept = time.monotonic(), deque[tuple[asyncio.Future, float]]()
        for waiter in self._waiters:
            future, deadline = waiter
            if future.done():
                continue
            if deadline <= now:
                future.set_exception(TimeoutError())
            else:
                kept.append(waiter)
        self._waiters = kept
        earliest = min((deadline for _, deadline in kept), default=math.inf)
        if earliest < math.inf:
            self._expire_at(loop, earliest)

    # -- what happened to a request ----------------------------------------

    def succeeded(self, target: Target) -> None:
        target.failures = 0
        if target.window < target.max_window:
            target.window = min(target.max_window, target.window + 1.0 / target.window)

    def overloaded(self, target: Target) -> None:
        """A 429 or a timeout: the URL has more than it can take; halve its window."""
        now = time.monotonic()
        if now - target._last_decrease >= DECREASE_EVERY_S and target.window > 1:
            target._last_decrease = now
            target.window = max(1.0, target.window / 2)
            log.info("upstream %s (%s): window down to %d", target.url, self.model, int(target.window))

    def failed(self, target: Target, why: str) -> None:
        """A connection failure or a 502/503/504; several in a row take the URL out."""
        target.failures += 1
        if target.failures >= FAILURES_TO_EJECT and target.in_rotation:
            self.set_state(target, UpstreamState.DOWN, why)

    def set_state(self, target: Target, state: UpstreamState, why: str = "") -> None:
        """Discovery's verdict, or an ejection; a URL out of rotation is probed after its cooldown."""
        if state == target.state:
            if (
                state == UpstreamState.UP
                and target.window < target.max_window
                and (time.monotonic() - target._last_decrease >= RESTORE_AFTER_S)
            ):
                target.window = float(target.max_window)
            elif state != UpstreamState.UP:  # still failing: wait longer before the next probe
                target.cooldown = min(target.max_cooldown, target.cooldown * 2)
                target.down_until = time.monotonic() + target.cooldown
            return
        previous, target.state = target.state, state
        if state == UpstreamState.UP:
            target.failures = 0
            target.cooldown = FIRST_COOLDOWN_S
            if target._priority_configured:
                target.priority = "on"
            log.warning("upstream %s (%s) is in the rotation", target.url, self.model)
            self._wake()
        else:
            target.down_until = time.monotonic() + target.cooldown
            level = logging.WARNING if previous == UpstreamState.UP else logging.INFO
            log.log(level, "upstream %s (%s) left the rotation (%s): %s", target.url, self.model, state, why)
