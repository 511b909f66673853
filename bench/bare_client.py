"""The transport floor for W8: a minimal asyncio client that reads a batch JSONL file, POSTs
each line's body to an OpenAI-compatible fleet with a fixed concurrency per URL and writes
each answer as an output line (the batch output format, in completion order). No database,
no retries, no metrics: what any front end must at least spend per line.

Same loop (uvloop) and HTTP client (aiohttp, one pooled session) as `batchd serve`. Prints one
JSON object: lines, wall seconds (first line read -> output closed), the fleet-facing run
(first POST -> last answer) and this process's CPU seconds over the same span.

    python -m bench.bare_client --input in.jsonl --output out.jsonl --url http://127.0.0.1:9001/v1 --per-url 32
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import time
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import uvloop

from bench.measure import cpu_seconds


async def run(input_path: Path, output_path: Path, urls: list[str], per_url: int) -> dict[str, Any]:
    ids = random.Random()
    connector = aiohttp.TCPConnector(limit=0, limit_per_host=0, keepalive_timeout=30)
    headers = {"content-type": "application/json"}
    done = 0
    async with aiohttp.ClientSession(connector=connector) as session:
        cpu_before, started = cpu_seconds(), time.time()
        with input_path.open("rb") as source, output_path.open("wb") as out:

            async def worker(base: str) -> None:
                nonlocal done
                for raw in source:  # the workers share one file iterator: each line is read once
                    if not raw.strip():
                        continue
                    line = orjson.loads(raw)
                    request_id = f"req_{ids.getrandbits(128):032x}"
                    async with session.post(
                        base + line["url"].removeprefix("/v1"), data=orjson.dumps(line["body"]), headers=headers
                    ) as response:
                        body = await response.read()
                        status = response.status
                    record = {
                        "id": f"batch_req_{ids.getrandbits(128):032x}",
                        "custom_id": line["custom_id"],
                        "response": {"status_code": status, "request_id": request_id, "body": orjson.loads(body)},
                        "error": None,
                    }
                    out.write(orjson.dumps(record) + b"\n")
                    done += 1

            await asyncio.gather(*(worker(url) for url in urls for _ in range(per_url)))
        finished = time.time()
        cpu_s = cpu_seconds() - cpu_before
    return {"lines": done, "started": started, "finished": finished, "wall_s": finished - started, "cpu_s": cpu_s}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--input", type=Path, required=True)
    parser.add_argument("--output", type=Path, required=True)
    parser.add_argument("--url", action="append", required=True, help="a fleet URL ending in /v1 (repeat)")
    parser.add_argument("--per-url", type=int, default=32, help="requests in flight per URL")
    args = parser.parse_args(argv)
    print(json.dumps(uvloop.run(run(args.input, args.output, args.url, args.per_url))), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
