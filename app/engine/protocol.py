"""The one interface between batchd and whatever runs its lines: :class:`Engines`.

Every flavour implements it — the in-process vLLM engines (:mod:`app.engine.local`), the
upstream fleets (:mod:`app.engine.upstream`), both side by side
(:mod:`app.engine.multiplexer`) and a process that runs none (:mod:`app.engine.boot`) — and
the API, the worker, the line pipeline and ``batchd run-batch`` type against it, never
against a class. Importing this module loads no vLLM.

The line pipeline needs only part of it: :class:`LineChecker` at validation and
:class:`LineRunner` while running lines. Both are facets of :class:`Engines`, declared here
so the pipeline's needs and the engines' offer are written down once.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from app.core.statuses import EngineState
from app.engine.results import LineProblem, LineResult
from app.scheduling.residency import NO_DEADLINE, Urgency

# What `status` reports: URL -> its state, window and outstanding requests, by model.
UpstreamStatus = dict[str, dict[str, dict[str, Any]]]


class LineChecker(Protocol):
    """Validation's view of the engines: the model-specific checks of one line."""

    def validate_line(self, endpoint: str, body: Any) -> LineProblem | None:
        """Why a line would be refused (model not served, endpoint it cannot serve,
        streaming, a body its endpoint's schema rejects), or None; cheap, runs no model."""
        ...

    def lines_pass(self, endpoint: str, model: str, bodies: Sequence[dict[str, Any]]) -> bool:
        """Whether :meth:`validate_line` passes every one of ``bodies`` (objects, each naming
        ``model``): validation's check of a whole chunk of lines. A flavour whose verdict hangs
        on the model alone answers for them all at once; False sends validation to
        :meth:`validate_line` line by line, for the refused lines' problems."""
        ...

    async def count_prompt_tokens(self, endpoint: str, bodies: Sequence[Any]) -> list[int]:
        """The prompt tokens of each body (lines that passed :meth:`validate_line`, of one
        model), for the enqueued-token limit: the model's own tokenizer in process, an upstream's
        ``/tokenize`` where it has one, else :func:`app.engine.prompt_tokens.estimate`."""
        ...


class LineRunner(Protocol):
    """The executor's view of the engines: run a line, stop one."""

    async def execute(
        self, endpoint: str, body: Any, request_id: str, priority: int = 0, *, urgency: Urgency = NO_DEADLINE
    ) -> LineResult:
        """Run one line and return what its server would have answered; a line's own
        failure is a non-200 result, never an exception. ``priority`` is the line's place in
        the engine's waiting queue (vLLM's: smaller first, online traffic at 0; see
        :mod:`app.scheduling.priority`); an engine that does not schedule by priority ignores
        it. ``urgency`` is how soon the line is due (:class:`~app.scheduling.residency.Urgency`:
        at risk or not, its deadline, whether it is a single-request lane's, when it must have
        started by): an engine that loads models on demand ranks them by it, and a line not
        started by its ``start_by`` fails; others ignore it. Raises
        :class:`~app.engine.errors.RequestAborted` after :meth:`abort`,
        :class:`~app.engine.errors.EngineDeadError` when the line could not run through no
        fault of its own (do not record it; resume later),
        :class:`~app.engine.errors.LineCannotRun` when it fails with its ``code`` instead (in
        flight at two deaths of its engine, or not started by its ``start_by``), and
        :class:`~app.engine.errors.EngineNotReadyError` before start or after shutdown.
        Cancelling the caller cancels the request and raises ``CancelledError``."""
        ...

    async def abort(self, request_id: str) -> bool:
        """Stop the in-flight line ``request_id`` (its :meth:`execute` raises
        ``RequestAborted``); False if it is not running."""
        ...


class Engines(LineChecker, LineRunner, Protocol):
    """The models a process serves and the one way to run their lines."""

    @property
    def ready(self) -> bool:
        """True while every served model can take lines (``/health`` answers 200); a model
        served on demand can while it waits for its engine to be loaded."""
        ...

    def model_cards(self) -> list[dict[str, Any]]:
        """The ``data`` of ``GET /v1/models``: ``id``, ``object``, ``created``, ``owned_by``."""
        ...

    def engine_state(self, model: str) -> EngineState:
        """``ready``, ``starting``, ``dead`` or ``stopped`` (not served), for status pages."""
        ...

    def engine_ready(self, model: str) -> bool:
        """True while ``model`` can take lines (the engine-up metric)."""
        ...

    def endpoints_for(self, model: str) -> set[str]:
        """The canonical endpoints ``model`` serves; empty if it is not served."""
        ...

    def suggested_concurrency(self, model: str) -> int:
        """How many lines of ``model`` to keep in flight (the executor's window)."""
        ...

    def status(self) -> UpstreamStatus:
        """Every upstream URL's state by model, for ``/health``; empty when no model is
        served by an upstream."""
        ...

    def engine_problems(self) -> dict[str, str]:
        """Why a model takes no lines now, by model (an in-process engine restarting after its
        core died, or no longer restarted), for ``/health``; empty while all serve."""
        ...

    async def shutdown(self) -> None:
        """Stop everything in flight and release the engines. Safe to call twice."""
        ...


def adapter_bases(engines: Engines) -> dict[str, str]:
    """Each served LoRA adapter's base model (its card's ``parent``), by the adapter's name:
    a batch's lines may name a base and its adapters, which run on the one engine."""
    return {card["id"]: card["parent"] for card in engines.model_cards() if card.get("parent")}
