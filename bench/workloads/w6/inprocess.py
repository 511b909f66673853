"""Five projects with weights 1-4 on one replica's in-process tiny chat engine; shares from the
batches' request counts."""

from __future__ import annotations

import json
import time
from pathlib import Path

from bench.workloads.w6.checks import INPROCESS_TOLERANCE, share_check
from bench.workloads.w6.measure import SETTLE_S
from harness import postgres
from harness.client import openai_client
from harness.poll import TERMINAL
from harness.server import ServerProcess
from harness.tenancy import key_of, set_weight

TINY_CHAT = "batchd-tiny-chat"
INPROCESS_WEIGHTS = {"e1": 1, "e2": 2, "e3": 3, "e4": 4, "e5": 1}


def tiny_lines(tag: str, count: int) -> bytes:
    return b"".join(
        json.dumps(
            {
                "custom_id": f"{tag}-{i}",
                "method": "POST",
                "url": "/v1/chat/completions",
                "body": {"model": TINY_CHAT, "messages": [{"role": "user", "content": f"q{i}"}], "max_tokens": 8},
            }
        ).encode()
        + b"\n"
        for i in range(count)
    )


def inprocess(work: Path, scale: float) -> dict:
    """Five projects' batches on one replica's in-process tiny chat engine; each project's share
    of the lines completed (the batches' request counts, sampled every 0.5 s) while all have work."""
    work.mkdir(parents=True, exist_ok=True)
    database = postgres.create_database()
    keys = ",".join(f"{key_of(p)}={p}" for p in INPROCESS_WEIGHTS)
    # Eager (no torch.compile): a minute less start-up on a 2-CPU host; the engine's scheduling
    # is the same.
    config = work / "models.json"
    config.write_text(json.dumps({"models": {TINY_CHAT: {"engine_args": {"enforce_eager": True}}}}))
    server = ServerProcess(
        work / "replica",
        database,
        env={"BATCHD_API_KEYS": keys},
        models=True,
        args=["--model", TINY_CHAT, "--config", str(config)],
    )
    try:
        booted = time.monotonic()
        server.start(timeout=900)
        startup = time.monotonic() - booted
        for project, weight in INPROCESS_WEIGHTS.items():
            if weight != 1:
                set_weight(database, work, project, weight)
        time.sleep(4)  # past the replica's weight cache (3 s)
        clients = {p: openai_client(server.base_url, key_of(p), max_retries=2) for p in INPROCESS_WEIGHTS}
        # About 30 s of work: a batch's completed count moves once a checkpoint (about a second),
        # so shares need a common window of many checkpoints to resolve +-15 %.
        sizes = {p: max(1, int((1800 * w + 600 * k) * scale)) for k, (p, w) in enumerate(INPROCESS_WEIGHTS.items())}
        files = {
            p: clients[p].files.create(file=(f"{p}.jsonl", tiny_lines(p, n)), purpose="batch").id
            for p, n in sizes.items()
        }
        batches = {
            p: clients[p].batches.create(input_file_id=f, endpoint="/v1/chat/completions", completion_window="24h").id
            for p, f in files.items()
        }
        all_created = time.time()
        samples: list[tuple[float, dict[str, tuple[int, str]]]] = []
        deadline_at = time.monotonic() + 3600
        while time.monotonic() < deadline_at:
            now = time.time()
            seen = {p: clients[p].batches.retrieve(b) for p, b in batches.items()}
            samples.append(
                (now, {p: (b.request_counts.completed if b.request_counts else 0, b.status) for p, b in seen.items()})
            )
            if all(b.status in TERMINAL for b in seen.values()):
                break
            time.sleep(0.5)
    finally:
        server.kill()
        postgres.drop_database(database)
    # While all have work: from the first sample where every batch has checkpointed lines (the
    # smallest validates first and runs alone meanwhile) to the last before any had all its lines
    # completed.
    busy = [(t, s) for t, s in samples if all(0 < c < sizes[p] and st not in TERMINAL for p, (c, st) in s.items())]
    window = [(t, s) for t, s in busy if t >= all_created + SETTLE_S]
    rows = []
    total_weight = sum(INPROCESS_WEIGHTS.values())
    done = {p: window[-1][1][p][0] - window[0][1][p][0] for p in INPROCESS_WEIGHTS} if len(window) >= 2 else {}
    for p, w in INPROCESS_WEIGHTS.items():
        expected = w / total_weight
        share = done[p] / (sum(done.values()) or 1) if done else None
        rows.append(
            {
                "project": p,
                "weight": w,
                "lines": sizes[p],
                "expected_share": round(expected, 4),
                "share": round(share, 4) if share is not None else None,
                "relative_error": round(share / expected - 1, 3) if share is not None else None,
                "status": samples[-1][1][p][1],
            }
        )
    first_progress = min((t for t, s in samples if any(c for c, _ in s.values())), default=all_created)
    window_s = (
        [round(window[0][0] - all_created, 1), round(window[-1][0] - all_created, 1)] if len(window) >= 2 else None
    )
    return {
        "replicas": 1,
        "model": TINY_CHAT,
        "startup_seconds": round(startup, 1),
        "projects": rows,
        "common_window_s": window_s,
        "seconds": round(samples[-1][0] - all_created, 1),
        "lines_per_second": round(sum(sizes.values()) / max(0.1, samples[-1][0] - first_progress), 1),
        "samples": [  # seconds after the last creation, then each project's completed count
            [round(t - all_created, 2), *(s[p][0] for p in INPROCESS_WEIGHTS)] for t, s in samples
        ],
        "checks": [share_check("", rows, INPROCESS_TOLERANCE, window_s)],
    }
