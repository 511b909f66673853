"""Application factory: lifespan (migrations, storage, background tasks), middleware, routers."""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Callable
from contextlib import asynccontextmanager, suppress

from fastapi import APIRouter, Depends, FastAPI

from app.api import health
from app.api import metrics as metrics_api
from app.api.deps import reject_unclean_input
from app.api.runtime import Runtime, install_runtime
from app.background.exporter import Exporter
from app.background.loop_watch import LoopWatch
from app.background.model_publisher import publish_models_forever
from app.background.sweeper import STALE_TEMP_SECONDS, sweep_forever
from app.core import tracing
from app.core.anthropic_api import MESSAGE_BATCHES_PATH
from app.core.config import Settings
from app.core.private_files import private_dir
from app.core.version import VERSION
from app.db import migrate
from app.db.engine import Database
from app.domains.batches import admin_routes as admin_project_batches
from app.domains.batches import routes as batches
from app.domains.files import routes as files
from app.domains.files import uploads_routes as uploads
from app.domains.limits import permissions_routes as admin_model_permissions
from app.domains.limits import rate_limits_routes as admin_rate_limits
from app.domains.limits import usage_routes as usage
from app.domains.message_batches import routes as anthropic_batches
from app.domains.models import queue_routes as queue
from app.domains.models import routes as models
from app.domains.models.service import model_entries
from app.domains.organization import audit_routes as audit_logs
from app.domains.organization import keys_routes as admin_keys
from app.domains.organization import projects_routes as admin_projects
from app.domains.organization.auth import Authenticator, install_authenticator
from app.domains.organization.deps import get_caller
from app.domains.responses import flex_routes as flex
from app.domains.responses import list_routes as single_requests
from app.domains.responses import routes as responses
from app.domains.webhooks import routes as webhooks
from app.domains.webhooks.sender import WebhookSender
from app.engine.boot import NoModels, start_registry
from app.engine.config.specs import load_model_table
from app.engine.protocol import Engines
from app.http.body_limit import BodyLimitMiddleware
from app.http.error_handlers import install_error_handlers
from app.http.front_door import FrontDoorMiddleware
from app.http.idempotency import IdempotencyMiddleware
from app.http.metrics_middleware import HttpMetricsMiddleware
from app.http.openapi import install_openapi
from app.http.request_id import RequestIdMiddleware
from app.storage import open_store
from app.ui import install_ui
from app.worker.context import WorkerContext
from app.worker.runner import Worker

log = logging.getLogger("batchd")


async def _start_engines_and_worker(
    runtime: Runtime, given: Engines | None, on_failure: Callable[[str], None] | None = None
) -> None:
    """The engines, then the worker. Engines that cannot start leave the cause in
    ``runtime.engines_failed`` (/health shows it) and call ``on_failure`` with it: `batchd serve`
    then exits non-zero so that a supervisor restarts it (``--no-models`` serves the API alone)."""
    settings = runtime.settings
    runtime.models = load_model_table(settings.model_config_file)  # the Costs API's on every replica
    if settings.api_only:
        runtime.engines, runtime.ready = NoModels(), True
        log.info("ready: API only (no engines, no worker)")
        return
    try:
        engines = runtime.engines = given if given is not None else await start_registry(settings)
    except Exception as exc:
        log.exception("could not start the model engines; batches will not run")
        runtime.engines_failed = f"{type(exc).__name__}: {exc}"
        if on_failure is not None:
            on_failure(runtime.engines_failed)
        return
    worker = Worker(WorkerContext(db=runtime.db, store=runtime.store, registry=engines, settings=settings))
    worker.start()
    runtime.worker = worker
    runtime.ready = True
    served = [card["id"] for card in engines.model_cards()]
    log.info("ready: serving %s", ", ".join(served) or "no models")


@functools.cache
def _v1_router() -> APIRouter:
    """Every `/v1` route but Anthropic's, built once per process: an app includes (copies) it,
    and building it again for each app (the in-process tests make dozens) is most of create_app's CPU."""
    v1 = APIRouter(prefix="/v1", dependencies=[Depends(get_caller), Depends(reject_unclean_input)])
    for module in (
        files,
        uploads,
        batches,
        responses,
        flex,
        models,
        webhooks,
        usage,
        admin_projects,
        admin_project_batches,
        admin_keys,
        admin_rate_limits,
        admin_model_permissions,
        audit_logs,
        queue,
        single_requests,
    ):
        v1.include_router(module.router)
    return v1


def create_app(settings: Settings | None = None, engines: Engines | None = None) -> FastAPI:
    """The app for `settings`; `engines`, when given, runs its lines in place of the engines
    the settings name (the tests' fake engine: the app in process, with no model)."""
    settings = settings or Settings()

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        private_dir(settings.data_dir)
        url = settings.resolved_database_url()
        await migrate.upgrade(url)
        db = Database(
            url, sqlite_busy_timeout_ms=settings.sqlite_busy_timeout_ms, postgres_pool=settings.database_pool_size
        )
        store = open_store(settings)
        # Before serving: this proves the store reachable (a missing bucket stops the server with a
        # clear message, tests/storage/test_blob_store.py), besides clearing old temp files.
        await store.sweep_temp(older_than_seconds=STALE_TEMP_SECONDS)
        auth = Authenticator(settings, db)
        if await auth.is_open_mode():
            log.warning(
                "!!! OPEN MODE: no API keys configured (BATCHD_API_KEYS or `batchd keys create`); "
                "every request is accepted as project 'default' (from loopback names and this server's "
                "own origin only; docs/security.md) !!!"
            )
        install_authenticator(app, auth)
        runtime = Runtime(settings, db, store, asyncio.get_running_loop())
        install_runtime(app, runtime)
        sweeper = asyncio.create_task(sweep_forever(db, store, settings))
        # Webhook deliveries never wait on the worker, nor it on them: they share only the outbox.
        sender = asyncio.create_task(WebhookSender(db, settings).run_forever())
        # Results by reference: ended batches' files copied to their output_uri / output_urls.
        exporter = asyncio.create_task(Exporter(db, store, settings).run_forever())
        # Engines take a while to load: serve files and /health (503 "starting") meanwhile.
        # `batchd serve` sets app.state.on_engines_failed: engines that cannot start stop the server.
        startup = asyncio.create_task(
            _start_engines_and_worker(runtime, engines, getattr(app.state, "on_engines_failed", None))
        )
        background = [startup, sweeper, sender, exporter]
        if not (settings.api_only or settings.no_models):
            # So that --api-only replicas on this database can list what this one serves.
            background.append(
                asyncio.create_task(
                    publish_models_forever(
                        db, settings.replica_id, lambda: model_entries(runtime.engines, runtime.worker)
                    )
                )
            )
        try:
            async with LoopWatch():
                yield
        finally:
            runtime.ready = False
            for task in background:
                task.cancel()
                with suppress(asyncio.CancelledError):
                    await task
            if isinstance(runtime.worker, Worker):
                await runtime.worker.stop()
            if runtime.engines is not None:
                await runtime.engines.shutdown()
            await db.dispose()
            await store.close()

    app = FastAPI(
        title="batchd",
        version=VERSION,
        description="OpenAI-compatible Files and Batches API backed by vLLM.",
        lifespan=lifespan,
    )
    # Added first, so they run inside RequestIdMiddleware (their refusals carry a request id too),
    # and the front door (who is asking) before the body policy (what they may send).
    # Innermost: the caller is known and the body within its limit when a key is looked up.
    app.add_middleware(IdempotencyMiddleware)
    app.add_middleware(
        BodyLimitMiddleware,
        max_bytes=settings.max_json_body_bytes,
        larger={MESSAGE_BATCHES_PATH: settings.max_message_batch_bytes},
    )
    app.add_middleware(FrontDoorMiddleware)
    app.add_middleware(RequestIdMiddleware)
    app.add_middleware(HttpMetricsMiddleware)
    install_error_handlers(app)
    install_openapi(app)

    app.include_router(_v1_router())
    app.include_router(anthropic_batches.router, dependencies=[Depends(reject_unclean_input)])
    app.include_router(health.router)
    app.include_router(metrics_api.router)
    install_ui(app)
    tracing.instrument_app(app)
    return app
