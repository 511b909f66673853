"""--retry-failed: which lines an earlier run's output holds as failed, so that only those run
again. The output may be the earlier run's whole output (failed lines inline, as `vllm
run-batch` writes them) or its --error-file; a failed line is one with an `error`, or with a
`response` whose status is not 200."""

from __future__ import annotations

from dataclasses import dataclass, field

from app.pipeline.jsonl import split_lines
from app.pipeline.lines import load_line
from app.runbatch.sources import input_chunks


@dataclass
class Failed:
    """The custom_ids of the failed lines, and how many failed lines had none (input lines that
    were not JSON, or gave no custom_id: every such input line fails, and its error line is
    written in input order, so they are the first `anonymous` such lines of the input)."""

    custom_ids: set[str] = field(default_factory=set)
    anonymous: int = 0

    def __len__(self) -> int:
        return len(self.custom_ids) + self.anonymous


def is_failure(record: object) -> bool:
    if not isinstance(record, dict):
        return False
    response = record.get("response")
    return record.get("error") is not None or not isinstance(response, dict) or response.get("status_code") != 200


async def failed_lines(location: str) -> Failed:
    """The failed lines of the result file at `location` (a path or an http(s) URL)."""
    failed = Failed()
    async for line_no, raw in split_lines(input_chunks(location)):
        if not raw.strip():
            continue
        try:
            record = load_line(raw)
        except ValueError:
            raise ValueError(f"--retry-failed {location}: line {line_no} is not a result line (not JSON)") from None
        if not isinstance(record, dict) or "custom_id" not in record:
            raise ValueError(f"--retry-failed {location}: line {line_no} is not a result line (no custom_id)")
        if not is_failure(record):
            continue
        if record["custom_id"] is None:
            failed.anonymous += 1
        else:
            failed.custom_ids.add(str(record["custom_id"]))
    return failed
