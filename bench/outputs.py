"""Count what a system produced: successful and failed lines and token usage, read from
OpenAI-format batch result files (vLLM's run_batch, ``batchd run-batch`` and batchd's output
and error files all use it). Files are streamed, never loaded whole."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path


@dataclass
class OutputStats:
    ok: int = 0
    failed: int = 0
    prompt_tokens: int = 0
    output_tokens: int = 0
    custom_ids: int = 0


def scan_results(*paths: Path | None) -> OutputStats:
    """Tally result lines over ``paths`` (missing files count as empty). A line is ok when its
    response has status 200 and it has no error."""
    stats = OutputStats()
    ids: set[str] = set()
    for path in paths:
        if path is None or not path.exists():
            continue
        with path.open("rb") as fh:
            for raw in fh:
                if not raw.strip():
                    continue
                line = json.loads(raw)
                ids.add(str(line.get("custom_id")))
                response = line.get("response") or {}
                if response.get("status_code") == 200 and not line.get("error"):
                    stats.ok += 1
                    usage = (response.get("body") or {}).get("usage") or {}
                    stats.prompt_tokens += usage.get("prompt_tokens") or 0
                    stats.output_tokens += usage.get("completion_tokens") or 0
                else:
                    stats.failed += 1
    stats.custom_ids = len(ids)
    return stats
