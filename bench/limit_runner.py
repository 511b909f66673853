"""The "limit" system's process: the input fed straight to ``vllm.LLM`` (``LLM.chat`` or
``LLM.embed``, every line in one call), with the workload's engine settings. It is the ceiling
the batch runners are measured against: no HTTP, no files written, no per-line bookkeeping.
It runs the lines in batchd's order (the whole input sorted by app/pipeline/prefix_order.py's
prompt-prefix keys, as run-batch and the server's ordered copy run them) and its engine processes
on batchd's allocator (jemalloc when the machine has it), so a ratio to the limit measures
batchd's front end, not those two choices.

    python -m bench.limit_runner --engine SETTINGS_JSON --input IN.jsonl [--warmup W.jsonl]

The input is parsed before the engine starts; a warm-up file runs after the engine is up.
Processing time covers only the measured call. The last stdout line is
``BENCH_RESULT {json}`` with ``time.time()`` stamps and the counts.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from app.pipeline.prefix_order import prefix_key
from bench.engine import EngineSettings
from bench.inputs import CHAT_URL, EMBEDDINGS_URL

RESULT_PREFIX = "BENCH_RESULT "


def read_requests(path: Path) -> tuple[str, list[dict]]:
    """The endpoint (one per file) and the request bodies of a batch input file."""
    urls, bodies = set(), []
    with path.open(encoding="utf-8") as fh:
        for raw in fh:
            if raw.strip():
                line = json.loads(raw)
                urls.add(line["url"])
                bodies.append(line["body"])
    if len(urls) != 1 or not urls <= {CHAT_URL, EMBEDDINGS_URL}:
        raise SystemExit(f"{path}: expected one of {CHAT_URL}, {EMBEDDINGS_URL}; got {sorted(urls)}")
    return urls.pop(), bodies


def in_batchd_order(bodies: list[dict]) -> list[dict]:
    """The bodies in the order batchd runs them: by prompt-prefix key, ties in input order."""
    return sorted(bodies, key=prefix_key)


def run(llm, url: str, bodies: list[dict]) -> dict:
    """Run every body through the engine in one call; return counts."""
    if url == EMBEDDINGS_URL:
        outputs = llm.embed([body["input"] for body in bodies], use_tqdm=False)
        return {
            "ok": sum(1 for o in outputs if o.outputs.embedding),
            "prompt_tokens": sum(len(o.prompt_token_ids) for o in outputs),
            "output_tokens": 0,
        }
    from vllm import SamplingParams

    params = [
        SamplingParams(
            max_tokens=body.get("max_tokens"),
            temperature=body.get("temperature", 1.0),
            ignore_eos=body.get("ignore_eos", False),
        )
        for body in bodies
    ]
    outputs = llm.chat([body["messages"] for body in bodies], params, use_tqdm=False)
    return {
        "ok": sum(1 for o in outputs if o.finished),
        "prompt_tokens": sum(len(o.prompt_token_ids or ()) for o in outputs),
        "output_tokens": sum(len(o.outputs[0].token_ids) for o in outputs),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--engine", required=True, help="EngineSettings as JSON")
    parser.add_argument("--input", type=Path, required=True)
    parser.add_argument("--warmup", type=Path)
    args = parser.parse_args()

    settings = EngineSettings.from_json(args.engine)
    url, bodies = read_requests(args.input)
    bodies = in_batchd_order(bodies)
    warmup = read_requests(args.warmup) if args.warmup else None

    from vllm import LLM

    from app.engine.local.allocator import preload_engine_allocator  # imports vllm: here, not in the harness

    preload_engine_allocator()  # the engine processes LLM spawns inherit it

    llm = LLM(**settings.llm_kwargs())
    engine_ready = time.time()
    if warmup is not None:
        run(llm, *warmup)
    started = time.time()
    counts = run(llm, url, bodies)
    finished = time.time()
    result = {"engine_ready": engine_ready, "started": started, "finished": finished, "lines": len(bodies), **counts}
    print(RESULT_PREFIX + json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
