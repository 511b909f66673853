"""UpstreamRegistry: the :class:`~app.engine.protocol.Engines` of models served by
OpenAI-compatible servers, so the worker cannot tell them from in-process ones. A line's body goes to the upstream unchanged apart from ``model``; the upstream's
response body is the line's, as is, and usage is read from it.

LoRA adapters: the adapters a model's URLs list on it (``vllm serve --lora-modules``; see
:mod:`.discovery`) are served too, each under its id at the upstream, with the model as its
``parent``, unless the model's ``upstream.adapters`` is off. An adapter's lines go to its base's
URLs, in its base's windows, with the adapter's id as ``model``. An adapter is served while every
URL in the rotation lists it (so any URL can take its lines), and the set follows the probes: one
the fleet loads is served from the next probe on, one it drops is no longer. While no URL is in
the rotation the last set is kept (the adapters are as down as their base, not gone).
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Iterable, Sequence
from dataclasses import replace
from typing import Any

import aiohttp
import orjson

from app.core.endpoints import AUDIO_ENDPOINTS, normalize_endpoint
from app.core.line_errors import LineErrorCode
from app.core.statuses import EngineState, UpstreamState
from app.core.version import USER_AGENT
from app.engine import gc_heap
from app.engine.audio import AudioFetchError, audio_slot, fetch_audio, fetch_error_reply
from app.engine.config.upstream import UpstreamSpec
from app.engine.errors import EngineNotReadyError, ModelConfigError, RequestAborted
from app.engine.inflight import InflightRequests
from app.engine.line_checks import common_line_problem, common_lines_pass
from app.engine.prompt_tokens import estimate_all
from app.engine.protocol import UpstreamStatus
from app.engine.results import LineProblem, LineResult, Usage
from app.engine.upstream import discovery
from app.engine.upstream.audio_form import audio_form
from app.engine.upstream.targets import Target, TargetPool
from app.engine.upstream.tokenize import tokenize_counts
from app.engine.upstream.transport import Upstream, error_body, send
from app.scheduling.residency import NO_DEADLINE, Urgency

log = logging.getLogger("batchd.upstream")

# Lines the worker keeps in flight beyond the fleet's configured capacity, as a share of it
# (W5: 0.25 made 0.68x the fleet's capacity, 1.0 0.87x; as the in-process window, twice):
# they wait here for a slot, so a URL that frees one gets the next line at once.
# BATCHD_UPSTREAM_WINDOW_SURPLUS sets it (0: no more in flight than the fleet's slots).
DEFAULT_SURPLUS = 1.0


# How long a model whose upstream had no /tokenize is estimated before /tokenize is tried again.
NO_TOKENIZE_RECHECK_S = 300.0


class UpstreamRegistry:
    """The upstream-backed models of this process, one pooled HTTP client for all."""

    def __init__(self, surplus: float = DEFAULT_SURPLUS) -> None:
        self._surplus = surplus
        self._models: dict[str, Upstream] = {}
        # Served LoRA adapters: adapter id -> its base's served name (see _refresh_adapters).
        self._adapters: dict[str, str] = {}
        # The adapters each model's URLs in rotation last listed, by the model's served name.
        self._listed: dict[str, frozenset[str]] = {}
        # Names an adapter must not take: models served here or by the in-process engines.
        self._taken: frozenset[str] = frozenset()
        self._client: aiohttp.ClientSession | None = None
        self._watchers: list[asyncio.Task] = []
        self._inflight = InflightRequests()
        self._created = 0
        self._started = False
        self._heap = gc_heap.HeapSettings()
        # Models whose upstream had no /tokenize, and when that was seen (asked again after NO_TOKENIZE_RECHECK_S).
        self._no_tokenize: dict[str, float] = {}

    # -- lifecycle ---------------------------------------------------------

    @property
    def ready(self) -> bool:
        """True while every model has at least one URL in the rotation."""
        return self._started and all(u.pool.any_up for u in self._models.values())

    @property
    def names(self) -> list[str]:
        """The served models, then the served adapters."""
        return [*self._models, *self._adapters]

    async def start(self, specs: Sequence[UpstreamSpec], taken: Iterable[str] = ()) -> None:
        """Probe every URL once and start watching them. A URL that is down does not stop
        the start: it joins the rotation when it answers. ``taken``: names served elsewhere in
        this process (in-process models and adapters), which no upstream adapter may shadow."""
        for spec in specs:
            self._models[spec.name] = Upstream(
                spec,
                TargetPool(
                    spec.name,
                    [Target(url, spec.max_concurrency, spec.health_interval_s, spec.priority) for url in spec.urls],
                ),
                _headers(spec),
            )
        self._taken = frozenset(taken) | {spec.name for spec in specs} | {spec.upstream_model for spec in specs}
        self._client = _pooled_client()
        self._created = int(time.time())
        await asyncio.gather(
            *(
                discovery.probe_all(self._client, u.pool, u.spec.upstream_model, u.headers)
                for u in self._models.values()
            )
        )
        self._refresh_adapters()
        for upstream in self._models.values():
            for target in upstream.pool.targets:
                self._watchers.append(
                    asyncio.create_task(
                        discovery.watch(
                            self._client,
                            upstream.pool,
                            target,
                            upstream.spec.upstream_model,
                            upstream.headers,
                            upstream.spec.health_interval_s,
                            self._refresh_adapters,
                        ),
                        name=f"batchd-upstream-watch-{target.url}",
                    )
                )
        self._started = True
        self._heap.settle()
        for name, upstream in self._models.items():
            adapters = sorted(a for a, base in self._adapters.items() if base == name)
            log.log(
                logging.INFO if upstream.pool.any_up else logging.WARNING,
                "upstream model %s -> %s at %s%s",
                name,
                upstream.spec.upstream_model,
                ", ".join(f"{t.url} ({t.state})" for t in upstream.pool.targets),
                f"; LoRA adapters: {', '.join(adapters)}" if adapters else "",
            )

    async def shutdown(self) -> None:
        """Close in-flight requests and the client. Safe to call twice."""
        self._started = False
        tasks = [*self._watchers, *self._inflight.abort_all()]
        for task in self._watchers:
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
        self._watchers.clear()
        if self._client is not None:
            await self._client.close()
            self._client = None
        self._heap.restore()

    # -- what is served ----------------------------------------------------

    def model_cards(self) -> list[dict[str, Any]]:
        """The ``data`` of ``GET /v1/models`` (see :meth:`engine_state` for their health): each
        model, then each adapter with its base as ``parent`` (as ``vllm serve`` lists them)."""
        cards: list[dict[str, Any]] = [
            {"id": name, "object": "model", "created": self._created, "owned_by": "batchd"} for name in self._models
        ]
        cards += [
            {"id": name, "object": "model", "created": self._created, "owned_by": "batchd", "parent": base}
            for name, base in self._adapters.items()
        ]
        return cards

    def engine_state(self, model: str) -> EngineState:
        """``ready`` while one of the model's URLs is in the rotation, ``dead`` while none is
        (an adapter: its base's)."""
        upstream = self._upstream_of(model)
        if upstream is None or not self._started:
            return EngineState.STOPPED
        return EngineState.READY if upstream.pool.any_up else EngineState.DEAD

    def engine_ready(self, model: str) -> bool:
        return self.engine_state(model) == EngineState.READY

    def endpoints_for(self, model: str) -> set[str]:
        upstream = self._upstream_of(model)
        return set(upstream.spec.endpoints) if upstream else set()

    def suggested_concurrency(self, model: str) -> int:
        """The base's window for an adapter too: its lines share the base's URLs."""
        capacity = self._require(model).pool.capacity()
        return capacity + int(capacity * self._surplus)

    def status(self) -> UpstreamStatus:
        """Every URL's state, window and outstanding requests, by model (for ``/health``)."""
        return {name: {t.url: t.status() for t in u.pool.targets} for name, u in self._models.items()}

    def engine_problems(self) -> dict[str, str]:
        """None here: an upstream's URLs and their states are in :meth:`status`."""
        return {}

    # -- lines -------------------------------------------------------------

    def validate_line(self, endpoint: str, body: Any) -> LineProblem | None:
        """The engine-independent checks (see :mod:`app.engine.line_checks`); the body's schema
        is the upstream's business (it may not be vLLM), a bad one is that line's 400. A model
        no reachable URL serves is ``model_not_found``."""
        problem, _ = common_line_problem(endpoint, body, self._endpoints_of, self.names)
        return problem

    def lines_pass(self, endpoint: str, model: str, bodies: Sequence[dict[str, Any]]) -> bool:
        return common_lines_pass(endpoint, bodies, self._endpoints_of, self.names)

    async def count_prompt_tokens(self, endpoint: str, bodies: Sequence[Any]) -> list[int]:
        """From the upstream's ``/tokenize`` (a line it fails to count, after retries, is
        estimated alone); all estimated for a model whose upstream has no ``/tokenize`` (asked
        again every NO_TOKENIZE_RECHECK_S)."""
        first = bodies[0] if bodies else None
        # An adapter's lines are counted by its base: they share the tokenizer.
        upstream = self._upstream_of(first.get("model")) if isinstance(first, dict) else None
        canonical = normalize_endpoint(endpoint)
        if upstream is None or canonical is None or self._client is None:
            return estimate_all(endpoint, bodies)
        name = upstream.spec.name
        missing_since = self._no_tokenize.get(name)
        if missing_since is not None and time.monotonic() - missing_since < NO_TOKENIZE_RECHECK_S:
            return estimate_all(endpoint, bodies)
        counts = await tokenize_counts(self._client, upstream, canonical, bodies)
        if counts is None:
            log.info("upstream model %s: no /tokenize; prompt tokens are estimated", name)
            self._no_tokenize[name] = time.monotonic()
            return estimate_all(endpoint, bodies)
        self._no_tokenize.pop(name, None)
        return counts

    async def execute(
        self, endpoint: str, body: Any, request_id: str, priority: int = 0, *, urgency: Urgency = NO_DEADLINE
    ) -> LineResult:
        """Send one line upstream; never raises for the line's own failure (a non-200 result).
        With ``priority:`` on for the model, the line goes with ``"priority": priority`` (in
        place of any it names) to every URL that has not refused it.
        Raises :class:`RequestAborted` after :meth:`abort`, and
        :class:`~app.engine.upstream.transport.UpstreamUnavailable` when no URL answered."""
        if not self._started or self._client is None:
            raise EngineNotReadyError("The upstream registry is not started (or was shut down).")
        canonical = normalize_endpoint(endpoint)
        model = body.get("model") if isinstance(body, dict) else None
        upstream = self._upstream_of(model)
        if upstream is None and isinstance(body, dict) and body.get("model") is None and len(self._models) == 1:
            upstream = next(iter(self._models.values()))
        if canonical is None or upstream is None:
            return LineResult(
                404,
                error_body(
                    f"The model {body.get('model') if isinstance(body, dict) else None!r} does not exist "
                    f"or does not serve {endpoint}.",
                    "NotFoundError",
                    LineErrorCode.MODEL_NOT_FOUND,
                ),
            )
        # An adapter goes by its own id: the upstream picks the adapter from `model`.
        outgoing = {**body, "model": model if model in self._adapters else upstream.spec.upstream_model}
        payload, without_priority = orjson.dumps(outgoing), None
        if upstream.spec.priority and priority:
            payload, without_priority = orjson.dumps({**outgoing, "priority": priority}), payload
        caller = asyncio.current_task()
        assert caller is not None, "a line runs in a task"
        self._inflight.track(request_id, caller)  # abort cancels this task: no task of its own
        if canonical in AUDIO_ENDPOINTS:
            # The download is part of the line: abort and cancellation stop it too.
            sending = _send_audio(self._client, upstream, canonical, outgoing)
        else:
            sending = send(self._client, upstream, canonical, payload, without_priority)
        try:
            status, reply = await sending
        except asyncio.CancelledError:
            if self._inflight.aborted_only(request_id, caller):
                raise RequestAborted(request_id) from None
            raise
        finally:
            self._inflight.finish(request_id)
        usage = Usage.from_body(canonical, reply) if status == 200 else Usage()
        return LineResult(status_code=status, body=reply, usage=usage)

    async def abort(self, request_id: str) -> bool:
        """Cancel the in-flight line ``request_id``: its HTTP connection is closed."""
        return self._inflight.abort(request_id)

    # -- helpers -----------------------------------------------------------

    def _endpoints_of(self, model: str) -> frozenset[str] | None:
        upstream = self._upstream_of(model)
        if upstream is None:
            return None
        if upstream.pool.targets and all(t.state == UpstreamState.NO_MODEL for t in upstream.pool.targets):
            return None  # every URL answers and none serves it: a typo in `model`, not an outage
        return upstream.spec.endpoints

    def _require(self, model: str) -> Upstream:
        upstream = self._upstream_of(model)
        if upstream is None:
            raise KeyError(f"Model {model!r} is not served.")
        return upstream

    def _upstream_of(self, model: Any) -> Upstream | None:
        """The upstream serving ``model``: its own, or for an adapter its base's."""
        if not isinstance(model, str):
            return None
        upstream = self._models.get(model)
        if upstream is None and (base := self._adapters.get(model)) is not None:
            upstream = self._models[base]
        return upstream

    def _refresh_adapters(self) -> None:
        """The served adapters, from what the URLs in rotation last listed (after each probe).
        An adapter id that names a model served here or in process, or an adapter another
        model already serves (the first configured wins), is not served."""
        for name, upstream in self._models.items():
            up = [t.adapters for t in upstream.pool.targets if t.in_rotation]
            if up and upstream.spec.adapters:
                self._listed[name] = up[0].intersection(*up[1:])
        adapters: dict[str, str] = {}
        clashes: list[str] = []
        for name in self._models:  # in config order: the first model listing an adapter has it
            for adapter in sorted(self._listed.get(name, frozenset()) - self._taken):
                if adapter in adapters:
                    clashes.append(f"{adapter} of {name} (served for {adapters[adapter]})")
                else:
                    adapters[adapter] = name
        if adapters == self._adapters:
            return
        if self._started:
            added, gone = adapters.keys() - self._adapters.keys(), self._adapters.keys() - adapters.keys()
            log.info("upstream LoRA adapters: now serving %s, no longer %s", sorted(added), sorted(gone))
        if clashes:
            log.warning("upstream LoRA adapters listed by two models, served for the first: %s", "; ".join(clashes))
        self._adapters = adapters


async def _send_audio(
    client: aiohttp.ClientSession, upstream: Upstream, endpoint: str, body: dict[str, Any]
) -> tuple[int, dict]:
    """An audio line: its ``file_url`` fetched here, then sent as the route's multipart form
    (vLLM's audio routes take no ``file_url``)."""
    async with audio_slot():
        try:
            audio = await fetch_audio(str(body.get("file_url")))
        except AudioFetchError as exc:
            return fetch_error_reply(endpoint, exc)
        payload, content_type = audio_form(body, audio)
        del audio  # the form holds its own copy
        with_form = replace(upstream, headers={**upstream.headers, "content-type": content_type})
        return await send(client, with_form, endpoint, payload)


def _pooled_client() -> aiohttp.ClientSession:
    """One client and one pool of keep-alive connections for every URL; the windows bound how
    many are open. (httpx was the first choice; its connection pool scans every connection,
    with a select() on each idle one, for each request: 3-12 ms of CPU a line at 128
    connections, where aiohttp's pool takes microseconds.)"""
    connector = aiohttp.TCPConnector(limit=0, limit_per_host=0, keepalive_timeout=30, ttl_dns_cache=300)
    # Replies as they are, never inflated: each read is capped (app/engine/upstream/replies.py).
    return aiohttp.ClientSession(
        connector=connector,
        headers={"user-agent": USER_AGENT, "accept-encoding": "identity"},
        auto_decompress=False,
    )


def _headers(spec: UpstreamSpec) -> dict[str, str]:
    headers = {"content-type": "application/json"}
    if spec.api_key_env:
        key = os.environ.get(spec.api_key_env)
        if not key:
            raise ModelConfigError(
                f"Model {spec.name!r}: the environment variable {spec.api_key_env} (upstream.api_key_env) is not set."
            )
        headers["authorization"] = f"Bearer {key}"
    return headers
