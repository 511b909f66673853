"""End-to-end check of a running compose stack (called by docker/test-docker.sh).

Through the official `openai` client against the published port: upload a batch file, run an
embeddings batch and a chat batch to completion, read the output back and compare it with the
input; then check that Prometheus scraped the finished lines from batchd's /metrics. Exits
non-zero with a message on the first failed check.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import httpx
from openai import OpenAI

TERMINAL = {"completed", "failed", "expired", "cancelled"}
# Lines of the two batches below (3 embeddings + 2 chat).
LINES_RUN = 5


def jsonl(lines: list[dict]) -> bytes:
    return b"".join(json.dumps(line).encode() + b"\n" for line in lines)


def run_batch(client: OpenAI, name: str, endpoint: str, lines: list[dict], timeout: float) -> list[dict]:
    """Upload `lines`, run them as one batch, and return the output file's records by custom_id order."""
    body = jsonl(lines)
    uploaded = client.files.create(file=(f"{name}.jsonl", body), purpose="batch")
    check(client.files.content(uploaded.id).content == body, f"{name}: uploaded bytes read back differ")
    batch = client.batches.create(input_file_id=uploaded.id, endpoint=endpoint, completion_window="24h")
    deadline = time.monotonic() + timeout
    while batch.status not in TERMINAL:
        check(time.monotonic() < deadline, f"{name}: batch still {batch.status} after {timeout:.0f} s")
        time.sleep(1)
        batch = client.batches.retrieve(batch.id)
    check(batch.status == "completed", f"{name}: batch ended {batch.status}: {batch.errors}")
    counts = batch.request_counts
    check((counts.total, counts.completed, counts.failed) == (len(lines), len(lines), 0),
          f"{name}: request_counts {counts}")
    check(batch.error_file_id is None, f"{name}: unexpected error file")
    output = client.files.content(batch.output_file_id).content.decode()
    records = [json.loads(line) for line in output.splitlines()]
    by_id = {r["custom_id"]: r for r in records}
    check(sorted(by_id) == sorted(line["custom_id"] for line in lines),
          f"{name}: output custom_ids {sorted(by_id)}")
    for record in records:
        check(record["response"]["status_code"] == 200 and record["error"] is None,
              f"{name}: line {record['custom_id']} failed: {record}")
    print(f"smoke: {name}: {len(lines)} lines completed ({batch.id}, usage {batch.usage})")
    return [by_id[line["custom_id"]]["response"]["body"] for line in lines]


def check_embeddings(client: OpenAI, timeout: float) -> None:
    texts = ["A cat sits on the mat.", "A kitten rests on a rug.", "Stock markets fell sharply today."]
    lines = [{"custom_id": f"emb-{i}", "method": "POST", "url": "/v1/embeddings",
              "body": {"model": "all-MiniLM-L6-v2", "input": text}} for i, text in enumerate(texts)]
    bodies = run_batch(client, "embeddings", "/v1/embeddings", lines, timeout)
    vectors = [body["data"][0]["embedding"] for body in bodies]
    check(all(len(v) == 384 for v in vectors), "embeddings: vectors are not 384-dimensional")
    # Real MiniLM weights: the paraphrase is closer than the unrelated sentence.
    close, far = cosine(vectors[0], vectors[1]), cosine(vectors[0], vectors[2])
    check(close > far + 0.3, f"embeddings: cosine paraphrase {close:.2f} vs unrelated {far:.2f}")


def check_chat(client: OpenAI, timeout: float) -> None:
    lines = [{"custom_id": f"chat-{i}", "method": "POST", "url": "/v1/chat/completions",
              "body": {"model": "batchd-tiny-chat", "max_tokens": 8, "temperature": 0,
                       "messages": [{"role": "user", "content": f"Say something about {topic}."}]}}
             for i, topic in enumerate(["cats", "rain"])]
    bodies = run_batch(client, "chat", "/v1/chat/completions", lines, timeout)
    for body in bodies:
        check(body["object"] == "chat.completion" and body["choices"][0]["message"]["content"],
              f"chat: no completion text in {body}")
        check(body["usage"]["completion_tokens"] > 0, f"chat: no completion tokens in {body}")


def check_prometheus(prometheus_url: str, timeout: float) -> None:
    """Prometheus scrapes batchd's /metrics and has the lines the two batches finished (the
    dashboard's numbers)."""
    deadline = time.monotonic() + timeout
    query = 'sum(batchd_lines_finished_total{outcome="completed"})'
    while True:
        targets = httpx.get(f"{prometheus_url}/api/v1/targets", timeout=10).json()["data"]["activeTargets"]
        batchd = [t for t in targets if t["labels"].get("job") == "batchd"]
        check(len(batchd) == 1, f"prometheus: no batchd scrape target in {targets}")
        result = httpx.get(f"{prometheus_url}/api/v1/query", params={"query": query},
                           timeout=10).json()["data"]["result"]
        finished = float(result[0]["value"][1]) if result else 0.0
        if batchd[0]["health"] == "up" and finished >= LINES_RUN:
            break
        check(time.monotonic() < deadline, f"prometheus: batchd target {batchd[0]['health']} "
                                           f"({batchd[0].get('lastError')}), {query} = {finished}")
        time.sleep(2)
    check(finished == LINES_RUN, f"prometheus: {query} = {finished}, want {LINES_RUN}")
    print(f"smoke: prometheus scrapes batchd /metrics: {query} = {finished:.0f}")


def cosine(a: list[float], b: list[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b))
    return dot / (sum(x * x for x in a) ** 0.5 * sum(y * y for y in b) ** 0.5)


def check(condition: bool, message: str) -> None:
    if not condition:
        print(f"smoke: FAILED: {message}", file=sys.stderr)
        sys.exit(1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base-url", required=True, help="batchd, e.g. http://127.0.0.1:8000")
    parser.add_argument("--prometheus-url", required=True)
    parser.add_argument("--api-key", required=True)
    parser.add_argument("--timeout", type=float, default=300, help="seconds per batch")
    args = parser.parse_args()
    client = OpenAI(base_url=f"{args.base_url}/v1", api_key=args.api_key, max_retries=5)
    check_embeddings(client, args.timeout)
    check_chat(client, args.timeout)
    check_prometheus(args.prometheus_url, timeout=90)


if __name__ == "__main__":
    main()
