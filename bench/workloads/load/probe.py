"""A second view of `batches.retrieve` during the load: one client in a process of its own,
retrieving one batch at a steady 20 calls a second.

The 50 load clients share one Python process and send in correlated bursts (a slow answer
holds many of them back, then they all come at once), so their latencies include waiting
in their own event loop and behind each other's bursts. The probe samples the server at
evenly spaced moments, in a process that does nothing else.

    python -m bench.workloads.load.probe BASE_URL API_KEY SECONDS    (prints a JSON list of ms)
"""

from __future__ import annotations

import json
import sys
import time

from harness.client import openai_client

INTERVAL_S = 0.05


def main(base_url: str, api_key: str, seconds: float) -> list[float]:
    client = openai_client(base_url, api_key, timeout=60)
    line = {
        "custom_id": "probe",
        "method": "POST",
        "url": "/v1/chat/completions",
        "body": {"model": "batchd-tiny-chat", "max_tokens": 4, "messages": [{"role": "user", "content": "hi"}]},
    }
    file = client.files.create(file=("probe.jsonl", json.dumps(line).encode() + b"\n"), purpose="batch")
    batch = client.batches.create(input_file_id=file.id, endpoint="/v1/chat/completions", completion_window="24h")
    latencies: list[float] = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        started = time.perf_counter()
        client.batches.retrieve(batch.id)
        latencies.append((time.perf_counter() - started) * 1000)
        time.sleep(INTERVAL_S)
    return latencies


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1], sys.argv[2], float(sys.argv[3]))))
