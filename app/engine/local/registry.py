"""EngineRegistry: the :class:`~app.engine.protocol.Engines` of the models this process runs
with vLLM, one ``AsyncLLM`` each.

The worker and the API talk to vLLM only through this class (typed as ``Engines``):

    registry = EngineRegistry()
    await registry.start(resolve_model_specs(args.model, args.config, data_dir=d))
    problem = registry.validate_line("/v1/chat/completions", body)    # at validation
    result = await registry.execute("/v1/chat/completions", body, "req_1")  # per line
    await registry.abort("req_1")                                      # on cancel
    await registry.shutdown()

An engine whose core process dies is restarted (:mod:`app.engine.supervision`); its lines
wait and run again on the new engine. With ``max_resident`` (``--max-resident-engines``), a
``memory_budget`` (``--engine-memory-budget``: as many engines as their memory needs fit,
:mod:`app.engine.local.memory`) or a model with ``load: on-demand``, engines are loaded when
their lines are due and unloaded for others (:mod:`app.engine.local.residency`); what
validation needs of a model (its endpoints, its window) is learnt at start, so a model with no
engine loaded still takes batches. All methods must be called from the event loop that ran
``start``.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from http import HTTPStatus
from pathlib import Path
from typing import Any, Literal

import psutil

from app.core import metrics
from app.core.endpoints import normalize_endpoint
from app.core.statuses import EngineState
from app.engine import gc_heap
from app.engine.config.specs import ModelSpec
from app.engine.errors import EngineDeadError, EngineNotReadyError, ModelConfigError, RequestAborted
from app.engine.inflight import InflightRequests
from app.engine.line_checks import common_line_problem
from app.engine.local import launch, memory
from app.engine.local.cpu_affinity import pin_off_worker_cpus, unpin
from app.engine.local.cpu_priority import lower_engine_priority
from app.engine.local.model_engine import ModelEngine, error_reply
from app.engine.local.orphans import engine_processes, wait_for_exit
from app.engine.local.requests import body_problem
from app.engine.local.residency import Residency
from app.engine.local.shared_memory import SharedObjects, engine_shared_objects, release_leftovers
from app.engine.local.sleep import SleepOrRestart
from app.engine.poison import Suspects
from app.engine.prompt_tokens import estimate_all
from app.engine.protocol import UpstreamStatus
from app.engine.results import LineProblem, LineResult, Usage
from app.engine.supervision import EngineSupervisor, RestartPolicy, Supervision
from app.engine.vllm_api import VllmEngineDeadError
from app.scheduling.residency import NO_DEADLINE, Urgency

logger = logging.getLogger(__name__)

# Lines in flight per engine, as a multiple of its max_num_seqs: the surplus
# waits in vLLM's queue so the scheduler always has work while the worker
# records finished lines and reads the next ones.
_WINDOW_PER_SEQ = 2


@dataclass(frozen=True)
class _Profile:
    """What is known of a model whether or not its engine is loaded (read when it first started)."""

    spec: ModelSpec
    endpoints: frozenset[str]
    max_num_seqs: int


class EngineRegistry:
    """One vLLM ``AsyncLLM`` per served model, in this process."""

    def __init__(
        self,
        restarts: RestartPolicy | None = None,
        max_resident: int | None = None,
        min_residency_seconds: float = 30.0,
        min_load_interval_seconds: float = 0.0,
        memory_budget: int | Literal["auto"] | None = None,
        drain_grace_seconds: float = 0.0,
    ) -> None:
        self._engines: dict[str, ModelEngine] = {}  # the loaded ones
        self._profiles: dict[str, _Profile] = {}  # every served model
        self._max_resident = max_resident
        self._memory_setting = memory_budget  # bytes or "auto" (the device's free memory at start)
        self._memory_budget: int | None = None  # bytes, read at start
        self._memory: dict[str, int] = {}  # each model's engine memory need, with a budget
        self._min_residency = min_residency_seconds
        self._drain_grace = drain_grace_seconds
        self._min_load_interval = min_load_interval_seconds
        self._residency: Residency | None = None  # None: every engine stays loaded
        self._swaps: SleepOrRestart | None = None  # how a swap unloads and loads (sleep or restart)
        self._sleep_mode = False  # engines start with vLLM's sleep mode where it works (on demand)
        self._engines_in_process = 1
        self._restarts = restarts or RestartPolicy()
        self._supervisors: dict[str, EngineSupervisor[ModelEngine]] = {}
        # Each model's lines in flight at its engine's deaths: kept here, as they outlive an
        # engine unloaded on demand (and its supervisor).
        self._suspects: dict[str, Suspects] = {}
        # Each engine's processes (core and worker) and their shared memory, read once it is up:
        # a core that was killed takes neither with it (its worker is no longer our descendant).
        self._processes: dict[str, tuple[list[psutil.Process], SharedObjects]] = {}
        self._launching = asyncio.Lock()  # one engine start at a time (and one CPU pinning)
        self._created: dict[str, int] = {}
        # LoRA adapters served on an engine: adapter name -> its base model's name.
        self._adapters: dict[str, str] = {}
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
        """True once every engine has started, until shutdown; False while an engine restarts."""
        return self._ready and all(s.serving for s in self._supervisors.values())

    async def start(self, specs: Sequence[ModelSpec]) -> None:
        """Start an engine for every spec; on any failure stop those started and raise.

        With a residency budget or on-demand models, the models that do not stay loaded are
        started first and stopped again once their endpoints and window are known (their
        start also checks their config), then the ones that stay: never more engines alive
        than the budget."""
        if self._engines or self._closed:
            raise RuntimeError("An EngineRegistry can be started once.")
        names = [spec.name for spec in specs]
        self._adapters = {adapter.name: spec.name for spec in specs for adapter in spec.adapters}
        names += list(self._adapters)
        if not specs:
            raise ModelConfigError("No model to serve.")
        if len(set(names)) != len(names):
            raise ModelConfigError(f"Served model names must be unique: {names}.")
        self._cores_before = {proc.pid for proc in engine_processes()}
        # On a GPU the engines loaded at once split its memory (launch.DEFAULT_GPU_MEMORY_SHARE).
        self._engines_in_process = max(1, min(len(specs), self._max_resident or len(specs)))
        if self._memory_setting is not None:
            await self._size_engines(specs)
        kept = self._kept_loaded([spec for spec in specs if spec.load == "always"])
        on_demand = [spec for spec in specs if spec not in kept]
        # Engines that may be swapped out start able to sleep where the hardware can (CUDA):
        # selected once here, by what each engine then says it can do (ModelEngine.can_sleep).
        self._sleep_mode = bool(on_demand)
        self._swaps = SleepOrRestart(
            start=self._load_on_demand,
            stop=self._stop_engine,
            sleep=self._sleep_engine,
            wake=self._wake_engine,
            probe=self._probe_engine,
            can_sleep=lambda model: model in self._engines and self._engines[model].can_sleep,
        )
        # One at a time: each start already saturates the CPU (imports, warm-up
        # compilation), and a failure leaves fewer engines to unwind.
        try:
            for spec in [*on_demand, *kept]:
                engine = await self._launch(spec, self._engines_in_process)
                self._profiles[spec.name] = _Profile(spec, engine.endpoints, engine.max_num_seqs)
                self._created[spec.name] = int(time.time())
                if spec in on_demand:
                    # Asleep where it can sleep (its first load is then a wake), else stopped.
                    await self._swaps.unload(spec.name)
                if self._closed:
                    raise EngineNotReadyError("shutdown() was called while the engines were starting.")
            # Once all are up: engines started after pinning would inherit the narrowed CPUs.
            self._cpus_before_pinning = pin_off_worker_cpus()
            lower_engine_priority()
        except BaseException:
            await self.shutdown()
            raise
        for spec in kept:
            self._supervise(spec, self._engines[spec.name])
            metrics.set_engine_resident(spec.name, True)
        for name in self._swaps.asleep:
            self._supervise(self._profiles[name].spec, self._engines[name])
        if on_demand:
            self._residency = Residency(
                {spec.name: spec.load == "always" for spec in specs},
                self._max_resident,
                self._min_residency,
                load=self._swaps.load,
                unload=self._swaps.unload,
                min_load_interval=self._min_load_interval,
                memory=self._memory,
                memory_budget=self._memory_budget,
                drain_grace=self._drain_grace,
            )
            self._residency.start([spec.name for spec in kept])
            logger.info(
                "Engines on demand: %s loaded, %s loaded when their lines are due (at most %s at once%s)",
                ", ".join(spec.name for spec in kept) or "none",
                ", ".join(spec.name for spec in on_demand),
                self._max_resident or "any number",
                "" if self._memory_budget is None else f", within {memory.gib(self._memory_budget)}",
            )
        # As `vllm serve` does after start-up: move the millions of objects from imports and
        # engine set-up out of the collector's reach, so the collections that per-line garbage
        # triggers do not rescan them (they were a visible share of the front-end's samples).
        self._heap.settle()
        self._ready = True

    async def _size_engines(self, specs: Sequence[ModelSpec]) -> None:
        """Read the memory budget and each model's engine memory need, before any engine starts."""
        assert self._memory_setting is not None
        device = await asyncio.to_thread(memory.device_memory)
        self._memory_budget = memory.memory_budget(self._memory_setting, device)
        for spec in specs:
            if spec.builder is not None:  # a built-in's files, to size its weights (its start builds them anyway)
                await asyncio.to_thread(spec.builder, Path(spec.path))
            need = await asyncio.to_thread(memory.engine_memory_need, spec, self._engines_in_process, device)
            if need > self._memory_budget:
                raise ModelConfigError(
                    f"Model {spec.name!r}: its engine needs about {memory.gib(need)}, more than the engine memory "
                    f"budget of {memory.gib(self._memory_budget)} (set its memory_gib, or a larger budget)."
                )
            self._memory[spec.name] = need
        logger.info(
            "Engine memory budget %s; needs: %s",
            memory.gib(self._memory_budget),
            ", ".join(f"{name} {memory.gib(need)}" for name, need in self._memory.items()),
        )

    def _kept_loaded(self, always: Sequence[ModelSpec]) -> list[ModelSpec]:
        """The ``load: always`` models loaded from the start: in their order, as many as the count
        limit and the memory budget hold (the others are loaded when their lines are due)."""
        kept: list[ModelSpec] = []
        for spec in always:
            if self._max_resident is not None and len(kept) >= self._max_resident:
                break
            if self._memory_budget is not None:
                taken = sum(self._memory[k.name] for k in kept)
                if taken + self._memory[spec.name] > self._memory_budget:
                    continue  # a smaller one further on may still fit
            kept.append(spec)
        return kept

    async def _launch(self, spec: ModelSpec, engines_in_process: int) -> ModelEngine:
        before = {proc.pid for proc in engine_processes()}
        engine = await launch.start_model_engine(
            spec, engines_in_process=engines_in_process, sleep_mode=self._sleep_mode
        )
        processes = engine_processes(excluding=before)
        self._processes[spec.name] = (processes, engine_shared_objects(processes))
        self._engines[spec.name] = engine
        return engine

    def _supervise(self, spec: ModelSpec, engine: ModelEngine) -> None:
        self._supervisors[spec.name] = EngineSupervisor(
            spec.name,
            engine,
            self._restarts,
            start=functools.partial(self._relaunch, spec, self._engines_in_process),
            stop=self._retire,
            suspects=self._suspects.setdefault(spec.name, Suspects(spec.name)),
        )

    async def _load_on_demand(self, model: str) -> None:
        """Load ``model``'s engine (the residency manager made room) and supervise it."""
        spec = self._profiles[model].spec
        engine = await self._relaunch(spec, self._engines_in_process)
        if self._closed:
            await self._retire(engine)
            raise EngineNotReadyError("The engines were shut down.")
        self._supervise(spec, engine)

    async def _sleep_engine(self, model: str) -> None:
        """Put ``model``'s engine to sleep (no line runs on it): it stays alive and supervised."""
        await self._engines[model].sleep()

    async def _wake_engine(self, model: str) -> None:
        engine = self._engines.get(model)
        if engine is None:
            raise EngineNotReadyError(f"The engine for {model} is gone.")
        await engine.wake()

    async def _probe_engine(self, model: str) -> None:
        await self._engines[model].probe()

    async def _stop_engine(self, model: str) -> None:
        """Unload ``model``'s engine (no line runs on it): its core process exits, its memory
        (and shared memory) is returned."""
        supervisor = self._supervisors.pop(model, None)
        if supervisor is not None:
            await supervisor.close()  # not restarted once stopped on purpose
        engine = self._engines.pop(model, None)
        if engine is not None:
            await self._retire(engine, off_loop=True)
            logger.info("Engine for %s unloaded", model)

    async def _relaunch(self, spec: ModelSpec, engines_in_process: int) -> ModelEngine:
        """A new engine for ``spec`` in place of a dead one (or loaded on demand), pinned and
        reniced as the others."""
        async with self._launching:
            if self._closed:
                raise EngineNotReadyError("The engines were shut down.")
            if self._cpus_before_pinning is not None:
                # The new engine's processes inherit this process's CPUs: give them all back first.
                unpin(self._cpus_before_pinning)
                self._cpus_before_pinning = None
            try:
                return await self._launch(spec, engines_in_process)
            finally:
                self._cpus_before_pinning = pin_off_worker_cpus()
                lower_engine_priority()

    async def _retire(self, engine: ModelEngine, off_loop: bool = False) -> None:
        """Stop a dead engine (or, ``off_loop``, an idle one being unloaded) and reap its
        processes (its worker outlives a killed core briefly)."""
        processes, shared = self._processes.pop(engine.name, ([], SharedObjects()))
        try:
            if off_loop:
                await engine.unload()
            else:
                engine.shutdown()  # on the loop thread: see shutdown()
        except Exception:
            logger.exception("Shutting down the dead engine for %s failed", engine.name)
        await asyncio.to_thread(wait_for_exit, processes)
        release_leftovers(shared)

    async def shutdown(self) -> None:
        """Abort everything in flight and stop all engines. Safe to call twice,
        and during ``start`` (which then stops the engines it starts and raises)."""
        self._ready = False
        self._closed = True
        if self._residency is not None:
            await self._residency.close()
        supervisors, self._supervisors = list(self._supervisors.values()), {}
        await asyncio.gather(*(supervisor.close() for supervisor in supervisors))
        inflight = self._inflight.abort_all()
        if inflight:
            # Let vLLM abort them while the engine cores are still up.
            await asyncio.wait(inflight, timeout=10)
        engines, self._engines = list(self._engines.values()), {}
        self._created.clear()
        self._processes.clear()
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
        """The ``data`` of ``GET /v1/models``: each model, then each adapter with its base as
        ``parent`` (as ``vllm serve`` lists them)."""
        cards: list[dict[str, Any]] = [
            {"id": name, "object": "model", "created": self._created[name], "owned_by": "batchd"}
            for name in self._profiles
        ]
        cards += [
            {"id": name, "object": "model", "created": self._created[base], "owned_by": "batchd", "parent": base}
            for name, base in self._adapters.items()
            if base in self._profiles
        ]
        return cards

    def engine_state(self, model: str) -> EngineState:
        """For status pages: `ready`, `starting` (also while it restarts), `dead` (its engine core
        died too often: the next restart is backed off) or `stopped`."""
        model = self._adapters.get(model, model)
        if model not in self._profiles:
            return EngineState.STOPPED
        if self._residency is not None and not self._residency.resident(model):
            return EngineState.STARTING if self._residency.swapping == model else EngineState.UNLOADED
        supervisor = self._supervisors.get(model)
        if self._ready and supervisor is None:
            return EngineState.UNLOADED  # being unloaded: it takes no more lines
        if not self._ready or supervisor is None:
            return EngineState.STARTING
        if supervisor.serving:
            return EngineState.READY
        return EngineState.STARTING if supervisor.state is Supervision.RESTARTING else EngineState.DEAD

    def engine_ready(self, model: str) -> bool:
        """True while ``model``'s engine is started and alive (the engine-up metric)."""
        return self.engine_state(model) == EngineState.READY

    def endpoints_for(self, model: str) -> set[str]:
        """Canonical endpoints ``model`` can serve (empty if it is not served)."""
        profile = self._profiles.get(self._adapters.get(model, model))
        return set(profile.endpoints) if profile else set()

    def suggested_concurrency(self, model: str) -> int:
        """How many lines of ``model`` the worker should keep in flight."""
        profile = self._profiles.get(self._adapters.get(model, model))
        if profile is None:
            raise KeyError(f"Model {model!r} is not served.")
        return max(1, profile.max_num_seqs * _WINDOW_PER_SEQ)

    def status(self) -> UpstreamStatus:
        """No upstream URLs here: empty."""
        return {}

    def engine_problems(self) -> dict[str, str]:
        """Why a model takes no lines now (its engine restarts, or backs off until when), by model."""
        return {name: s.problem for name, s in self._supervisors.items() if s.problem is not None}

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
        problem, canonical = common_line_problem(endpoint, body, self._endpoints_of, self._served_names())
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
        name = self._route(canonical, first.get("model")) if canonical and isinstance(first, dict) else None
        # A model with no engine loaded now counts by estimate (its tokenizer went with its engine).
        engine = self._engines.get(name) if name is not None else None
        if engine is None or canonical is None:
            return estimate_all(endpoint, bodies)
        return await asyncio.to_thread(engine.count_prompt_tokens, canonical, bodies)

    async def execute(
        self, endpoint: str, body: Any, request_id: str, priority: int = 0, *, urgency: Urgency = NO_DEADLINE
    ) -> LineResult:
        """Run one line and return what ``vllm serve`` would have answered, at ``priority``
        in the engine's waiting queue.

        Never raises for a line's own failure (that is a non-200 result). A line whose engine
        dies waits for the engine's restart and runs again on the new one (one suspect at a
        time: :mod:`app.engine.poison`).
        Raises :class:`RequestAborted` if :meth:`abort` stopped it,
        :class:`EngineCrashedError` once the line was in flight at two of its engine's deaths,
        :class:`EngineUnavailableError` if its engine does not serve by the line's ``start_by``,
        :class:`EngineNotReadyError` before ``start`` and after ``shutdown``.
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
        name = self._route(canonical, body.get("model"))
        if name is None:
            served = ", ".join(self._served_names())
            status, reply = error_reply(
                f"The model `{body.get('model')}` does not exist. Valid aliases: {served}.",
                "NotFoundError",
                HTTPStatus.NOT_FOUND,
                param="model",
            )
            return LineResult(status, reply)
        # On the engine serving the model; if it dies meanwhile, again on the one replacing it.
        if self._residency is None:
            return await self._supervisors[name].run(
                lambda serving: self._run_on(serving, canonical, body, request_id, priority), urgency.start_by
            )
        # Its engine may have to be loaded first, and is not unloaded while the line runs.
        async with self._residency.use(name, urgency):
            supervisor = self._supervisors.get(name)
            if supervisor is None:
                raise EngineNotReadyError("The engines were shut down.")
            return await supervisor.run(
                lambda serving: self._run_on(serving, canonical, body, request_id, priority), urgency.start_by
            )

    async def _run_on(
        self, engine: ModelEngine, canonical: str, body: dict[str, Any], request_id: str, priority: int
    ) -> LineResult:
        """Run the line on ``engine``; EngineDeadError if the engine died meanwhile."""
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

    def _served_names(self) -> list[str]:
        return [*self._profiles, *(name for name, base in self._adapters.items() if base in self._profiles)]

    def _endpoints_of(self, model: str) -> frozenset[str] | None:
        profile = self._profiles.get(self._adapters.get(model, model))
        return None if profile is None else profile.endpoints

    def _route(self, endpoint: str, model: Any) -> str | None:
        """The model whose engine runs a line naming ``model``, or None."""
        if isinstance(model, str):
            # An adapter's lines run on its base's engine; vLLM's serving class picks the
            # adapter (its LoRARequest) from the body's `model`.
            name = self._adapters.get(model, model)
            return name if name in self._profiles else None
        if model is None:
            # vLLM serves its only model when none is named; do the same when
            # exactly one engine can answer this endpoint.
            candidates = [name for name, p in self._profiles.items() if endpoint in p.endpoints]
            return candidates[0] if len(candidates) == 1 else None
        return None

    def _require_ready(self) -> None:
        if not self._ready:
            raise EngineNotReadyError("The engines are not started (or were shut down).")
