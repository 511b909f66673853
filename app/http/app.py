"""Application factory: lifespan (migrations, storage, background tasks), middleware, routers."""

from __future__ import annotations

import asyncio
import logging
from contextlib import asynccontextmanager, suppress

from fastapi import APIRouter, Depends, FastAPI

from app.api import (
    admin_keys,
    admin_model_permissions,
    admin_projects,
    admin_rate_limits,
    anthropic_batches,
    audit_logs,
    batches,
    files,
    health,
    models,
    queue,
    uploads,
    usage,
    webhooks,
)
from app.api import metrics as metrics_api
from app.api.deps import get_caller
from app.api.runtime import Runtime, install_runtime
from app.background.model_publisher import publish_models_forever
from app.background.sweeper import STALE_TEMP_SECONDS, sweep_forever
from app.background.webhook_sender import WebhookSender
from app.core import tracing
from app.core.anthropic_api import MESSAGE_BATCHES_PATH
from app.core.config import Settings
from app.db import migrate
from app.db.engine import Database
from app.engine.boot import NoModels, start_registry
from app.http.body_limit import BodyLimitMiddleware
from app.http.error_handlers import install_error_handlers
from app.http.metrics_middleware import HttpMetricsMiddleware
from app.http.openapi import install_openapi
from app.http.request_id import RequestIdMiddleware
from app.services.auth import Authenticator
from app.services.models import model_entries
from app.storage import open_store
from app.ui import install_ui
from app.worker.context import WorkerContext
from app.worker.runner import Worker

log = logging.getLogger("batchd")


async def _start_engines_and_worker(runtime: Runtime) -> None:
    settings = runtime.settings
    if settings.api_only:
        runtime.engines, runtime.ready = NoModels(), True
        log.info("ready: API only (no engines, no worker)")
        return
    try:
        engines = runtime.engines = await start_registry(settings)
    except Exception:
        log.exception("could not start the model engines; batches will not run")
        raise
    worker = Worker(WorkerContext(db=runtime.db, store=runtime.store, registry=engines, settings=settings))
    worker.start()
    runtime.worker = worker
    runtime.ready = True
    served = [card["id"] for card in engines.model_cards()]
    log.info("ready: serving %s", ", ".join(served) or "no models")


def create_app(settings: Settings | None = None) -> FastAPI:
    settings = settings or Settings()

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        settings.data_dir.mkdir(parents=True, exist_ok=True)
        url = settings.resolved_database_url()
        await migrate.upgrade(url)
        db = Database(url, sqlite_busy_timeout_ms=settings.sqlite_busy_timeout_ms)
        store = open_store(settings)
        # Before serving: this proves the store reachable (a missing bucket stops the server with a
        # clear message, tests/storage/test_blob_store.py), besides clearing old temp files.
        await store.sweep_temp(older_than_seconds=STALE_TEMP_SECONDS)
        auth = Authenticator(settings, db)
        if await auth.is_open_mode():
            log.warning(
                "!!! OPEN MODE: no API keys configured (BATCHD_API_KEYS or `batchd keys create`); "
                "every request is accepted as project 'default' !!!"
            )
        runtime = Runtime(settings, db, store, auth, asyncio.get_running_loop())
        install_runtime(app, runtime)
        sweeper = asyncio.create_task(sweep_forever(db, store, settings))
        # Webhook deliveries never wait on the worker, nor it on them: they share only the outbox.
        sender = asyncio.create_task(WebhookSender(db, settings).run_forever())
        # Engines take a while to load: serve files and /health (503 "starting") meanwhile.
        startup = asyncio.create_task(_start_engines_and_worker(runtime))
        background = [startup, sweeper, sender]
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
        version="0.1.0",
        description="OpenAI-compatible Files and Batches API backed by vLLM.",
        lifespan=lifespan,
    )
    # Added first, so it runs inside RequestIdMiddleware: its 413s carry a request id too.
    app.add_middleware(
        BodyLimitMiddleware,
        max_bytes=settings.max_json_body_bytes,
        larger={MESSAGE_BATCHES_PATH: settings.max_message_batch_bytes},
    )
    app.add_middleware(RequestIdMiddleware)
    app.add_middleware(HttpMetricsMiddleware)
    install_error_handlers(app)
    install_openapi(app)

    v1 = APIRouter(prefix="/v1", dependencies=[Depends(get_caller)])
    v1.include_router(files.router)
    v1.include_router(uploads.router)
    v1.include_router(batches.router)
    v1.include_router(models.router)
    v1.include_router(webhooks.router)
    v1.include_router(usage.router)
    v1.include_router(admin_projects.router)
    v1.include_router(admin_keys.router)
    v1.include_router(admin_rate_limits.router)
    v1.include_router(admin_model_permissions.router)
    v1.include_router(audit_logs.router)
    v1.include_router(queue.router)
    app.include_router(v1)
    app.include_router(anthropic_batches.router)
    app.include_router(health.router)
    app.include_router(metrics_api.router)
    install_ui(app)
    tracing.instrument_app(app)
    return app
