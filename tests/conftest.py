"""Shared fixtures: the API tests run batchd's app in process (`server`, `fake_server`: see
tests/support/app_server.py), the tests of processes, signals and engines a real `batchd serve`
subprocess (`start_server`, `model_server`); each once with SQLite + local blobs and once with
Postgres + S3 (`backend` parameter; see BACKENDS)."""

from __future__ import annotations

import os
from pathlib import Path

import openai
import pytest

from app.engine.protocol import Engines
from harness import postgres
from harness.client import openai_client
from harness.process import stop_all
from harness.seaweedfs import SeaweedFS
from harness.server import ServerProcess
from tests.support.app_server import AppServer
from tests.support.engines import eager_config
from tests.support.fake_engine import FakeEngines
from tests.support.head_start import HeadStarts
from tests.support.otlp import shared_receiver
from tests.support.outbound import StubNetwork, install_stub_network
from tests.support.s3 import S3Location
from tests.support.vllm_upstreams import NAME as VLLM_UPSTREAMS
from tests.support.webhook_receiver import WebhookReceiver
from tests.support.webhooks import clean_project

# vLLM ends an engine whose model step takes over 300 s (VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS).
# A head start's engines run in the low-share CPU group (tests/support/head_start.py) and a busy
# suite can starve them that long: a CI run lost the registry session's engine that way. Every
# engine the suite starts inherits this.
os.environ.setdefault("VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS", "3600")

# CI sets this: Postgres tests must run there, never skip.
REQUIRE_POSTGRES = os.environ.get("BATCHD_TEST_REQUIRE_POSTGRES") == "1"

KEYS = {
    "key-a": "proj-a",
    "key-b": "proj-b",
    "key-list": "proj-list",
    "key-batch-list": "proj-batch-list",
    "key-hooks": "proj-hooks",
    "key-load": "proj-load",
    "key-msgbatch": "proj-msgbatch",
}
# Webhook tests deliver to receivers on 127.0.0.1 (and audio lines fetch from there), retrying fast.
WEBHOOK_TEST_ENV = {
    "BATCHD_OUTBOUND_ALLOW": "127.0.0.1",
    "BATCHD_WEBHOOK_RETRY_BASE_SECONDS": "0.5",
    "BATCHD_WEBHOOK_POLL_SECONDS": "0.2",
}
API_KEYS_ENV = ",".join(f"{k}={p}" for k, p in KEYS.items())


# Backends: a database and a blob store. Every test that takes one runs on SQLite + the local
# directory and on Postgres + S3 (SeaweedFS); the database and the blob store are independent
# layers, so Postgres with local blobs is left to the tests that name it (the front door, the
# Administration API, idempotency). BATCHD_TEST_BACKENDS=sqlite (make test-fast) runs every
# backend-parametrized test on those only.
BACKENDS = ["sqlite", "postgres-s3"]
if os.environ.get("BATCHD_TEST_BACKENDS"):
    BACKENDS = [b for b in BACKENDS if b in os.environ["BATCHD_TEST_BACKENDS"].split(",")]
# Tests whose point is the engine (they take a VLLM_FIXTURES fixture) run on one backend: what
# the database and the blob store do with their lines is the same as with the fake engine, which
# runs on every backend. A test whose point is both (replicas sharing Postgres and S3) names
# its backend itself (`@pytest.mark.parametrize("backend", ["postgres-s3"], indirect=True)`).
ENGINE_BACKENDS = BACKENDS[:1]


def _parametrizes_backend_itself(metafunc) -> bool:
    return any(
        "backend" in (m.args[0] if isinstance(m.args[0], (list, tuple)) else m.args[0].replace(" ", "").split(","))
        for m in metafunc.definition.iter_markers("parametrize")
    )


def pytest_generate_tests(metafunc):
    if "backend" in metafunc.fixturenames and not _parametrizes_backend_itself(metafunc):
        backends = ENGINE_BACKENDS if VLLM_FIXTURES & set(metafunc.fixturenames) else BACKENDS
        metafunc.parametrize("backend", backends, indirect=True, scope="session")


# The fixtures that start vLLM engines (in process, or in `batchd serve` or `vllm serve`
# subprocesses). A test that takes one, directly or through other fixtures (`fixturenames` is the
# closure), is marked `vllm`; a test that starts them otherwise (its own servers with models, run-batch,
# a head start) carries `pytest.mark.vllm` itself. Every `vllm` test is also `engine`, as are those
# marked so by hand (fake upstream fleets, real `batchd serve` processes in tests/e2e, the tiny
# model's torch build); `make test-fast` leaves out `engine`, `make test`'s first session runs `vllm`.
VLLM_FIXTURES = {"model_server", "vllm_servers", "registry"}


def pytest_configure(config):
    config.addinivalue_line("markers", "ends_model_server: stops its backend's shared model server")
    config.addinivalue_line(
        "markers", "engine: starts an engine, a server with models or an e2e `batchd serve` (not in make test-fast)"
    )
    config.addinivalue_line("markers", "slow: takes half a minute or more with no engine (not in make test-fast)")
    config.addinivalue_line("markers", "vllm: runs vLLM engines (make test's first session, the rest beside it)")


def pytest_itemcollected(item):
    """Mark the tests that run vLLM and those that start an engine (see VLLM_FIXTURES) before
    `-m` selects."""
    if VLLM_FIXTURES & set(getattr(item, "fixturenames", ())):
        item.add_marker(pytest.mark.vllm)
    if item.get_closest_marker("vllm"):
        item.add_marker(pytest.mark.engine)


def _backend_of(item) -> str | None:
    callspec = getattr(item, "callspec", None)
    return callspec.params.get("backend") if callspec is not None else None


SERVER_LOG_LINES = 80


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """A failed test shows the end of each real server's log it used: CI prints only the report."""
    outcome = yield
    report = outcome.get_result()
    if report.when != "call" or not report.failed:
        return
    for name, value in getattr(item, "funcargs", {}).items():
        if isinstance(value, ServerProcess):
            tail = "\n".join(value.log().splitlines()[-SERVER_LOG_LINES:])
            report.sections.append((f"server log of {name} (last {SERVER_LOG_LINES} lines)", tail))


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items):
    """A test that ends its backend's shared model server runs right after the last other test
    on that backend (pytest has grouped the tests by backend by now: a backend's session
    fixtures, the model server among them, end when the next backend's begin)."""
    for item in [i for i in items if i.get_closest_marker("ends_model_server")]:
        items.remove(item)
        same_backend = [n for n, other in enumerate(items) if _backend_of(other) == _backend_of(item)]
        items.insert(same_backend[-1] + 1 if same_backend else len(items), item)


@pytest.fixture(scope="session", autouse=True)
def head_starts(request, tmp_path_factory):
    """Long work the selected tests need, started now at a low CPU share (tests/support/head_start.py).
    A pytest-xdist worker collects every selected test but runs only some: its work starts when a
    test takes it."""
    in_worker = "PYTEST_XDIST_WORKER" in os.environ
    selected = set() if in_worker else {Path(item.path).resolve() for item in request.session.items}
    starts = HeadStarts(selected, tmp_path_factory.mktemp("head-starts"))
    yield starts
    starts.close()


@pytest.fixture(scope="session")
def backend(request) -> str:
    return request.param


@pytest.fixture(scope="session")
def seaweedfs(tmp_path_factory):
    """One SeaweedFS (S3) server for the session, started the first time a test needs S3."""
    server = SeaweedFS(tmp_path_factory.mktemp("seaweedfs")).start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def storage_factory(backend, request):
    """Returns a function giving a fresh blob store for one server: None for the local directory,
    else an S3 location (its own bucket, so a test can list everything a server left there)."""

    def make() -> S3Location | None:
        if not backend.endswith("-s3"):
            return None
        return S3Location.fresh(request.getfixturevalue("seaweedfs"))

    return make


@pytest.fixture(scope="session")
def database_factory(backend):
    """Returns a function making a fresh database URL for this backend (None = SQLite in data dir)."""
    created: list[str] = []

    def make() -> str | None:
        if backend == "sqlite":
            return None
        try:
            url = postgres.create_database()
        except Exception as exc:  # noqa: BLE001 - any failure to reach Postgres
            if REQUIRE_POSTGRES:
                pytest.fail(f"Postgres is required here but unreachable: {exc!r}")
            pytest.skip(f"Postgres unreachable: {exc!r}")
        created.append(url)
        return url

    yield make
    for url in created:
        postgres.drop_database(url)


@pytest.fixture(scope="session")
def start_server(tmp_path_factory, database_factory, storage_factory):
    """Start a server with extra env; stopped at the end of the session."""
    servers: list[ServerProcess] = []

    def start(env: dict[str, str] | None = None, **kwargs) -> ServerProcess:
        data_dir = tmp_path_factory.mktemp("batchd")
        server = ServerProcess(data_dir, database_factory(), env=env, s3=storage_factory(), **kwargs).start()
        servers.append(server)
        return server

    yield start
    stop_all(servers)  # one by one, the last test's teardown took half a minute


@pytest.fixture(scope="module")
def start_app(tmp_path_factory, database_factory, storage_factory):
    """Start batchd's app in this process (tests/support/app_server.py) with extra env, and
    `engines` (tests/support/fake_engine.py) or, with `models`, its settings' engines (upstream
    fleets) to run batches; stopped at the end of the module. Not kept for the session: every
    app left running holds its database pools (Postgres ran out of connections), its worker's
    polling and a settled garbage collector (tests/engine/test_gc_heap.py) until the end."""
    apps: list[AppServer] = []

    def start(env: dict[str, str] | None = None, engines: Engines | None = None, models: bool = False) -> AppServer:
        data_dir = tmp_path_factory.mktemp("batchd")
        app = AppServer(data_dir, database_factory(), env, storage_factory(), engines, models).start()
        apps.append(app)
        return app

    yield start
    for app in reversed(apps):
        app.stop()


@pytest.fixture(scope="module")
def server(start_app) -> AppServer:
    """The shared app without models: keys for the projects in KEYS, expiry sweep every half second."""
    return start_app({"BATCHD_API_KEYS": API_KEYS_ENV, "BATCHD_SWEEP_INTERVAL": "0.5"})


@pytest.fixture
def client(server) -> openai.OpenAI:
    return server.client("key-a")


@pytest.fixture
def client_b(server) -> openai.OpenAI:
    return server.client("key-b")


@pytest.fixture(scope="module")
def fake_server(start_app) -> AppServer:
    """The shared app that runs batches on the fake engine (tests/support/fake_engine.py) under
    the built-in models' names, set up as `model_server` is: 3- and 10-second completion windows,
    batches capped at 3000 lines, webhooks to 127.0.0.1 retried fast."""
    return start_app(
        {
            "BATCHD_API_KEYS": API_KEYS_ENV,
            "BATCHD_COMPLETION_WINDOWS": "24h,1h,3s,10s",
            "BATCHD_MAX_BATCH_LINES": "3000",
            "BATCHD_SWEEP_INTERVAL": "0.5",
            **WEBHOOK_TEST_ENV,
        },
        engines=FakeEngines(),
    )


@pytest.fixture
def fake_client(fake_server) -> openai.OpenAI:
    return fake_server.client("key-a")


@pytest.fixture(scope="module")
def hooks_server(start_app) -> AppServer:
    """The webhook tests' app without models (every batch fails validation, so it ends with
    `batch.failed` within a second), delivering to 127.0.0.1 and retrying fast."""
    return start_app({"BATCHD_API_KEYS": API_KEYS_ENV, **WEBHOOK_TEST_ENV, "BATCHD_WEBHOOK_DISABLE_AFTER_SECONDS": "3"})


@pytest.fixture
def hooks_client(hooks_server):
    with clean_project(hooks_server) as client:
        yield client


@pytest.fixture
def receiver():
    with WebhookReceiver() as r:
        yield r


@pytest.fixture(scope="session")
def model_server(start_server, tmp_path_factory) -> ServerProcess:
    """A server running the two built-in models and the built-in LoRA adapter as `tl` (engines
    start once per session, on SQLite: ENGINE_BACKENDS).
    A 3-second completion window exists for expiry tests; batches are capped at 3000 lines; the
    chat engine runs 16 sequences at a time, so a few hundred lines already queue up. It exports
    traces to the session's OTLP receiver (tests/e2e/test_traces.py)."""
    config = eager_config(
        tmp_path_factory.mktemp("config") / "models.json",
        {"batchd-tiny-chat": {"max_num_seqs": 16}, "all-MiniLM-L6-v2": {}},
    )
    return start_server(
        {
            "BATCHD_API_KEYS": API_KEYS_ENV,
            "BATCHD_COMPLETION_WINDOWS": "24h,1h,3s",
            "BATCHD_MAX_BATCH_LINES": "3000",
            **WEBHOOK_TEST_ENV,
            **shared_receiver().server_env(),
        },
        models=True,
        # tl: the built-in LoRA adapter on the chat engine (tests/e2e/test_lora_adapters.py).
        args=[
            "--model",
            "batchd-tiny-chat",
            "--model",
            "all-MiniLM-L6-v2",
            "--lora",
            "tl=batchd-tiny-lora",
            "--config",
            str(config),
        ],
    )


@pytest.fixture
def model_client(model_server) -> openai.OpenAI:
    return openai_client(model_server.base_url, "key-a")


@pytest.fixture(scope="session")
def replica_storage_env(seaweedfs) -> dict[str, str]:
    """The one bucket every replica of a test cluster shares."""
    return S3Location.fresh(seaweedfs).env()


# Session scope: the backend parameter splits tests/e2e/test_upstream_vllm.py in two runs, and the
# replica cluster (tests/e2e/test_replicas.py) runs two replicas in front of the chat server.
@pytest.fixture(scope="session")
def vllm_servers(head_starts):
    """The running `vllm serve` pair: [chat, embeddings] (tests/support/vllm_upstreams.py)."""
    servers = head_starts.take(VLLM_UPSTREAMS)
    try:
        yield [server.wait() for server in servers]
    finally:
        stop_all(servers)  # each may take its 30 s of grace


@pytest.fixture
def stub_network(monkeypatch) -> StubNetwork:
    """A stub resolver and a connect hook refusing every address but loopback (outbound tests)."""
    return install_stub_network(monkeypatch)
