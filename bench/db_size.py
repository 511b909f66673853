"""Database size while batches come and go: ten 5,000-line embedding batches, one after the
other, through one `batchd serve` on a fresh Postgres database. After each batch it records
the database's size and that of the checkpoint table, so a report shows whether the database
grows with the lines already finished (it must not: finalize deletes a batch's checkpoint rows).

    .venv/bin/python -m bench.db_size [--batches 10] [--lines 5000]
"""

from __future__ import annotations

import argparse
import random
import subprocess
import time
from pathlib import Path

from bench.inputs import embedding_lines, write_jsonl
from bench.systems.server import _run_batch
from harness import db, postgres
from harness.client import openai_client
from harness.server import ServerProcess

EMBED_MODEL = "all-MiniLM-L6-v2"
REPORT = Path(__file__).parent / "results" / "2026-11-23-db-size.md"


def _sizes(server: ServerProcess) -> tuple[int, int, int]:
    (row,) = db.execute(
        server,
        "SELECT pg_database_size(current_database()), "
        "pg_total_relation_size('batch_chunks'), (SELECT count(*) FROM batch_chunks)",
    )
    return row


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--batches", type=int, default=10)
    parser.add_argument("--lines", type=int, default=5000)
    parser.add_argument("--work-dir", type=Path, default=Path("bench/.work/db-size"))
    args = parser.parse_args()
    args.work_dir.mkdir(parents=True, exist_ok=True)
    input_path = args.work_dir / "embeddings.jsonl"
    write_jsonl(input_path, embedding_lines(args.lines, random.Random(7), EMBED_MODEL))
    url = postgres.create_database()
    server = ServerProcess(
        args.work_dir / "data",
        url,
        models=True,
        args=["--model", EMBED_MODEL],
        env={"BATCHD_MAX_BATCH_LINES": str(max(50_000, args.lines))},
    )
    rows = []
    try:
        server.start(timeout=600)
        args.autovacuum = db.execute(server, "SHOW autovacuum")[0][0]
        client = openai_client(server.base_url, "bench", timeout=600, max_retries=5)
        before = _sizes(server)
        for i in range(args.batches):
            stamps = _run_batch(client, input_path, "/v1/embeddings", args.work_dir / f"batch-{i}", 3600)
            assert stamps["status"] == "completed", stamps
            # The peak: one batch's checkpoint rows just before finalize is what the table must hold.
            rows.append((i + 1, stamps["completed"] - stamps["created"], *_sizes(server)))
            print(rows[-1], flush=True)
    finally:
        server.stop()
        postgres.drop_database(url)
    _write_report(args, before, rows)


def _write_report(args, before, rows) -> None:
    commit = subprocess.run(
        ["git", "describe", "--always", "--dirty=+dirty"], capture_output=True, text=True
    ).stdout.strip()
    mib = 1024 * 1024
    lines = [
        "# Database size across batches (Postgres)",
        "",
        f"{args.batches} embedding batches of {args.lines:,} lines ({EMBED_MODEL}), one after the other, through one "
        f"`batchd serve` on a fresh Postgres database; commit `{commit}`, {time.strftime('%Y-%m-%d')}. "
        "`python -m bench.db_size` reproduces it. Finalize deletes a batch's checkpoint rows; then, at most every 10 s per process, batchd runs "
        f"`VACUUM (SKIP_LOCKED, TRUNCATE FALSE) batch_chunks`; this Postgres has autovacuum {args.autovacuum}.",
        "",
        f"Before the first batch: database {before[0] / mib:.1f} MiB, `batch_chunks` {before[1] / mib:.2f} MiB.",
        "",
        "| after batch | lines finished in all | batch time (s) | database (MiB) | `batch_chunks` (MiB) | rows left in `batch_chunks` |",
        "|---:|---:|---:|---:|---:|---:|",
    ]
    for n, seconds, database, table, count in rows:
        lines.append(
            f"| {n} | {n * args.lines:,} | {seconds:.1f} | {database / mib:.1f} | {table / mib:.2f} | {count} |"
        )
    growth = (rows[-1][2] - rows[0][2]) / mib
    lines += [
        "",
        f"From the first batch to the last the database changed by {growth:+.1f} MiB while "
        f"{(len(rows) - 1) * args.lines:,} more lines finished.",
        "",
    ]
    REPORT.write_text("\n".join(lines))
    print(REPORT.read_text())


if __name__ == "__main__":
    main()
