"""One system's round: a fresh `batchd serve` with the three models (one resident engine, or
all), the round's batches created (the 24h wave, then the 1h wave), `/v1/models` sampled until
every batch ended, the engine counters scraped before and after, every result line counted."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import openai
from openai.types import Batch
from prometheus_client.parser import text_string_to_metric_families

from bench.workloads.w10.measure import (
    LOAD_SECONDS,
    LOADS,
    SAMPLE_S,
    Sample,
    batch_row,
    counter_delta,
    engine_timeline,
    line_tally,
    system_measures,
)
from bench.workloads.w10.plan import (
    SECOND_WAVE_DELAY_S,
    Planned,
    batch_lines,
    round_plan,
    serve_args,
    write_config,
)
from harness.poll import TERMINAL
from harness.server import ServerProcess

PROJECT = "w10"
KEY = f"key-{PROJECT}"
POLL_S = 0.25
STARTUP_TIMEOUT_S = 1200.0


def _counters(server: ServerProcess) -> tuple[dict[str, float], dict[str, float]]:
    """Engine loads and load seconds per model, from `/metrics`."""
    text = server.http.get(server.base_url.removesuffix("/v1") + "/metrics").raise_for_status().text
    loads: dict[str, float] = {}
    seconds: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name in (LOADS, LOAD_SECONDS):
                target = loads if sample.name == LOADS else seconds
                target[sample.labels.get("model", "")] = sample.value
    return loads, seconds


class Sampler:
    """Looks at `/v1/models` every SAMPLE_S, in a thread, from ``t0`` (epoch seconds) on."""

    def __init__(self, server: ServerProcess, t0: float) -> None:
        self.url, self.t0 = f"{server.base_url}/models", t0
        self.samples: list[Sample] = []
        self.errors = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="w10-sampler", daemon=True)

    def _run(self) -> None:
        with httpx.Client(headers={"Authorization": f"Bearer {KEY}"}, timeout=10) as http:
            while not self._stop.is_set():
                now = time.time()
                try:
                    cards = http.get(self.url).raise_for_status().json()["data"]
                except (httpx.HTTPError, KeyError, ValueError):
                    self.errors += 1
                else:
                    loaded = {c["id"]: bool(c.get("loaded")) for c in cards if not c.get("parent")}
                    in_flight = {c["id"]: int(c.get("lines_in_flight") or 0) for c in cards if c["id"] in loaded}
                    self.samples.append(Sample(now - self.t0, loaded, in_flight))
                self._stop.wait(max(0.0, SAMPLE_S - (time.time() - now)))

    def __enter__(self) -> Sampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(15)


def _create(client: openai.OpenAI, batch: Planned, file_id: str) -> str:
    body = {"input_file_id": file_id, "endpoint": batch.endpoint, "completion_window": batch.window}
    return client.post("/batches", body=body, cast_to=Batch).id


def _wait_all(client: openai.OpenAI, ids: dict[str, str], t0: float, timeout: float) -> dict[str, tuple[float, Batch]]:
    """Poll the batches (one list call) until all ended: batch id -> (seconds after t0 it was
    seen ended, the batch)."""
    ended: dict[str, tuple[float, Batch]] = {}
    give_up = time.monotonic() + timeout
    while len(ended) < len(ids):
        if time.monotonic() > give_up:
            waiting = sorted(name for batch_id, name in ids.items() if batch_id not in ended)
            raise TimeoutError(f"batches not ended after {timeout:.0f} s: {waiting}")
        now = time.time()
        for batch in client.batches.list(limit=100).data:
            if batch.id in ids and batch.id not in ended and batch.status in TERMINAL:
                ended[batch.id] = (now - t0, batch)
        time.sleep(POLL_S)
    return ended


def _custom_ids(client: openai.OpenAI, file_id: str | None) -> list[str]:
    if not file_id:
        return []
    # Split on newlines only: str.splitlines also splits inside a JSON string at U+2028, U+0085
    # and the like, which the tiny chat model's answers contain and JSON leaves unescaped.
    return [json.loads(line)["custom_id"] for line in client.files.content(file_id).text.split("\n") if line]


def system_round(
    system: str,
    work: Path,
    *,
    scale: float,
    eager: bool,
    min_residency_s: float,
    timeout: float,
    log: Callable[[str], None] = print,
) -> dict:
    """Run ``system`` (plan.BUDGET or plan.RESIDENT) once on the round's work; its measures."""
    day, hour = round_plan(scale)
    work.mkdir(parents=True, exist_ok=True)
    env = {"BATCHD_API_KEYS": f"{KEY}={PROJECT}", "BATCHD_MIN_RESIDENCY_SECONDS": f"{min_residency_s:g}"}
    server = ServerProcess(
        work / "data", env=env, models=True, args=serve_args(system, write_config(work / "models.json", eager))
    )
    try:
        booted = time.monotonic()
        server.start(timeout=STARTUP_TIMEOUT_S)
        startup = time.monotonic() - booted
        client = server.client(KEY, max_retries=2, timeout=120)
        files = {
            b: client.files.create(file=(f"{b.name}.jsonl", batch_lines(b)), purpose="batch").id for b in day + hour
        }
        loads_before, seconds_before = _counters(server)
        t0 = time.time()
        created: dict[Planned, tuple[str, float]] = {}
        with Sampler(server, t0) as sampler:
            for b in day:
                created[b] = (_create(client, b, files[b]), time.time() - t0)
            time.sleep(SECOND_WAVE_DELAY_S)
            for b in hour:
                created[b] = (_create(client, b, files[b]), time.time() - t0)
            ended = _wait_all(client, {bid: b.name for b, (bid, _) in created.items()}, t0, timeout)
        loads_after, seconds_after = _counters(server)
        rows = []
        for b, (batch_id, created_s) in created.items():
            ended_s, batch = ended[batch_id]
            tally = line_tally(
                b.custom_ids(),
                _custom_ids(client, batch.output_file_id),
                _custom_ids(client, batch.error_file_id),
            )
            rows.append(batch_row(b, created_s, ended_s, batch.status, tally))
    finally:
        server.kill()
    measures = system_measures(
        rows,
        sampler.samples,
        counter_delta(loads_before, loads_after),
        counter_delta(seconds_before, seconds_after),
    )
    log(
        f"{system}: makespan {measures['makespan_s']} s, {measures['loads']} loads "
        f"({measures['load_seconds']} s), busy {measures['busy_fraction']}, worst 1h {measures['worst_1h_finish_s']} s"
    )
    return {
        "system": system,
        "startup_s": round(startup, 1),
        **measures,
        "samples": len(sampler.samples),
        "sample_errors": sampler.errors,
        "timeline": engine_timeline(sampler.samples),
        "batches": rows,
        "log": str(server.log_path),
        "error": None,
    }
