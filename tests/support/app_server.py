"""batchd's app in the test's own process: `create_app(settings)` with its lifespan, served to
clients through starlette's TestClient (an httpx.Client that runs the ASGI app on an event loop
in a thread of its own, where the app's background tasks and worker keep running between
requests). The surface of harness/server.py's ServerProcess that tests use, without a process:
`base_url`, `data_dir`, `database_url`, `s3` (tests/support/db.py reaches the database and blobs
through them), plus `http` (the httpx client), `client(key)` (an `openai` client of it), and
`runtime` with `call` for tests that drive the app's own database and store on its loop.

Settings come from the same `BATCHD_*` environment a `batchd serve` would be given."""

from __future__ import annotations

import asyncio
import atexit
import functools
import itertools
import os
import shutil
import tempfile
import threading
from collections.abc import Awaitable, Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

import httpx
import openai
from starlette.testclient import TestClient

from app.api.runtime import Runtime, runtime_of
from app.core.config import Settings
from app.db import migrate
from app.engine.protocol import Engines
from app.http.app import create_app
from harness.client import anthropic_client, async_openai_client, openai_client
from harness.server import BlobLocation

if TYPE_CHECKING:
    import anthropic

# Requests come from and to loopback, as they do to a `batchd serve` on 127.0.0.1.
ORIGIN = "http://127.0.0.1"
PEER = ("127.0.0.1", 50000)
_environ = threading.Lock()
_replica_numbers = itertools.count(1)
T = TypeVar("T")


@contextmanager
def _environment(env: Mapping[str, str]) -> Iterator[None]:
    """`env` in os.environ while the settings are read (pydantic-settings reads nothing else)."""
    with _environ:
        saved = {name: os.environ.get(name) for name in env}
        os.environ.update(env)
        try:
            yield
        finally:
            for name, value in saved.items():
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value


@functools.cache
def _migrated_sqlite() -> Path:
    """A SQLite database at head, made once per test process: an app's own database starts as
    its copy, so its lifespan's upgrade has nothing to do (a fresh one is ~0.25 s of CPU an app)."""
    folder = tempfile.mkdtemp(prefix="batchd-template-")
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    path = Path(folder) / "batchd.db"
    migrate.upgrade_sync(f"sqlite+aiosqlite:///{path}")
    return path


def settings_for(data_dir: Path, database_url: str | None, env: Mapping[str, str]) -> Settings:
    """The settings `batchd serve --data-dir data_dir [--database-url url]` reads with `env`."""
    overrides: dict[str, object] = {"data_dir": data_dir}
    if database_url:
        overrides["database_url"] = database_url
    with _environment(env):
        return Settings(**overrides)  # type: ignore[arg-type]


class _ThreadedTransport(httpx.AsyncBaseTransport):
    """An async client's requests, sent through the TestClient from worker threads: the app
    runs on the TestClient's loop, not on the caller's."""

    def __init__(self, http: httpx.Client) -> None:
        self.http = http

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        sync = self.http.build_request(
            request.method, str(request.url), headers=request.headers.raw, content=await request.aread()
        )
        response = await asyncio.to_thread(self.http.send, sync)
        return httpx.Response(response.status_code, headers=response.headers, content=response.content)


class AppServer:
    """One app and its lifespan, from :meth:`start` to :meth:`stop`. With `engines` (e.g.
    tests/support/fake_engine.py) it runs batches on them; with `models`, on the engines its
    settings name (upstream fleets: no vLLM in the test's process); else none, as `--no-models`."""

    def __init__(
        self,
        data_dir: Path,
        database_url: str | None = None,
        env: Mapping[str, str] | None = None,
        s3: BlobLocation | None = None,
        engines: Engines | None = None,
        models: bool = False,
    ) -> None:
        self.data_dir = data_dir
        self.database_url = database_url
        self.s3 = s3
        self.engines = engines
        self.env = {**(s3.env() if s3 is not None else {}), **(env or {})}
        # A replica's default name is its host and pid, which every app in this process shares.
        self.env.setdefault("BATCHD_REPLICA_ID", f"app-{next(_replica_numbers)}")
        if engines is None and not models:  # as ServerProcess: no models unless asked
            self.env.setdefault("BATCHD_NO_MODELS", "true")
        # The S3 client reads its credentials from the AWS chain: this process's environment.
        os.environ.update({k: v for k, v in self.env.items() if k.startswith("AWS_")})
        self.settings = settings_for(data_dir, database_url, self.env)
        self.app = create_app(self.settings, engines)
        self.http = TestClient(self.app, base_url=ORIGIN, raise_server_exceptions=False, client=PEER)
        self.running = False

    base_url = f"{ORIGIN}/v1"

    def start(self) -> AppServer:
        database = self.data_dir / "batchd.db"
        if self.database_url is None and not database.exists():  # SQLite in the data dir, as serve's default
            self.data_dir.mkdir(parents=True, exist_ok=True)
            shutil.copy(_migrated_sqlite(), database)  # with its mode: private, as serve makes it
        self.http.__enter__()  # runs the lifespan: migrations, store, background tasks, worker
        self.running = True
        return self

    def stop(self) -> None:
        """Ends the lifespan; safe to call twice, as ServerProcess.stop."""
        if self.running:
            self.running = False
            self.http.__exit__(None, None, None)

    def __enter__(self) -> AppServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def runtime(self) -> Runtime:
        """The running app's settings, database and store: use them through :meth:`call`."""
        return runtime_of(self.app)

    def call(self, function: Callable[..., Awaitable[T]], *args: object) -> T:
        """`await function(*args)` on the app's event loop, where its database pools live."""
        assert self.http.portal is not None, "the app is not running"
        return self.http.portal.call(function, *args)

    def as_key(self, api_key: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {api_key}"}

    def client(self, api_key: str, **options) -> openai.OpenAI:
        return openai_client(self.base_url, api_key, http_client=self.http, **options)

    def async_client(self, api_key: str, **options) -> openai.AsyncOpenAI:
        """An asyncio client: its requests go to the app's loop through `http`, from threads."""
        transport = _ThreadedTransport(self.http)
        return async_openai_client(
            self.base_url, api_key, http_client=httpx.AsyncClient(transport=transport), **options
        )

    def anthropic(self, api_key: str, **options) -> anthropic.Anthropic:
        return anthropic_client(self.base_url, api_key, http_client=self.http, **options)
