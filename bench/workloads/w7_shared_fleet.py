"""W7, a shared fleet: online users and a batchd batch on the same `vllm serve
--scheduling-policy priority` (the tiny chat model), with batchd's ``priority:`` on and off.

An online client sends chat requests straight to vLLM at a fixed rate (open loop: a request
leaves every 1/rate s whether or not the last one answered) and records each one's latency.
Phases, in one run and against one server:

- ``online alone``: no batch; the latency online users have on an idle fleet;
- ``batch alone``: a batch and no online traffic; the engine's batch throughput;
- ``priority on`` / ``priority off``: a batch through batchd (model ``batch-prio``, whose
  ``upstream:`` block says ``priority: true``, or ``batch-plain``) while the online client
  runs; interleaved for ``--rounds`` rounds, the order swapped each round.

Each batch phase waits until the batch is running, measures for ``--seconds``, then cancels the
batch and waits for vLLM to be idle before the next phase. The batch's rate is the change of its
``request_counts.completed`` over the window.

batchd sends at most the upstream's ``max_concurrency`` lines to a URL at once, and vLLM runs
``--max-num-seqs`` of them: the rest wait in vLLM's queue. Priority reorders that queue only (a
running line keeps its slot), so what it saves an online request is the queue ahead of it:
``--max-concurrency`` minus ``--max-num-seqs`` batch lines of ``--batch-tokens`` each.

    .venv/bin/python -m bench --workloads W7 [--rounds 2] [--scale 1.0] [--label -deep-queue] \
        [--param rate=2 --param max_num_seqs=8 --param max_concurrency=32 --param batch_tokens=128]

``--scale`` multiplies each phase's window of 20 s.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import time
from dataclasses import asdict, dataclass, field
from typing import Any, ClassVar

import httpx
import openai

from app.engine.config.tiny_chat import build_tiny_chat_model
from bench.report import Check, Document, Report, checks_table
from bench.workload import Context, parse_params, rotated
from harness.client import openai_client
from harness.fake_fleet import upstream_config
from harness.health import ADMIN_ENV, health_details
from harness.poll import wait_for_batch, wait_until
from harness.server import ServerProcess
from harness.vllm_serve import VllmServer

SERVED = "tiny-chat"
KEY = "bench-key"
ONLINE_TOKENS = 16
BATCH_LINES = 4000
WINDOW_S = 20.0


@dataclass(frozen=True)
class Setup:
    max_num_seqs: int
    max_concurrency: int
    batch_tokens: int
    rate: float
    seconds: float


@dataclass
class Phase:
    name: str
    seconds: float = 0.0
    latencies_s: list[float] = field(default_factory=list)
    online_errors: int = 0
    batch_lines: int = 0

    @property
    def batch_rate(self) -> float:
        return self.batch_lines / self.seconds if self.seconds else 0.0

    def percentile(self, q: float) -> float | None:
        if not self.latencies_s:
            return None
        ordered = sorted(self.latencies_s)
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))]

    def summary(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "seconds": round(self.seconds, 2),
            "online_requests": len(self.latencies_s),
            "online_errors": self.online_errors,
            "online_p50_s": _round(self.percentile(0.5)),
            "online_p95_s": _round(self.percentile(0.95)),
            "online_mean_s": _round(statistics.fmean(self.latencies_s)) if self.latencies_s else None,
            "batch_lines": self.batch_lines,
            "batch_lines_per_s": round(self.batch_rate, 2),
        }


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


def vllm_queue(vllm: VllmServer) -> tuple[float, float]:
    """(running, waiting) requests, from vLLM's Prometheus metrics."""
    text = httpx.get(f"{vllm.root_url}/metrics", timeout=10).text
    values = {"vllm:num_requests_running": 0.0, "vllm:num_requests_waiting": 0.0}
    for line in text.splitlines():
        name = line.split("{", 1)[0].split(" ", 1)[0]
        if name in values:
            values[name] += float(line.rsplit(" ", 1)[1])
    return values["vllm:num_requests_running"], values["vllm:num_requests_waiting"]


def _batch_input(model: str, tokens: int) -> bytes:
    return b"".join(
        json.dumps(
            {
                "custom_id": f"b-{i}",
                "method": "POST",
                "url": "/v1/chat/completions",
                "body": {
                    "model": model,
                    "messages": [{"role": "user", "content": f"Write about item {i}."}],
                    "max_tokens": tokens,
                    "ignore_eos": True,
                },
            }
        ).encode()
        + b"\n"
        for i in range(BATCH_LINES)
    )


async def _online(url: str, rate: float, seconds: float, phase: Phase) -> None:
    """Open-loop chat requests to vLLM at ``rate`` per second for ``seconds``."""
    async with httpx.AsyncClient(timeout=120) as client:

        async def one(i: int) -> None:
            body = {
                "model": SERVED,
                "messages": [{"role": "user", "content": f"Online question {i}?"}],
                "max_tokens": ONLINE_TOKENS,
                "ignore_eos": True,
            }
            sent = time.monotonic()
            try:
                response = await client.post(f"{url}/chat/completions", json=body)
            except httpx.HTTPError:
                phase.online_errors += 1
                return
            if response.status_code == 200:
                phase.latencies_s.append(time.monotonic() - sent)
            else:
                phase.online_errors += 1

        start = time.monotonic()
        tasks = []
        i = 0
        while (due := start + i / rate) < start + seconds:
            await asyncio.sleep(max(0.0, due - time.monotonic()))
            tasks.append(asyncio.create_task(one(i)))
            i += 1
        await asyncio.gather(*tasks)


def _completed(batch: openai.types.Batch) -> int:
    """Lines the batch completed so far (batchd always sends `request_counts`)."""
    return batch.request_counts.completed if batch.request_counts is not None else 0


def _wait_idle(vllm: VllmServer) -> None:
    wait_until(lambda: vllm_queue(vllm) == (0.0, 0.0), 120, lambda: f"vLLM idle: {vllm_queue(vllm)}", interval=0.5)


def run_phase(
    name: str, vllm: VllmServer, client: openai.OpenAI, file_id: str | None, rate: float, seconds: float, running: int
) -> Phase:
    phase = Phase(name)
    batch = None
    before = 0
    if file_id is not None:
        batch = client.batches.create(input_file_id=file_id, endpoint="/v1/chat/completions", completion_window="24h")
        # Running, and vLLM's queue filled by it.
        wait_for_batch(client, batch.id, timeout=300, until=lambda b: _completed(b) >= 2 * running)
        before = _completed(client.batches.retrieve(batch.id))
    started = time.monotonic()
    if rate > 0:
        asyncio.run(_online(vllm.url, rate, seconds, phase))
    else:
        time.sleep(seconds)
    phase.seconds = time.monotonic() - started
    if batch is not None:
        after = client.batches.retrieve(batch.id)
        if after.status != "in_progress":
            print(f"warning: {name}: the batch was {after.status} before the window ended", flush=True)
        phase.batch_lines = _completed(after) - before
        client.batches.cancel(batch.id)
        wait_for_batch(client, batch.id, timeout=300)
    _wait_idle(vllm)
    print(json.dumps(phase.summary()), flush=True)
    return phase


def pooled(phases: list[Phase]) -> list[Phase]:
    """The four kinds of phase, each with its rounds pooled (online alone, batch alone, on, off)."""
    out = []
    for name in ("online alone", "batch alone", "priority on", "priority off"):
        merged = Phase(name)
        for phase in phases:
            if phase.name.split(" #")[0] == name:
                merged.seconds += phase.seconds
                merged.latencies_s += phase.latencies_s
                merged.online_errors += phase.online_errors
                merged.batch_lines += phase.batch_lines
        out.append(merged)
    return out


def data(phases: list[Phase], setup: Setup) -> dict[str, Any]:
    alone, batch_alone, on, off = pooled(phases)
    p95_ratio = (on.percentile(0.95) or 0) / (off.percentile(0.95) or 1)
    share = on.batch_rate / batch_alone.batch_rate if batch_alone.batch_rate else 0.0
    checks = [
        Check.at_most("online p95 with priority on / off", round(p95_ratio, 3), 0.5),
        Check.at_least("batch lines/s with priority on and online traffic / batch alone", round(share, 3), 0.5),
    ]
    return {
        "settings": {**asdict(setup), "online_max_tokens": ONLINE_TOKENS, "batch_lines": BATCH_LINES},
        "pooled": [p.summary() for p in (alone, batch_alone, on, off)],
        "phases": [p.summary() for p in phases],
        "checks": [c.to_dict() for c in checks],
    }


def render(doc: Document) -> str:
    setup = doc["settings"]
    alone_rate = doc["pooled"][1]["batch_lines_per_s"]
    rows = [
        "| phase | online requests | online p50 s | online p95 s | batch lines/s | x batch alone |",
        "|---|---|---|---|---|---|",
    ]
    for s in (*doc["pooled"], *doc["phases"]):
        ratio = f"{s['batch_lines_per_s'] / alone_rate:.2f}" if s["batch_lines"] and alone_rate else "-"
        rows.append(
            f"| {s['name']} | {s['online_requests']} ({s['online_errors']} errors) | {s['online_p50_s']} "
            f"| {s['online_p95_s']} | {s['batch_lines_per_s'] if s['batch_lines'] else '-'} | {ratio} |"
        )
    return "\n".join(
        [
            f"`vllm serve --scheduling-policy priority --max-num-seqs {setup['max_num_seqs']}` of the tiny chat "
            f"model (CPU, eager). Online: {setup['rate']:g} chat requests/s straight to vLLM, {ONLINE_TOKENS} "
            f"tokens each (`ignore_eos`), open loop. Batch: {BATCH_LINES} lines of {setup['batch_tokens']} tokens "
            f"through `batchd serve` (upstream `max_concurrency: {setup['max_concurrency']}`: that many lines at "
            f"vLLM, {setup['max_num_seqs']} running and the rest in its queue), cancelled after each "
            f"{setup['seconds']:g} s window. Phases interleaved in one run; the first four rows pool the rounds, "
            "the rest are each phase as measured.",
            "",
            *rows,
            "",
            *checks_table(doc["checks"]),
        ]
    )


@dataclass(frozen=True)
class W7Params:
    rate: float = 2.0  # online requests per second
    max_num_seqs: int = 8  # vLLM's running requests at most
    max_concurrency: int = 32  # batchd's lines in flight at the URL
    batch_tokens: int = 128  # max_tokens of a batch line


class W7SharedFleet:
    id, slug, title = "W7", "W7-shared-fleet", "A shared fleet, online latency with batchd's priority on and off"
    default_rounds = 2
    Params: ClassVar[type[W7Params]] = W7Params

    def run(self, context: Context) -> Report:
        p = parse_params(W7Params, context.params)
        setup = Setup(p.max_num_seqs, p.max_concurrency, p.batch_tokens, p.rate, WINDOW_S * context.scale)
        phases = measure(context, setup)
        return Report(self.id, self.slug, self.title, data(phases, setup), render)


def measure(context: Context, setup: Setup) -> list[Phase]:
    work = context.work_dir / "W7"
    work.mkdir(parents=True, exist_ok=True)
    extra = ["--max-model-len", "1024", "--max-num-seqs", str(setup.max_num_seqs), "--scheduling-policy", "priority"]
    vllm = VllmServer(work, build_tiny_chat_model(work / "tiny-chat"), SERVED, extra).start(timeout=600)
    block = {"urls": [vllm.url], "model": SERVED, "max_concurrency": setup.max_concurrency, "health_interval_s": 5}
    config = upstream_config(
        work / "models.json", {"batch-prio": {**block, "priority": True}, "batch-plain": dict(block)}
    )
    server = ServerProcess(
        work / "batchd", env={"BATCHD_API_KEYS": KEY, **ADMIN_ENV}, models=True, args=["--config", str(config)]
    )
    server.data_dir.mkdir(parents=True, exist_ok=True)
    phases: list[Phase] = []
    try:
        server.start()
        client = openai_client(server.base_url, KEY, max_retries=2)
        files = {
            model: client.files.create(
                file=(f"{model}.jsonl", _batch_input(model, setup.batch_tokens)), purpose="batch"
            ).id
            for model in ("batch-prio", "batch-plain")
        }
        running, rate, seconds = setup.max_num_seqs, setup.rate, setup.seconds
        run_phase("warm-up", vllm, client, None, rate, 5, running)
        phases.append(run_phase("online alone", vllm, client, None, rate, seconds, running))
        phases.append(run_phase("batch alone", vllm, client, files["batch-prio"], 0, seconds, running))
        for r in range(context.rounds):
            for name in rotated(["priority on", "priority off"], r):
                model = "batch-prio" if name == "priority on" else "batch-plain"
                phases.append(run_phase(f"{name} #{r + 1}", vllm, client, files[model], rate, seconds, running))
        health = health_details(server)
        context.log("batchd /health: " + json.dumps(health))
    finally:
        server.stop()
        vllm.stop()
    return phases
