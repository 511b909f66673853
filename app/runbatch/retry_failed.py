"""--retry-failed: which lines an earlier run's output holds as failed, so that only those run
again. The output may be the earlier run's whole output (failed lines inline, as `vllm
run-batch` writes them) or its --error-file; a failed line is one with an `error`, or with a
`response` whose status is not 200."""

from __future__ import annotations

from app.pipeline.jsonl import split_lines
from app.pipeline.lines import LineIds, ResultLine
from app.runbatch.sources import input_chunks


async def failed_lines(location: str) -> LineIds:
    """The failed lines of the result file at `location` (a path or an http(s) URL)."""
    failed = LineIds()
    async for line_no, raw in split_lines(input_chunks(location)):
        if not raw.strip():
            continue
        try:
            line = ResultLine.read(raw)
        except ValueError as exc:
            raise ValueError(f"--retry-failed {location}: line {line_no} is not a result line ({exc})") from None
        if line.failed:
            failed.add(line.custom_id)
    return failed
