"""Single requests beside batches (issue #48): on one `batchd serve` with the built-in tiny chat
model in process (every setting at its default), two teams' large 24h batches run; in windows
of WINDOW_S seconds, alternately, nothing else runs ("alone") or a third team sends background
responses and flex chat calls one after another ("beside"). Each request's latency is from its
create call to its end (a background response: polled every POLL_S; flex: the HTTP call); the
batches' throughput is their completed lines over each window, and each round's ratio is
beside / alone."""

from __future__ import annotations

import math
import statistics
import threading
import time
from collections.abc import Callable
from pathlib import Path

import openai

from bench.report import Check
from bench.workloads.w6.inprocess import TINY_CHAT, tiny_lines
from harness.poll import wait_until
from harness.server import ServerProcess
from harness.tenancy import key_of

BATCH_PROJECTS = ("bg-a", "bg-b")
SINGLE_PROJECT = "single"
WINDOW_S = 20.0
POLL_S = 0.1
# The gap between one single request's end and the next one's create, per lane.
GAP_S = 1.0
# Goals: a single request lands within seconds (the acceptance bar is 5 s for one
# background response beside a 6,000-line batch), and costs the batches little.
LATENCY_P95_MAX_S = 5.0
THROUGHPUT_RATIO_MIN = 0.9
# Lines for every window with room to spare: about 800 lines/s on this host, so two teams' two
# batches of 50,000 (the most a batch takes) last five minutes, the windows two.
BATCH_LINES = 50_000
BATCHES_PER_PROJECT = 2
# A response that reached max_output_tokens ends `incomplete`: answered, as a completed one is.
ENDED_WELL = ("completed", "incomplete")


def percentile(values: list[float], q: float) -> float | None:
    """The q-th percentile (0-100) by nearest rank; None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(1, math.ceil(q / 100 * len(ordered))) - 1]


def latency_summary(latencies: list[float]) -> dict:
    return {
        "requests": len(latencies),
        "p50_s": _rounded(percentile(latencies, 50)),
        "p95_s": _rounded(percentile(latencies, 95)),
        "max_s": _rounded(max(latencies, default=None)),
    }


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 2)


def throughput_ratios(windows: list[dict]) -> list[float]:
    """Each round's beside / alone lines per second (windows come in pairs, one round each)."""
    by_round: dict[int, dict[str, float]] = {}
    for w in windows:
        by_round.setdefault(w["round"], {})[w["kind"]] = w["lines_per_second"]
    return [round(r["beside"] / r["alone"], 3) for _, r in sorted(by_round.items()) if r.get("alone")]


def lane_checks(background: list[float], flex: list[float], ratios: list[float], failures: int) -> list[dict]:
    checks = [
        Check.at_most(
            f"{lane} p95 latency, create to end (s)",
            percentile(values, 95),
            LATENCY_P95_MAX_S,
            value=_rounded(percentile(values, 95)),
        ).to_dict()
        for lane, values in (("background response", background), ("flex chat call", flex))
    ]
    ratio = statistics.median(ratios) if ratios else None
    checks.append(
        Check.at_least(
            "batches' throughput beside / alone (median of rounds)",
            ratio,
            THROUGHPUT_RATIO_MIN,
            value=None if ratio is None else f"{ratio:.2f}x ({', '.join(f'{r:.2f}' for r in ratios)})",
        ).to_dict()
    )
    checks.append(Check.at_most("single requests not completed", failures, 0).to_dict())
    return checks


def _background_once(client: openai.OpenAI, n: int) -> tuple[float, str]:
    began = time.monotonic()
    response = client.responses.create(model=TINY_CHAT, input=f"single {n}", background=True, max_output_tokens=16)
    while response.status in ("queued", "in_progress"):
        time.sleep(POLL_S)
        response = client.responses.retrieve(response.id)
    return time.monotonic() - began, str(response.status)


def _flex_once(client: openai.OpenAI, n: int) -> tuple[float, str]:
    began = time.monotonic()
    completion = client.chat.completions.create(
        model=TINY_CHAT, messages=[{"role": "user", "content": f"flex {n}"}], max_tokens=8, service_tier="flex"
    )
    return time.monotonic() - began, "completed" if completion.service_tier == "flex" else "no flex tier"


def _lane(send: Callable[[openai.OpenAI, int], tuple[float, str]], client: openai.OpenAI, until: float, out: dict):
    """Send one request after another until `until`; latencies of those that completed, and a count of the others."""
    n = 0
    while time.monotonic() < until:
        n += 1
        try:
            latency, status = send(client, n)
        except openai.APIError as e:
            latency, status = 0.0, f"{type(e).__name__}: {e}"
        if status in ENDED_WELL:
            out["latencies"].append(latency)
        else:
            out["failures"].append(status)
        time.sleep(GAP_S)


def _completed(clients: dict[str, openai.OpenAI], batches: dict[str, str]) -> int:
    total = 0
    for batch_id, project in batches.items():
        counts = clients[project].batches.retrieve(batch_id).request_counts
        total += counts.completed if counts else 0
    return total


def lanes_run(work: Path, scale: float, rounds: int, log: Callable[[str], None] = print) -> dict:
    projects = (*BATCH_PROJECTS, SINGLE_PROJECT)
    work.mkdir(parents=True, exist_ok=True)
    window = max(5.0, WINDOW_S * scale)
    # The defaults users get: SQLite in the data directory, the model's default engine settings.
    server = ServerProcess(
        work / "replica",
        env={"BATCHD_API_KEYS": ",".join(f"{key_of(p)}={p}" for p in projects)},
        models=True,
        args=["--model", TINY_CHAT],
    )
    lanes: dict[str, dict[str, list]] = {name: {"latencies": [], "failures": []} for name in ("background", "flex")}
    windows: list[dict] = []
    try:
        booted = time.monotonic()
        server.start(timeout=900)
        startup = time.monotonic() - booted
        clients = {p: server.client(key_of(p), max_retries=0, timeout=120) for p in projects}
        lines = max(1, int(BATCH_LINES * scale))
        batches: dict[str, str] = {}  # batch id -> project
        for p in BATCH_PROJECTS:
            for n in range(BATCHES_PER_PROJECT):
                tag = f"{p}-{n}"
                file_id = clients[p].files.create(file=(f"{tag}.jsonl", tiny_lines(tag, lines)), purpose="batch").id
                batch = clients[p].batches.create(
                    input_file_id=file_id, endpoint="/v1/chat/completions", completion_window="24h"
                )
                batches[batch.id] = p
        wait_until(lambda: _completed(clients, batches) > 0, timeout=600, what="the batches running")
        time.sleep(window / 3)  # past the first checkpoints
        for n in range(1, rounds + 1):
            # Alternate which comes first, so a drift within a round is not taken for the lanes' cost.
            for kind in ("alone", "beside") if n % 2 else ("beside", "alone"):
                before, began = _completed(clients, batches), time.monotonic()
                until = began + window
                senders = []
                if kind == "beside":
                    single = clients[SINGLE_PROJECT]
                    for name, send in (("background", _background_once), ("flex", _flex_once)):
                        thread = threading.Thread(target=_lane, args=(send, single, until, lanes[name]))
                        thread.start()
                        senders.append(thread)
                while time.monotonic() < until:
                    time.sleep(0.2)
                after, ended = _completed(clients, batches), time.monotonic()
                rate = round((after - before) / (ended - began), 1)
                windows.append({"round": n, "kind": kind, "lines_per_second": rate})
                log(f"round {n} {kind}: {rate} lines/s")
                for thread in senders:
                    thread.join()
        # A batch that ended before the last window would make that window's throughput low.
        ended_early = [b for b, p in batches.items() if clients[p].batches.retrieve(b).status != "in_progress"]
    finally:
        server.kill()
    failures = [f for lane in lanes.values() for f in lane["failures"]]
    ratios = throughput_ratios(windows)
    return {
        "model": TINY_CHAT,
        "startup_seconds": round(startup, 1),
        "window_seconds": window,
        "batch_lines": lines,
        "batches": len(batches),
        "batches_ended_early": ended_early,
        "windows": windows,
        "ratios": ratios,
        "background": latency_summary(lanes["background"]["latencies"]),
        "flex": latency_summary(lanes["flex"]["latencies"]),
        "failures": failures[:20],
        "checks": lane_checks(lanes["background"]["latencies"], lanes["flex"]["latencies"], ratios, len(failures)),
    }
