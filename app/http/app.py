"""Application factory: lifespan (migrations, storage, background tasks), middleware, routers."""

from __future__ import annotations

import asyncio
import logging
from contextlib import asynccontextmanager, suppress

from fastapi import APIRouter, Depends, FastAPI

from app.api import anthropic_batches, batches, files, health, models, queue, uploads, usage, webhooks
from app.api import metrics as metrics_api
from app.api.deps import get_project
from app.background.model_publisher import publish_models_forever
from app.background.sweeper import STALE_TEMP_SECONDS, sweep_forever
from app.background.webhook_sender import WebhookSender
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
from app.storage import BlobStore, open_store
from app.ui import install_ui
from app.worker.context import WorkerContext
from app.worker.runner import Worker

log = logging.getLogger("batchd")


async def _start_engines_and_worker(app: FastAPI, settings: Settings, db: Database, store: BlobStore) -> None:
    if settings.api_only:
        app.state.registry, app.state.ready = NoModels(), True
        log.info("ready: API only (no engines, no worker)")
        return
    try:
        app.state.registry = await start_registry(settings)
    except Exception:
        log.exception("could not start the model engines; batches will not run")
        raise
    worker = Worker(WorkerContext(db=db, store=store, registry=app.state.registry, settings=settings))
    worker.start()
    app.state.worker = worker
    app.state.ready = True
    served = [card["id"] for card in app.state.registry.model_cards()]
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
        app.state.settings, app.state.db, app.state.store, app.state.auth = settings, db, store, auth
        app.state.loop = asyncio.get_running_loop()
        app.state.registry = app.state.worker = None
        sweeper = asyncio.create_task(sweep_forever(db, store, settings))
        # Webhook deliveries never wait on the worker, nor it on them: they share only the outbox.
        sender = asyncio.create_task(WebhookSender(db, settings).run_forever())
        # Engines take a while to load: serve files and /health (503 "starting") meanwhile.
        startup = asyncio.create_task(_start_engines_and_worker(app, settings, db, store))
        background = [startup, sweeper, sender]
        if not (settings.api_only or settings.no_models):
            # So that --api-only replicas on this database can list what this one serves.
            background.append(
                asyncio.create_task(
                    publish_models_forever(
                        db, settings.replica_id, lambda: model_entries(app.state.registry, app.state.worker)
                    )
                )
            )
        try:
            yield
        finally:
            app.state.ready = False
            for task in background:
                task.cancel()
                with suppress(asyncio.CancelledError):
                    await task
            if app.state.worker is not None:
                await app.state.worker.stop()
            if app.state.registry is not None:
                await app.state.registry.shutdown()
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

    v1 = APIRouter(prefix="/v1", dependencies=[Depends(get_project)])
    v1.include_router(files.router)
    v1.include_router(uploads.router)
    v1.include_router(batches.router)
    v1.include_router(models.router)
    v1.include_router(webhooks.router)
    v1.include_router(usage.router)
    v1.include_router(queue.router)
    app.include_router(v1)
    app.include_router(anthropic_batches.router)
    app.include_router(health.router)
    app.include_router(metrics_api.router)
    install_ui(app)
    return app
