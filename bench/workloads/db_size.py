"""Database size while batches come and go: ten 5,000-line embedding batches, one after the
other, through one `batchd serve` on a fresh Postgres database. After each batch it records
the database's size and that of the checkpoint table, so a report shows whether the database
grows with the lines already finished (it must not: finalize deletes a batch's checkpoint rows).

    .venv/bin/python -m bench --workloads db-size [--scale 1.0] [--param batches=10]

``--scale`` multiplies the 5,000 lines of each batch.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any, ClassVar

from bench.inputs import embedding_lines, write_jsonl
from bench.report import Document, Report
from bench.systems.server import _run_batch
from bench.workload import Context, parse_params
from harness import db, postgres
from harness.client import openai_client
from harness.server import ServerProcess

EMBED_MODEL = "all-MiniLM-L6-v2"
LINES = 5000
MIB = 1024 * 1024


def _sizes(server: ServerProcess) -> list[int]:
    (row,) = db.execute(
        server,
        "SELECT pg_database_size(current_database()), "
        "pg_total_relation_size('batch_chunks'), (SELECT count(*) FROM batch_chunks)",
    )
    return list(row)


def measure(context: Context, batches: int, lines: int) -> dict[str, Any]:
    work = context.work_dir / "db-size"
    work.mkdir(parents=True, exist_ok=True)
    input_path = work / "embeddings.jsonl"
    write_jsonl(input_path, embedding_lines(lines, random.Random(7), EMBED_MODEL))
    url = postgres.create_database()
    server = ServerProcess(
        work / "data",
        url,
        models=True,
        args=["--model", EMBED_MODEL],
        env={"BATCHD_MAX_BATCH_LINES": str(max(50_000, lines))},
    )
    rows = []
    try:
        server.start(timeout=600)
        autovacuum = db.execute(server, "SHOW autovacuum")[0][0]
        client = openai_client(server.base_url, "bench", timeout=600, max_retries=5)
        before = _sizes(server)
        for i in range(batches):
            stamps = _run_batch(client, input_path, "/v1/embeddings", work / f"batch-{i}", 3600)
            # The peak: one batch's checkpoint rows just before finalize is what the table must hold.
            rows.append([i + 1, round(stamps["completed"] - stamps["created"], 2), *_sizes(server), stamps["status"]])
            context.log(str(rows[-1]))
    finally:
        server.stop()
        postgres.drop_database(url)
    return {"batches": batches, "lines": lines, "autovacuum": autovacuum, "before": before, "rows": rows}


def render(doc: Document) -> str:
    lines, before, rows = doc["lines"], doc["before"], doc["rows"]
    out = [
        f"{doc['batches']} embedding batches of {lines:,} lines ({EMBED_MODEL}), one after the other, through one "
        "`batchd serve` on a fresh Postgres database. Finalize deletes a batch's checkpoint rows; then, at most "
        "every 10 s per process, batchd runs `VACUUM (SKIP_LOCKED, TRUNCATE FALSE) batch_chunks`; this Postgres "
        f"has autovacuum {doc['autovacuum']}.",
        "",
        f"Before the first batch: database {before[0] / MIB:.1f} MiB, `batch_chunks` {before[1] / MIB:.2f} MiB.",
        "",
        "| after batch | lines finished in all | batch time (s) | database (MiB) | `batch_chunks` (MiB) "
        "| rows left in `batch_chunks` | status |",
        "|---:|---:|---:|---:|---:|---:|---|",
    ]
    for n, seconds, database, table, count, status in rows:
        out.append(
            f"| {n} | {n * lines:,} | {seconds:.1f} | {database / MIB:.1f} | {table / MIB:.2f} | {count} | {status} |"
        )
    if rows:
        growth = (rows[-1][2] - rows[0][2]) / MIB
        out += [
            "",
            f"From the first batch to the last the database changed by {growth:+.1f} MiB while "
            f"{(len(rows) - 1) * lines:,} more lines finished.",
        ]
    return "\n".join(out)


@dataclass(frozen=True)
class DbSizeParams:
    batches: int = 10


class DbSize:
    id, slug, title = "db-size", "db-size", "Database size across batches (Postgres)"
    default_rounds = 0
    Params: ClassVar[type[DbSizeParams]] = DbSizeParams

    def run(self, context: Context) -> Report:
        params = parse_params(DbSizeParams, context.params)
        data = measure(context, params.batches, context.scaled(LINES))
        failed = any(row[-1] != "completed" for row in data["rows"])
        return Report(self.id, self.slug, self.title, data, render, failed=failed)
