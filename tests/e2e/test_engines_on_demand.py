"""Engines on demand (`--max-resident-engines 1`) with the two built-in models: a 3,000-line
embeddings batch (24h) and a 100-line chat batch (1h) created just after it: a server SIGKILLed
in the middle of a swap, once restarted, completes both batches with every line exactly once, the
1h batch first, never two engine cores alive at once and `/health` answering 200 throughout.
Real servers of their own: the test counts their engine processes."""

from __future__ import annotations

import threading
from pathlib import Path

import httpx
import psutil
import pytest

from harness.client import openai_client
from harness.poll import wait_until
from harness.server import ServerProcess
from tests.conftest import API_KEYS_ENV
from tests.support.batches import (
    CHAT_MODEL,
    EMBED_MODEL,
    chat_line,
    create,
    embedding_line,
    results_by_custom_id,
    wait_for,
)
from tests.support.engines import eager_config
from tests.support.metrics import scrape, value

# SQLite only: the test loads engines six times (minutes a backend); the swap's durability
# rests on the same lines and leases as every backend's crash tests.
# Its own servers run the built-in models (tests/conftest.py: VLLM_FIXTURES).
pytestmark = [pytest.mark.vllm, pytest.mark.parametrize("backend", ["sqlite"], indirect=True)]

EMBED_LINES, CHAT_LINES = 3000, 100
CORE = "VLLM::EngineCore"


def _server(data_dir: Path, database_url: str | None, s3, config: Path) -> ServerProcess:
    # At risk as soon as it stalls when its model never served (the default waits a quarter of
    # its window): the 1h batch preempts the busy embeddings engine within seconds. And the idle
    # chat engine gives way at once (the default grace of 10 s would keep it for the chat batch,
    # created two seconds after the embeddings one: no swap to kill in).
    env = {
        "BATCHD_API_KEYS": API_KEYS_ENV,
        "BATCHD_MIN_RESIDENCY_SECONDS": "2",
        "BATCHD_AT_RISK_UNKNOWN_RATE_WAIT": "0",
        "BATCHD_ENGINE_DRAIN_GRACE_SECONDS": "0",
    }
    args = ["--max-resident-engines", "1", "--config", str(config)]
    return ServerProcess(data_dir, database_url, env=env, models=True, s3=s3, args=args)


@pytest.fixture
def one_engine(tmp_path, database_factory, storage_factory):
    """Starts servers of the built-in models with room for one engine, on one data dir and
    database (a restart carries on where the last one stopped); all killed at the end."""
    # Both built-ins, chat first as `batchd serve` lists them: the chat engine is the one loaded at start.
    config = eager_config(tmp_path / "models.json", {CHAT_MODEL: {}, EMBED_MODEL: {}})
    data_dir, database_url, s3 = tmp_path / "data", database_factory(), storage_factory()
    servers: list[ServerProcess] = []

    def start() -> ServerProcess:
        server = _server(data_dir, database_url, s3, config)
        servers.append(server.start(timeout=600))
        return server

    yield start
    for server in servers:
        server.kill()


class Watch:
    """Samples, in a thread for as long as the test runs, how many engine cores the server has
    alive and what `/health` answers."""

    def __init__(self, server: ServerProcess) -> None:
        self.server = server
        self.cores: list[int] = []
        self.health: list[int | str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)

    def alive_cores(self) -> int:
        count = 0
        try:
            children = psutil.Process(self.server.pid).children(recursive=True)
        except psutil.NoSuchProcess:
            return 0
        for proc in children:
            try:
                if proc.name() == CORE and proc.status() != psutil.STATUS_ZOMBIE:
                    count += 1
            except psutil.NoSuchProcess:
                pass
        return count

    def _poll(self) -> None:
        with httpx.Client(base_url=self.server.base_url.removesuffix("/v1"), timeout=10) as http:
            while not self._stop.wait(0.2):
                self.cores.append(self.alive_cores())
                try:
                    self.health.append(http.get("/health").status_code)
                except httpx.HTTPError as exc:
                    self.health.append(repr(exc))

    def __enter__(self) -> Watch:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(15)


def _models(server: ServerProcess) -> dict[str, dict]:
    client = openai_client(server.base_url, "key-a")
    return {model.id: model.model_dump() for model in client.models.list().data}


def _states(server: ServerProcess) -> dict[str, tuple[str, bool]]:
    return {name: (m["engine_state"], m["loaded"]) for name, m in _models(server).items()}


def _create_both(client):
    embeddings = create(
        client, [embedding_line(f"e-{i}", f"sentence {i}") for i in range(EMBED_LINES)], endpoint="/v1/embeddings"
    )
    # The chat batch follows once the embeddings batch runs (about two seconds: its validation).
    wait_for(client, embeddings.id, until=lambda b: b.status == "in_progress", timeout=120)
    chat = create(client, [chat_line(f"c-{i}", f"question {i}", max_tokens=8) for i in range(CHAT_LINES)], window="1h")
    return embeddings, chat


def _assert_each_line_once(client, batch, prefix: str, lines: int) -> None:
    assert batch.status == "completed", batch
    counts = batch.request_counts
    assert (counts.total, counts.completed, counts.failed) == (lines, lines, 0)
    output, errors = results_by_custom_id(client, batch)  # asserts no custom_id twice
    assert errors == {} and set(output) == {f"{prefix}-{i}" for i in range(lines)}
    assert all(line["response"]["status_code"] == 200 for line in output.values())


def test_a_kill_mid_swap_loses_nothing_and_the_due_batch_goes_first(one_engine):
    """One scenario, two servers (each engine load costs tens of seconds): the first server,
    chat loaded at start, loads embeddings for the 24h batch (the idle chat engine gives way),
    then swaps back to chat for the 1h batch once it is at risk (the chat model has served
    nothing yet: with no rate to project its batch at and BATCHD_AT_RISK_UNKNOWN_RATE_WAIT=0, it is
    at risk as soon as it stalls) and
    is SIGKILLed in that swap. The second runs the 1h batch first (the busy chat engine stays:
    the 24h batch, projected at its progress so far, is not at risk), then swaps to embeddings
    once chat drains; both complete with every line once."""
    server = one_engine()
    client = openai_client(server.base_url, "key-a")
    assert _states(server) == {CHAT_MODEL: ("ready", True), EMBED_MODEL: ("unloaded", False)}
    embeddings, chat = _create_both(client)
    # The chat batch's lines wait while the embeddings engine drains and the chat engine loads.
    wait_until(
        lambda: _models(server)[CHAT_MODEL]["engine_state"] == "starting" or None, 300, "the swap to the chat engine"
    )
    server.kill()

    server = one_engine()
    client = openai_client(server.base_url, "key-a")
    with Watch(server) as watch:
        chat = wait_for(client, chat.id, timeout=900)
        embeddings = wait_for(client, embeddings.id, timeout=900)

    _assert_each_line_once(client, chat, "c", CHAT_LINES)
    _assert_each_line_once(client, embeddings, "e", EMBED_LINES)
    # The 1h batch went ahead of the 24h one.
    assert chat.completed_at < embeddings.completed_at, (chat.completed_at, embeddings.completed_at)
    assert watch.cores and max(watch.cores) == 1, watch.cores
    assert watch.health and set(watch.health) == {200}, [h for h in watch.health if h != 200][:5]

    # The second server loaded the embeddings engine on demand, for the 24h batch's lines.
    scraped = scrape(server)
    loads = {m: value(scraped, "batchd_engine_loads_total", model=m) for m in (CHAT_MODEL, EMBED_MODEL)}
    assert loads[EMBED_MODEL] >= 1, loads
    assert value(scraped, "batchd_engine_load_seconds_count", model=EMBED_MODEL) == loads[EMBED_MODEL]
    resident = {m: value(scraped, "batchd_engine_resident", model=m) for m in (CHAT_MODEL, EMBED_MODEL)}
    assert sorted(resident.values()) == [0, 1], resident
