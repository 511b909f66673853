"""EngineRegistry: the :class:`~app.engine.protocol.Engines` of the models this process runs
with vLLM, one ``AsyncLLM`` each.

The worker and the API talk to vLLM only through this class (typed as ``Engines``):

    registry = EngineRegistry()
    await registry.start(resolve_model_specs(args.model, args.config, data_dir=d))
    problem = registry.validate_line("/v1/chat/completions", body)    # at validation
    result = await registry.execute("/v1/chat/completions", body, "req_1")  # per line
    await registry.abort("req_1")                                      # on cancel
    await registry.shutdown()

All methods must be called from the event loop that ran ``start``.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from http import HTTPStatus
from typing import Any

from vllm.v1.engine.exceptions import EngineDeadError as VllmEngineDeadError

from app.core.endpoints import normalize_endpoint
from app.core.statuses import EngineState
from app.engine import gc_heap
from app.engine.config.specs import ModelSpec
from app.engine.errors import EngineDeadError, EngineNotReadyError, ModelConfigError, RequestAborted
from app.engine.inflight import InflightRequests
from app.engine.line_checks import common_line_problem
from app.engine.local import launch
from app.engine.local.cpu_affinity import pin_off_worker_cpus, unpin
from app.engine.local.cpu_priority import lower_engine_priority
from app.engine.local.model_engine import ModelEngine, error_reply
from app.engine.local.orphans import engine_processes, wait_for_exit
from app.engine.local.requests import body_problem
from app.engine.local.shared_memory import engine_shared_objects, release_leftovers
from app.engine.prompt_tokens import estimate_all
from app.engine.protocol import UpstreamStatus
from app.engine.results import LineProblem, LineResult, Usage

logger = logging.getLogger(__name__)

# Lines in flight per engine, as a multiple of its max_num_seqs: the surplus
# waits in vLLM's queue so the scheduler always has work while the worker
# records finished lines and reads the next ones.
_WINDOW_PER_SEQ = 2


class EngineRegistry:
    """One vLLM ``AsyncLLM`` per served model, in this process."""

    def __init__(self) -> None:
        self._engines: dict[str, ModelEngine] = {}
        self._created: dict[str, int] = {}
        self._inflight = InflightRequests()
        self._ready = False
        self._heap = gc_heap.HeapSettings()
        self._closed = False
        self._cpus_before_pinning: set[int] | None = None
        # Engine cores already running in this process (another registry's), not ours to stop.
        self._cores_before: set[int] = set()

    # -- lifecycle ---------------------------------------------------------

    @property
    def ready(self) -> bool:
        """True once every engine has started, until shutdown or an engine death."""
        return self._ready and not any(e.errored for e in self._engines.values())

    async def start(self, specs: Sequence[ModelSpec]) -> None:
        """Start an engine for every spec; on any failure stop those started and raise."""
        if self._engines or self._closed:
            raise RuntimeError("An EngineRegistry can be started once.")
        names = [spec.name for spec in specs]
        if not names:
            raise ModelConfigError("No model to serve.")
        if len(set(names)) != len(names):
            raise ModelConfigError(f"Served model names must be unique: {names}.")
        self._cores_before = {proc.pid for proc in engine_processes()}
        # One at a time: each start already saturates the CPU (imports, warm-up
        # compilation), and a failure leaves fewer engines to unwind.
        try:
            for spec in specs:
                engine = await launch.start_model_engine(spec, engines_in_process=len(specs))
                self._engines[spec.name] = engine
                self._created[spec.name] = int(time.time())
                if self._closed:
                    raise EngineNotReadyError("shutdown() was called while the engines were starting.")
            # Once all are up: engines started after pinning would inherit the narrowed CPUs.
            self._cpus_before_pinning = pin_off_worker_cpus()
            lower_engine_priority()
        except BaseException:
            await self.shutdown()
            raise
        # As `vllm serve` does after start-up: move the millions of objects from imports and
        # engine set-up out of the collector's reach, so the collections that per-line garbage
        # triggers do not rescan them (they were a visible share of the front-end's samples).
        self._heap.settle()
        self._ready = True

    async def shutdown(self) -> None:
        """Abort everything in flight and stop all engines. Safe to call twice,
        and during ``start`` (which then stops the engines it starts and raises)."""
        self._ready = False
        self._closed = True
        inflight = self._inflight.abort_all()
        if inflight:
            # Let vLLM abort them while the engine cores are still up.
            await asyncio.wait(inflight, timeout=10)
        engines, self._engines = list(self._engines.values()), {}
        self._created.clear()
        processes = engine_processes(excluding=self._cores_before)
        shared = engine_shared_objects(processes)  # read while the engine processes are alive
        for engine in engines:
            try:
                # On the loop thread, as vLLM does: from a worker thread the
                # engine's output handler would run meanwhile, see the core
                # vanish and log a spurious "engine dead" traceback.
                engine.shutdown()
            except Exception:
                logger.exception("Shutting down the engine for %s failed", engine.name)
        await asyncio.to_thread(wait_for_exit, processes)
        release_leftovers(shared)
        self._heap.restore()
        if self._cpus_before_pinning is not None:
            unpin(self._cpus_before_pinning)
            self._cpus_before_pinning = None

    # -- what is served ----------------------------------------------------

    def model_cards(self) -> list[dict[str, Any]]:
        """The ``data`` of ``GET /v1/models``."""
        return [
            {"id": name, "object": "model", "created": self._created[name], "owned_by": "batchd"}
            for name in self._engines
        ]

    def engine_state(self, model: str) -> EngineState:
        """For status pages: `ready`, `starting`, `dead` (its engine core died) or `stopped`."""
        engine = self._engines.get(model)
        if engine is None:
            return EngineState.STOPPED
        if engine.errored:
            return EngineState.DEAD
        return EngineState.READY if self._ready else EngineState.STARTING

    def engine_ready(self, model: str) -> bool:
        """True while ``model``'s engine is started and alive (the engine-up metric)."""
        return self.engine_state(model) == EngineState.READY

    def endpoints_for(self, model: str) -> set[str]:
        """Canonical endpoints ``model`` can serve (empty if it is not served)."""
        engine = self._engines.get(model)
        return set(engine.endpoints) if engine else set()

    def suggested_concurrency(self, model: str) -> int:
        """How many lines of ``model`` the worker should keep in flight."""
        engine = self._require_engine(model)
        return max(1, engine.max_num_seqs * _WINDOW_PER_SEQ)

    def status(self) -> UpstreamStatus:
        """No upstream URLs here: empty."""
        return {}

    # -- lines -------------------------------------------------------------

    def validate_line(self, endpoint: str, body: Any) -> LineProblem | None:
        """Why a batch line would be refused, or None; cheap and engine-free.

        Codes (see :mod:`app.engine.results`): ``url_mismatch`` (param ``url``)
        for an endpoint batchd does not run; ``invalid_request`` for a body
        that is not an object or fails vLLM's request schema (param: dotted
        path of the first bad field, e.g. ``body.messages``);
        ``missing_required_parameter`` / ``model_not_found`` (param
        ``body.model``); ``unsupported_endpoint`` (param ``url``) when the
        model cannot serve the endpoint (e.g. chat on an embedding model);
        ``streaming_unsupported`` (param ``body.stream``).
        """
        self._require_ready()
        problem, canonical = common_line_problem(endpoint, body, self._endpoints_of, self._engines)
        if problem is not None:
            return problem
        assert canonical is not None, "a known endpoint has its canonical name"
        return body_problem(canonical, body)

    def lines_pass(self, endpoint: str, model: str, bodies: Sequence[dict[str, Any]]) -> bool:
        """Line by line: vLLM's request schema reads the whole body."""
        return all(self.validate_line(endpoint, body) is None for body in bodies)

    async def count_prompt_tokens(self, endpoint: str, bodies: Sequence[Any]) -> list[int]:
        """With the model's tokenizer (a private copy, in a thread: the event loop keeps serving)."""
        self._require_ready()
        canonical = normalize_endpoint(endpoint)
        first = bodies[0] if bodies else None
        engine = self._route(canonical, first.get("model")) if canonical and isinstance(first, dict) else None
        if engine is None or canonical is None:
            return estimate_all(endpoint, bodies)
        return await asyncio.to_thread(engine.count_prompt_tokens, canonical, bodies)

    async def execute(self, endpoint: str, body: Any, request_id: str, priority: int = 0) -> LineResult:
        """Run one line and return what ``vllm serve`` would have answered, at ``priority``
        in the engine's waiting queue.

        Never raises for a line's own failure (that is a non-200 result).
        Raises :class:`RequestAborted` if :meth:`abort` stopped it,
        :class:`EngineDeadError` if the model's engine died (do not record a
        line; resume later), :class:`EngineNotReadyError` before ``start``.
        """
        self._require_ready()
        canonical = normalize_endpoint(endpoint)
        if canonical is None:
            # `vllm serve` has no such route.
            status, reply = error_reply("Not Found", "Not Found", HTTPStatus.NOT_FOUND)
            return LineResult(status, reply)
        if not isinstance(body, dict):
            status, reply = error_reply(
                "The request body must be a JSON object.", "Bad Request", HTTPStatus.BAD_REQUEST
            )
            return LineResult(status, reply)
        engine = self._route(canonical, body.get("model"))
        if engine is None:
            served = ", ".join(self._engines)
            status, reply = error_reply(
                f"The model `{body.get('model')}` does not exist. Valid aliases: {served}.",
                "NotFoundError",
                HTTPStatus.NOT_FOUND,
                param="model",
            )
            return LineResult(status, reply)
        if engine.errored:
            raise EngineDeadError(engine.name)
        task = self._inflight.start(request_id, engine.run(canonical, body, priority))
        caller = asyncio.current_task()
        try:
            try:
                status, reply = await task
            except VllmEngineDeadError as exc:
                raise EngineDeadError(engine.name) from exc
            except asyncio.CancelledError:
                if not self._inflight.was_aborted(request_id) or (caller is not None and caller.cancelling()):
                    raise
                raise RequestAborted(request_id) from None
            # vLLM's serving classes catch a cancellation and return a
            # "Client disconnected" body, so the task may end normally even
            # though it was cancelled: decide from who asked for it.
            if caller is not None and caller.cancelling():
                raise asyncio.CancelledError()
            if self._inflight.was_aborted(request_id):
                raise RequestAborted(request_id)
        finally:
            self._inflight.finish(request_id)

        # Serving classes turn most exceptions into a 500 body; when the engine
        # is gone that is not the line's failure.
        if status != HTTPStatus.OK and engine.errored:
            raise EngineDeadError(engine.name)
        usage = Usage.from_body(canonical, reply) if status == HTTPStatus.OK else Usage()
        return LineResult(status_code=int(status), body=reply, usage=usage)

    async def abort(self, request_id: str) -> bool:
        """Abort the in-flight line ``request_id``; False if it is not running.

        Its ``execute`` raises :class:`RequestAborted`; vLLM frees its slot.
        """
        return self._inflight.abort(request_id)

    # -- helpers -----------------------------------------------------------

    def _endpoints_of(self, model: str) -> frozenset[str] | None:
        engine = self._engines.get(model)
        return None if engine is None else engine.endpoints

    def _route(self, endpoint: str, model: Any) -> ModelEngine | None:
        if isinstance(model, str):
            return self._engines.get(model)
        if model is None:
            # vLLM serves its only model when none is named; do the same when
            # exactly one engine can answer this endpoint.
            candidates = [e for e in self._engines.values() if endpoint in e.endpoints]
            return candidates[0] if len(candidates) == 1 else None
        return None

    def _require_ready(self) -> None:
        if not self._ready:
            raise EngineNotReadyError("The engines are not started (or were shut down).")

    def _require_engine(self, model: str) -> ModelEngine:
        engine = self._engines.get(model)
        if engine is None:
            raise KeyError(f"Model {model!r} is not served.")
        return engine
