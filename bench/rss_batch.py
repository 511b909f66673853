"""Peak server RSS while running a 5,000-line and a 50,000-line embeddings batch, side by side
in one run on one server (MiniLM). Memory must stay flat, not grow with the batch.

    .venv/bin/python -m bench.rss_batch [--small 5000] [--large 50000]

Writes bench/results/<date>-rss-embeddings.json and .md."""

from __future__ import annotations

import argparse
import datetime as dt
import json
import platform
import tempfile
import time
from pathlib import Path

import openai

from tests.support.batches import EMBED_MODEL, embedding_line, jsonl, wait_for
from tests.support.rss import PeakRss
from tests.support.server import ServerProcess

RESULTS = Path(__file__).parent / "results"
MB = 1024 * 1024


def run_batch(client: openai.OpenAI, server: ServerProcess, lines: int) -> dict:
    data = jsonl([embedding_line(f"e{i}", f"sentence number {i} about topic {i % 97}") for i in range(lines)])
    file = client.files.create(file=("embed.jsonl", data), purpose="batch")
    del data
    started = time.monotonic()
    with PeakRss(server.pid, interval=0.05) as rss:
        batch = client.batches.create(input_file_id=file.id, endpoint="/v1/embeddings", completion_window="24h")
        done = wait_for(client, batch.id, timeout=3600)
    assert done.status == "completed" and done.request_counts.completed == lines, done
    return {
        "lines": lines,
        "input_bytes": file.bytes,
        "seconds": round(time.monotonic() - started, 1),
        "lines_per_second": round(lines / (done.completed_at - done.in_progress_at or 1), 1),
        "server_rss_before_mb": round(rss.baseline / MB, 1),
        "server_rss_peak_mb": round(rss.peak / MB, 1),
        "server_rss_growth_mb": round(rss.growth / MB, 1),
        "engine_children_rss_peak_mb": round(rss.children_peak / MB, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--small", type=int, default=5_000)
    parser.add_argument("--large", type=int, default=50_000)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        server = ServerProcess(Path(tmp) / "data", models=True, args=["--model", EMBED_MODEL]).start()
        try:
            client = openai.OpenAI(base_url=server.base_url, api_key="bench", timeout=600)
            run_batch(client, server, 200)  # warm-up: first requests allocate engine buffers
            runs = [run_batch(client, server, n) for n in (args.small, args.large)]
        finally:
            server.stop()

    small, large = runs
    report = {
        "benchmark": "server peak RSS vs embeddings batch size",
        "date": dt.date.today().isoformat(),
        "machine": f"{platform.machine()}, {platform.python_version()}",
        "runs": runs,
        "peak_ratio_large_to_small": round(large["server_rss_peak_mb"] / small["server_rss_peak_mb"], 3),
        "lines_ratio_large_to_small": round(large["lines"] / small["lines"], 1),
    }
    RESULTS.mkdir(exist_ok=True)
    stem = RESULTS / f"{report['date']}-rss-embeddings"
    stem.with_suffix(".json").write_text(json.dumps(report, indent=2) + "\n")
    rows = "\n".join(
        f"| {r['lines']:,} | {r['input_bytes'] / MB:.1f} | {r['seconds']} | {r['lines_per_second']} | "
        f"{r['server_rss_before_mb']} | {r['server_rss_peak_mb']} | {r['server_rss_growth_mb']} | "
        f"{r['engine_children_rss_peak_mb']} |"
        for r in runs
    )
    stem.with_suffix(".md").write_text(
        f"# Server RSS vs batch size ({report['date']})\n\n"
        "One `batchd serve` (MiniLM embeddings engine, SQLite), warm; batches run one after the other.\n\n"
        "| lines | input MB | wall s | lines/s | server RSS before MB | server RSS peak MB | growth MB | "
        "engine process peak MB |\n|---|---|---|---|---|---|---|---|\n"
        f"{rows}\n\n"
        f"Peak server RSS, {large['lines']:,} vs {small['lines']:,} lines: "
        f"**{report['peak_ratio_large_to_small']}x** for {report['lines_ratio_large_to_small']}x the lines.\n"
    )
    print(stem.with_suffix(".md").read_text())


if __name__ == "__main__":
    main()
