"""A quote against the batch it quoted (issue #47): on one `batchd serve` with the built-in tiny
chat model in process (every setting at its default), two teams' 40,000-line batches run; then
four batches, each created right after a quote (`POST /v1/batches/estimate`) of the same body,
in different places in the queue. Each quote's projected start and finish is set against the
batch's in_progress_at and completed_at: actual / projected duration, both from the create."""

from __future__ import annotations

import functools
import statistics
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import openai
from openai.types import Batch

from bench.report import Check
from bench.workloads.w6.inprocess import TINY_CHAT, tiny_lines
from bench.workloads.w6.plan import Planned
from harness.poll import TERMINAL, wait_until
from harness.server import ServerProcess
from harness.tenancy import key_of

ENDPOINT = "/v1/chat/completions"
# The median ratio is judged against this band: a quote is a snapshot of the queue at the
# current rates, so later arrivals (slower) and departures (faster) move every batch's finish.
RATIO_LOW, RATIO_HIGH = 0.67, 1.5
# Each quote comes this long after the batch created before it had its first lines done, so
# the worker's rates (over up to 10 s) have seen that batch run.
SPACING_S = 5.0

# Where each quoted batch lands in the queue, by its name.
POSITIONS = {
    "new-team": "a third team beside the two running",
    "ahead-of-own": "1h, ahead of its team's running 24h batch",
    "behind-own": "24h, behind its team's running 24h batch",
    "new-large": "a fourth team's large batch",
}


def quote_plan(scale: float) -> tuple[list[Planned], list[Planned]]:
    """The background batches, created first, and the quoted ones, in the order they are created."""

    def size(n: int) -> int:
        return max(1, int(n * scale))

    background = [Planned(p, "day", TINY_CHAT, size(40_000), "24h") for p in ("bg-a", "bg-b")]
    quoted = [
        Planned("q1", "new-team", TINY_CHAT, size(8_000), "24h"),
        Planned("bg-a", "ahead-of-own", TINY_CHAT, size(5_000), "1h"),
        Planned("q1", "behind-own", TINY_CHAT, size(4_000), "24h"),
        Planned("q2", "new-large", TINY_CHAT, size(20_000), "24h"),
    ]
    return background, quoted


def quoted_row(b: Planned, quote: dict, created: float, batch, first_done: float | None) -> dict:
    """One quoted batch: its quote and its run in seconds after its create call was sent, and
    actual / projected duration (created to completed; None when either is missing)."""

    def after(t: float | None) -> float | None:
        return None if t is None else round(t - created, 1)

    projected, actual = after(quote.get("projected_finish_at")), after(batch.completed_at)
    ratio = round(actual / projected, 3) if projected and actual is not None and projected > 0 else None
    return {
        "batch": b.tag,
        "position": POSITIONS[b.name],
        "lines": b.lines,
        "window": b.window,
        "status": batch.status,
        "quoted_lines_per_second": quote.get("lines_per_second"),
        "projected_start_s": after(quote.get("projected_start_at")),
        "in_progress_s": after(batch.in_progress_at),
        "first_done_s": after(first_done),
        "projected_finish_s": projected,
        "completed_s": actual,
        "ratio": ratio,
    }


def ratio_check(rows: list[dict]) -> dict:
    """The median of the quoted batches' ratios, within RATIO_LOW-RATIO_HIGH; a batch without a
    ratio (no projection, not completed) counts as infinitely off."""
    ratios = [r["ratio"] if r["ratio"] is not None else float("inf") for r in rows]
    median = statistics.median(ratios)
    return Check.within(
        "median actual / projected duration, created to completed",
        median,
        RATIO_LOW,
        RATIO_HIGH,
        goal=f"{RATIO_LOW}x-{RATIO_HIGH}x",
        value=f"{median:.2f}x ({', '.join('-' if r is None else f'{r:.2f}' for r in (row['ratio'] for row in rows))})",
    ).to_dict()


def _create(client: openai.OpenAI, body: dict) -> Batch:
    """batches.create with the very body the quote was asked for."""
    return client.post("/batches", body=body, cast_to=Batch)


def _quoted(client: openai.OpenAI, body: dict, what: str) -> tuple[dict, int]:
    """The first quote with a projection (until the worker has measured a rate, in its first
    seconds, a quote projects nothing) and how many quotes that took."""
    asked = 0

    def projected() -> dict:
        nonlocal asked
        asked += 1
        quote = client.post("/batches/estimate", body=body, cast_to=dict)
        return quote if quote.get("projected_finish_at") is not None else {}

    return wait_until(projected, timeout=300, interval=1.0, what=f"a projection for {what}"), asked


def _watch(client: openai.OpenAI, batch_id: str) -> tuple[float | None, Batch]:
    """Poll the batch until it ends: when its first lines were seen done, and the batch."""
    first_done = None
    while True:
        batch = client.batches.retrieve(batch_id)
        if first_done is None and batch.request_counts and batch.request_counts.completed:
            first_done = time.time()
        if batch.status in TERMINAL:
            return first_done, batch
        time.sleep(0.5)


def quote_round(work: Path, scale: float, log: Callable[[str], None] = print) -> dict:
    background, quoted = quote_plan(scale)
    projects = sorted({b.project for b in background + quoted})
    work.mkdir(parents=True, exist_ok=True)
    # The defaults users get: SQLite in the data directory, the model's default engine settings.
    server = ServerProcess(
        work / "replica",
        env={"BATCHD_API_KEYS": ",".join(f"{key_of(p)}={p}" for p in projects)},
        models=True,
        args=["--model", TINY_CHAT],
    )
    try:
        booted = time.monotonic()
        server.start(timeout=900)
        startup = time.monotonic() - booted
        clients = {p: server.client(key_of(p), max_retries=2) for p in projects}
        files = {
            b: clients[b.project].files.create(file=(f"{b.name}.jsonl", tiny_lines(b.tag, b.lines)), purpose="batch").id
            for b in background + quoted
        }
        bodies = {
            b: {"input_file_id": files[b], "endpoint": ENDPOINT, "completion_window": b.window}
            for b in background + quoted
        }
        with ThreadPoolExecutor(len(background) + len(quoted)) as watchers:
            began = time.time()
            running: dict[Planned, Future] = {}
            for b in background:
                batch = _create(clients[b.project], bodies[b])
                running[b] = watchers.submit(_watch, clients[b.project], batch.id)
            previous = functools.partial(_progress, clients[background[-1].project], batch.id)
            quotes: dict[Planned, tuple[dict, int, float]] = {}
            for b in quoted:
                # The batch created before has had lines done for SPACING_S.
                wait_until(previous, timeout=600, what="the batch created before running")
                time.sleep(SPACING_S)
                quote, asked = _quoted(clients[b.project], bodies[b], b.tag)
                created = time.time()
                quotes[b] = (quote, asked, created)
                batch_id = _create(clients[b.project], bodies[b]).id
                running[b] = watchers.submit(_watch, clients[b.project], batch_id)
                previous = functools.partial(_progress, clients[b.project], batch_id)
                log(
                    f"quoted {b.tag}: {quote['lines_per_second']} lines/s, {quote['projected_finish_at'] - created:.1f} s"
                )
            ended = {b: future.result() for b, future in running.items()}
    finally:
        server.kill()
    rows = [
        {**quoted_row(b, quotes[b][0], quotes[b][2], ended[b][1], ended[b][0]), "quotes_asked": quotes[b][1]}
        for b in quoted
    ]
    last = max(batch.completed_at or 0 for _, batch in ended.values())
    return {
        "model": TINY_CHAT,
        "startup_seconds": round(startup, 1),
        "background": [
            {"batch": b.tag, "lines": b.lines, "window": b.window, "status": ended[b][1].status} for b in background
        ],
        "batches": rows,
        "not_completed": [b.tag for b, (_, batch) in ended.items() if batch.status != "completed"],
        "seconds": round(last - began, 1),
        "checks": [ratio_check(rows)],
    }


def _progress(client: openai.OpenAI, batch_id: str) -> bool:
    batch = client.batches.retrieve(batch_id)
    return bool(batch.request_counts and batch.request_counts.completed)
