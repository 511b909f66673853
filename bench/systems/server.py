"""The "server" system: a ``batchd serve`` process, started and warmed up (health, then a
small batch) before the measured batch is driven through the official ``openai`` client:
upload, create, poll, download."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import openai

from bench.engine import ENGINE_ENV
from bench.outputs import scan_results
from bench.result import SystemRun
from bench.systems.base import RunSpec
from harness.client import openai_client
from harness.poll import wait_for_batch
from harness.rss import TreeRss
from harness.server import ServerProcess


class ServerSystem:
    name = "server"
    description = "`batchd serve` (warm) driven by the `openai` client: upload, create, poll, download"
    timing = (
        "batch created -> seen completed by polling (every quarter of the time its counts say is left, "
        "50 ms to 1 s); end-to-end (upload start -> result files downloaded) reported separately"
    )

    def unavailable_reason(self) -> str | None:
        return None

    def run(self, spec: RunSpec) -> SystemRun:
        config = spec.engine.write_batchd_config(spec.work_dir / "server-models.yaml")
        env = {**ENGINE_ENV, "BATCHD_MAX_BATCH_LINES": str(max(50_000, spec.lines))}
        server = ServerProcess(spec.work_dir / "data", env=env, args=["--config", str(config)], models=True)
        rss = TreeRss(lambda: server.proc.pid if server.proc else None).start()
        spawned = time.time()
        try:
            try:
                server.start(timeout=spec.timeout)
            except (RuntimeError, TimeoutError) as exc:
                return SystemRun.failed_run(self.name, spec.lines, f"server did not start: {exc}"[-2000:])
            healthy = time.time()
            client = openai_client(server.base_url, "bench", timeout=600, max_retries=5)
            warm = _run_batch(client, spec.warmup_path, spec.endpoint, spec.work_dir / "warmup", spec.timeout)
            if warm["status"] != "completed":
                return SystemRun.failed_run(self.name, spec.lines, f"warm-up batch ended {warm['status']}")
            measured = _run_batch(client, spec.input_path, spec.endpoint, spec.work_dir / "batch", spec.timeout)
        finally:
            rss.stop()
            server.stop()
        run = SystemRun(
            self.name,
            spec.lines,
            wall_s=measured["downloaded"] - spawned,
            processing_s=measured["completed"] - measured["created"],
            startup_s=healthy - spawned,
            end_to_end_s=measured["downloaded"] - measured["upload"],
            timing=self.timing,
            rss=rss.summary((measured["created"], measured["completed"])),
        )
        if measured["status"] != "completed":
            run.error = f"batch ended {measured['status']}: {measured['errors']}"
        run.count(scan_results(*measured["files"]))
        return run


def _poll_interval(elapsed: float, batch: Any) -> float:
    """Seconds to the next poll: a quarter of the time the batch's own counts say is left,
    50 ms to 1 s, so its completion is seen within 50 ms without polling 20 times a second all
    along (each poll costs the server CPU a user polling every few seconds would not cause:
    in W1, about 340 polls made a sixth of the server's CPU per line). Before the first count:
    0.5 % of the time elapsed; once every line has run (finalizing): 50 ms."""
    counts = batch.request_counts
    total = counts.total if counts else 0
    done = (counts.completed + counts.failed) if counts else 0
    if not done:
        return min(1.0, max(0.05, elapsed * 0.005))
    left = elapsed * max(0, total - done) / done
    return min(1.0, max(0.05, left / 4))


def _run_batch(client: openai.OpenAI, path: Path, endpoint: str, prefix: Path, timeout: float) -> dict:
    """Upload ``path``, run it as a batch, download its result files; ``time.time()`` stamps."""
    stamps: dict = {"upload": time.time()}
    with path.open("rb") as fh:
        file = client.files.create(file=(path.name, fh), purpose="batch")
    stamps["created"] = time.time()
    batch = client.batches.create(
        input_file_id=file.id,
        endpoint=endpoint,  # type: ignore[arg-type]  # the client's Literal of OpenAI's endpoints
        completion_window="24h",
    )
    batch = wait_for_batch(client, batch.id, timeout=timeout, interval=_poll_interval)
    stamps["completed"] = time.time()
    files = []
    for kind, file_id in (("output", batch.output_file_id), ("errors", batch.error_file_id)):
        if file_id:
            target = prefix.with_name(f"{prefix.name}-{kind}.jsonl")
            with client.files.with_streaming_response.content(file_id) as response:
                response.stream_to_file(target)
            files.append(target)
    stamps["downloaded"] = time.time()
    stamps.update(status=batch.status, errors=batch.errors, files=files)
    return stamps
