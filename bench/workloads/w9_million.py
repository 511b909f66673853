"""W9, a million lines: one 1,000,000-line embeddings batch (~100 MB) on two replicas over one
Postgres database and one S3 bucket (SeaweedFS), in front of a zero-latency fake fleet.

It shows that a batch this size stays bounded: every replica's resident memory (its process
tree) and the database's size are sampled every second from before the upload to after the
download; validation and finalize are timed from the status changes seen by polling every
50 ms, and given as MB/s of the input and of the output file. Goals (issue #26): RSS growth
< 100 MB per replica, database size after finalize within 10 MB of before, validation and
finalize each >= 50 MB/s. The output file is read back and every custom_id must appear once.

    .venv/bin/python -m bench --workloads W9 [--scale 1.0] [--param output_order=input --label -input-order]

``--scale`` multiplies the 1,000,000 lines. ``--param output_order=input`` creates the batch with
batchd's ``output_order: "input"`` (issue #57, through ``extra_body``) and adds a goal: the output
file lists its custom_ids in the input's order.
"""

from __future__ import annotations

import json
import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import openai

from bench.report import Check, Document, Report, checks_table, plt
from bench.workload import Context, parse_params
from harness import db, postgres
from harness.client import openai_client
from harness.fake_fleet import FakeFleet, upstream_config
from harness.rss import tree_rss
from harness.seaweedfs import SeaweedFS, ensure_bucket
from harness.server import ServerProcess

LINES = 1_000_000
MODEL = "sim-embed"
KEY = "bench-key"
BUCKET = "w9-million"
MB = 1 << 20
REPLICAS = 2
URLS = 2
PER_URL = 64
GOAL_RSS_GROWTH_MB = 100
GOAL_DB_GROWTH_MB = 10
GOAL_MB_PER_S = 50
OUTPUT_ORDERS = ("completion", "input")


def write_input(path: Path, lines: int) -> int:
    with path.open("wb") as out:
        for start in range(0, lines, 10_000):
            out.write(
                b"".join(
                    b'{"custom_id":"c-%d","method":"POST","url":"/v1/embeddings","body":{"model":"%s","input":"line %d"}}\n'
                    % (i, MODEL.encode(), i)
                    for i in range(start, min(lines, start + 10_000))
                )
            )
    return path.stat().st_size


def largest_tables(server: ServerProcess) -> dict[str, float]:
    """MB of the five largest tables (with their indexes and TOAST)."""
    rows = db.execute(
        server,
        "SELECT relname, pg_total_relation_size(relid) FROM pg_catalog.pg_statio_user_tables ORDER BY 2 DESC LIMIT 5",
    )
    return {name: round(size / MB, 2) for name, size in rows}


def db_size(server: ServerProcess) -> int:
    ((size,),) = db.execute(server, "SELECT pg_database_size(current_database())")
    return size


@dataclass
class Sampler:
    """Every second: elapsed time, each replica's process-tree RSS and the database's size."""

    servers: list[ServerProcess]
    started: float = field(default_factory=time.monotonic)
    samples: list[dict[str, Any]] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def sample(self) -> dict[str, Any]:
        row = {
            "t": round(time.monotonic() - self.started, 2),
            "rss_mb": [round(tree_rss(s.pid) / MB, 1) for s in self.servers],
            "db_mb": round(db_size(self.servers[0]) / MB, 2),
        }
        self.samples.append(row)
        return row

    def run(self) -> None:
        while not self._stop.wait(1.0):
            self.sample()

    def __enter__(self) -> Sampler:
        self.sample()
        self._thread = threading.Thread(target=self.run, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        assert self._thread is not None
        self._thread.join()
        self.sample()


def watch_statuses(client: openai.OpenAI, batch_id: str, started: float) -> dict[str, float]:
    """Seconds from `started` at which each status was first seen, polling every 50 ms."""
    seen: dict[str, float] = {}
    while True:
        batch = client.batches.retrieve(batch_id)
        seen.setdefault(batch.status, time.monotonic() - started)
        if batch.status in ("completed", "failed", "expired", "cancelled"):
            return seen
        time.sleep(0.05)


def run(lines: int, work: Path, output_order: str = "completion") -> dict[str, Any]:
    input_path = work / "input.jsonl"
    input_bytes = write_input(input_path, lines)
    weed = SeaweedFS(work / "seaweedfs").start()
    ensure_bucket(weed, BUCKET)
    fleet = FakeFleet(work, count=URLS, model=MODEL, max_concurrency=PER_URL).start()
    config = upstream_config(
        work / "models.json",
        {
            MODEL: {
                "urls": fleet.urls,
                "model": fleet.model,
                "max_concurrency": PER_URL,
                "endpoints": ["/v1/embeddings"],
            }
        },
    )
    database = postgres.create_database()
    env = {
        "BATCHD_API_KEYS": KEY,
        "BATCHD_MAX_BATCH_LINES": str(lines),
        **weed.env(BUCKET),
    }
    servers = [
        ServerProcess(
            work / f"r{i}",
            database,
            env={**env, "BATCHD_REPLICA_ID": f"replica-{i}"},
            models=True,
            args=["--config", str(config)],
        )
        for i in range(REPLICAS)
    ]
    try:
        for server in servers:
            server.data_dir.mkdir(parents=True, exist_ok=True)
            server.start()
        client = openai_client(servers[0].base_url, KEY, timeout=600, max_retries=0)
        with Sampler(servers) as sampler:
            before = sampler.samples[0]
            t0 = time.monotonic()
            with input_path.open("rb") as handle:
                file = client.files.create(file=("million.jsonl", handle), purpose="batch")
            upload_s = time.monotonic() - t0
            created = time.monotonic()
            created_offset = created - sampler.started
            # batchd's output_order only when asked: the default run's create body is OpenAI's.
            extra_body = {"output_order": output_order} if output_order != "completion" else None
            batch = client.batches.create(
                input_file_id=file.id, endpoint="/v1/embeddings", completion_window="24h", extra_body=extra_body
            )
            echoed = (batch.model_extra or {}).get("output_order", "completion")
            seen = watch_statuses(client, batch.id, created)
            batch = client.batches.retrieve(batch.id)
            output_bytes = client.files.retrieve(batch.output_file_id).bytes if batch.output_file_id else 0
            t1 = time.monotonic()
            ids: set[str] = set()
            duplicates = 0
            # Lines whose custom_id ("c-<input line>") is not the next after the line before's.
            out_of_order, previous = 0, -1
            assert batch.output_file_id is not None, batch.status
            with client.files.with_streaming_response.content(batch.output_file_id) as response:
                for raw in response.iter_lines():
                    custom_id = json.loads(raw)["custom_id"]
                    duplicates += custom_id in ids
                    ids.add(custom_id)
                    number = int(custom_id.removeprefix("c-"))
                    out_of_order += number != previous + 1
                    previous = number
            download_s = time.monotonic() - t1
        after = sampler.samples[-1]
        tables_after = largest_tables(servers[0])
    finally:
        for server in servers:
            server.stop()
        fleet.stop()
        weed.stop()
        postgres.drop_database(database)
    validation_s = seen.get("in_progress", 0.0) - seen.get("validating", 0.0)
    running_s = seen.get("finalizing", 0.0) - seen.get("in_progress", 0.0)
    finalize_s = seen.get("completed", 0.0) - seen.get("finalizing", 0.0)
    peak_rss = [max(s["rss_mb"][i] for s in sampler.samples) for i in range(REPLICAS)]
    counts = batch.request_counts
    assert counts is not None  # batchd always sends them
    return {
        "lines": lines,
        "output_order": output_order,
        "output_order_echoed": echoed,
        "status": batch.status,
        "completed": counts.completed,
        "failed": counts.failed,
        "distinct_custom_ids": len(ids),
        "duplicate_custom_ids": duplicates,
        "out_of_order_lines": out_of_order,
        "input_mb": round(input_bytes / MB, 1),
        "output_mb": round(output_bytes / MB, 1),
        "upload_s": round(upload_s, 2),
        "created_at_sample_s": round(created_offset, 2),
        "statuses_seen_s": {k: round(v, 2) for k, v in seen.items()},
        "validation_s": round(validation_s, 2),
        "validation_mb_per_s": round(input_bytes / MB / validation_s, 1) if validation_s else None,
        "running_s": round(running_s, 2),
        "lines_per_s": round(lines / running_s, 1) if running_s else None,
        "finalize_s": round(finalize_s, 2),
        "finalize_mb_per_s": round(output_bytes / MB / finalize_s, 1) if finalize_s else None,
        "download_s": round(download_s, 2),
        "rss_before_mb": before["rss_mb"],
        "rss_peak_mb": peak_rss,
        "rss_growth_mb": [round(p - b, 1) for p, b in zip(peak_rss, before["rss_mb"], strict=True)],
        "db_before_mb": before["db_mb"],
        "db_peak_mb": max(s["db_mb"] for s in sampler.samples),
        "db_after_mb": after["db_mb"],
        "largest_tables_after_mb": tables_after,
        "samples": sampler.samples,
        "loadavg_after": list(os.getloadavg()),
    }


def checks(r: dict[str, Any]) -> list[Check]:
    """The goals; the first (every line once) is a failure when missed, not a missed goal."""
    growth = max(r["rss_growth_mb"])
    in_input_order = (
        [
            Check.at_most(
                "output custom_ids in input order (lines out of place)",
                r["out_of_order_lines"] + (r["output_order_echoed"] != "input"),
                0,
                goal="none",
                value=f"{r['out_of_order_lines']:,} out of place; the batch echoes {r['output_order_echoed']!r}",
            )
        ]
        if r.get("output_order", "completion") == "input"
        else []
    )
    return [
        Check.at_most(
            "every custom_id once (missing or repeated)",
            (r["lines"] - r["distinct_custom_ids"]) + r["duplicate_custom_ids"],
            0,
            goal="none",
            value=f"{r['distinct_custom_ids']:,} distinct, {r['duplicate_custom_ids']} repeated",
        ),
        *in_input_order,
        Check.at_most(
            "RSS growth per replica (MB)",
            growth,
            GOAL_RSS_GROWTH_MB,
            goal=f"<= {GOAL_RSS_GROWTH_MB} MB",
            value=" / ".join(f"{g:.0f} MB" for g in r["rss_growth_mb"]),
        ),
        Check.at_most(
            "database after finalize against before (MB)",
            round(abs(r["db_after_mb"] - r["db_before_mb"]), 1),
            GOAL_DB_GROWTH_MB,
            goal=f"within {GOAL_DB_GROWTH_MB} MB",
            value=f"{r['db_before_mb']:.1f} -> {r['db_after_mb']:.1f} MB (peak {r['db_peak_mb']:.1f})",
        ),
        *(
            Check.at_least(
                f"{step} (MB/s)",
                r[f"{step}_mb_per_s"] or 0,
                GOAL_MB_PER_S,
                goal=f">= {GOAL_MB_PER_S} MB/s",
                value=f"{r[f'{step}_mb_per_s']} MB/s ({r[f'{step}_s']} s)",
            )
            for step in ("validation", "finalize")
        ),
    ]


def render(doc: Document) -> str:
    r = doc["run"]
    rows = "\n".join(checks_table(doc["checks"]))
    return f"""One {r["lines"]:,}-line embeddings batch ({r["input_mb"]} MB in, {r["output_mb"]} MB out), two
`batchd serve` replicas over one Postgres database and one SeaweedFS bucket, a zero-latency fake
fleet ({URLS} URLs, {PER_URL} at once each), `output_order` {r.get("output_order", "completion")!r}. Status: {r["status"]} ({r["completed"]:,} ok,
{r["failed"]} failed). RSS is each replica's process tree, sampled every second from before the
upload to after the download; the database size is `pg_database_size`. Leases last the default
15 s (validation checks lines in a thread, so the renewal beside it on the event loop keeps its pace).

{rows}

| step | seconds | rate |
|---|---|---|
| upload (`files.create`) | {r["upload_s"]} | {r["input_mb"] / r["upload_s"]:.1f} MB/s |
| validation (`validating` -> `in_progress`) | {r["validation_s"]} | {r["validation_mb_per_s"]} MB/s |
| lines (`in_progress` -> `finalizing`) | {r["running_s"]} | {r["lines_per_s"]} lines/s |
| finalize (`finalizing` -> `completed`) | {r["finalize_s"]} | {r["finalize_mb_per_s"]} MB/s |
| download (output file, streamed) | {r["download_s"]} | {r["output_mb"] / r["download_s"]:.1f} MB/s |

RSS before / peak (MB): {r["rss_before_mb"]} / {r["rss_peak_mb"]}. Database (MB): before
{r["db_before_mb"]}, peak {r["db_peak_mb"]}, after {r["db_after_mb"]}. Samples over time: the samples file
beside this report and the chart.
"""


def chart(doc: Document, path: Path) -> None:
    r = doc["run"]
    pyplot = plt()
    samples = doc["samples"]
    t = [s["t"] for s in samples]
    fig, (ax_rss, ax_db) = pyplot.subplots(1, 2, figsize=(12, 4.2))
    for i in range(REPLICAS):
        ax_rss.plot(t, [s["rss_mb"][i] for s in samples], label=f"replica {i}")
    ax_db.plot(t, [s["db_mb"] for s in samples], color="tab:green")
    for ax in (ax_rss, ax_db):
        for status, at in r["statuses_seen_s"].items():
            x = at + r["created_at_sample_s"]
            ax.axvline(x, color="grey", linewidth=0.6, linestyle=":")
            ax.annotate(status, (x, ax.get_ylim()[1]), fontsize=7, rotation=90, va="top")
        ax.set_xlabel("seconds since the first sample")
    ax_rss.set_title("Resident memory per replica (process tree)")
    ax_rss.set_ylabel("MB")
    ax_rss.legend(fontsize=8)
    ax_db.set_title("Postgres database size")
    ax_db.set_ylabel("MB")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    pyplot.close(fig)


@dataclass(frozen=True)
class W9Params:
    # batchd's `output_order` of the batch: "completion" (the default: the create body is OpenAI's)
    # or "input" (issue #57: the output file in input order, one more goal)
    output_order: str = "completion"


class W9Million:
    id, slug, title = "W9", "W9-million", "A million lines on two replicas (Postgres + S3)"
    default_rounds = 0
    Params: ClassVar[type[W9Params]] = W9Params

    def run(self, context: Context) -> Report:
        params = parse_params(W9Params, context.params)
        if params.output_order not in OUTPUT_ORDERS:
            raise ValueError(f"output_order: {params.output_order!r}; choose from {', '.join(OUTPUT_ORDERS)}")
        work = context.work_dir / "W9"
        work.mkdir(parents=True, exist_ok=True)
        result = run(context.scaled(LINES), work, params.output_order)
        goals = checks(result)
        # A lost or repeated line (or, asked for input order, a line out of it) is a failure, not a missed goal.
        failed = not goals[0].passed or (params.output_order == "input" and not goals[1].passed)
        data = {"run": result, "checks": [c.to_dict() for c in goals]}
        samples = {"samples": result.pop("samples")}  # each second's RSS and database size
        return Report(self.id, self.slug, self.title, data, render, chart, failed=failed, samples=samples)
