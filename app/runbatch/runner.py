"""`batchd run-batch`: the server's executor without the server.

Streams input lines (path, stdin or URL) through the same sliding window and the same vLLM
serving classes as `batchd serve`, and writes OpenAI-format result lines as they finish. A
malformed line gets an error line; the others run. With --resume, custom_ids already written
by an interrupted run are skipped."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

from app.core.endpoints import normalize_endpoint
from app.engine.config.catalog import resolve_model_specs
from app.engine.config.specs import ModelSpec
from app.engine.errors import ModelConfigError
from app.engine.protocol import Engines
from app.pipeline.executor import LineExecutor, LineOutcome
from app.pipeline.jsonl import split_lines
from app.pipeline.lines import InputLine, dumps, error_line
from app.pipeline.ordering import grouped_by_prefix
from app.runbatch.progress import Progress
from app.runbatch.resume import Finished, finished_lines
from app.runbatch.sinks import LineSink
from app.runbatch.sources import count_lines, input_chunks

log = logging.getLogger("batchd.run_batch")


@dataclass
class RunBatchOptions:
    input: str
    output: str
    model: str
    served_model_name: str | None = None
    error_file: str | None = None
    output_tmp_dir: str | None = None
    resume: bool = False
    config: Path | None = None
    data_dir: Path = Path("./data")
    # dtype, max_model_len, kv_cache_gib, max_num_seqs, engine_args (as in the config file)
    engine_options: dict = field(default_factory=dict)


def model_spec(options: RunBatchOptions) -> ModelSpec:
    model_arg = f"{options.served_model_name}={options.model}" if options.served_model_name else options.model
    specs = resolve_model_specs([model_arg], options.config, data_dir=options.data_dir)
    name = options.served_model_name or specs[0].name
    spec = next(s for s in specs if s.name == name)
    if not isinstance(spec, ModelSpec):
        raise ModelConfigError(f"batchd run-batch runs in-process models only; {name!r} is an upstream.")
    return spec.with_options(options.engine_options) if options.engine_options else spec


def _rejected(line_no: int, raw: bytes) -> tuple[InputLine | None, dict | None]:
    """Parse one input line: (line to run, None) or (None, error line to write)."""
    try:
        request = json.loads(raw)
    except ValueError:
        return None, error_line(None, "invalid_json_line", f"Line {line_no} is not parseable as valid JSON.")
    if not isinstance(request, dict):
        return None, error_line(None, "invalid_json_line", f"Line {line_no} is not a JSON object.")
    custom_id = request.get("custom_id")
    for name in ("custom_id", "method", "url", "body"):
        if request.get(name) in (None, ""):
            return None, error_line(custom_id, "missing_required_parameter", f"Missing required parameter: '{name}'.")
    endpoint = normalize_endpoint(request["url"])
    if endpoint is None:
        return None, error_line(custom_id, "invalid_url", f"Unsupported url {request['url']!r}.")
    if request["method"] != "POST" or not isinstance(request["body"], dict):
        return None, error_line(custom_id, "invalid_request", "Lines must be POST requests with a JSON object body.")
    return InputLine(line_no, str(custom_id), endpoint, request["body"]), None


async def _lines_to_run(
    options: RunBatchOptions, skip: Finished, errors: LineSink, progress: Progress
) -> AsyncIterator[InputLine]:
    anonymous_to_skip = skip.anonymous
    async for line_no, raw in split_lines(input_chunks(options.input)):
        if not raw.strip():
            continue
        line, rejection = _rejected(line_no, raw)
        if line is not None and line.custom_id in skip.custom_ids:
            continue
        if rejection is not None:
            if rejection["custom_id"] is None:
                if anonymous_to_skip > 0:  # already written before --resume
                    anonymous_to_skip -= 1
                    continue
            elif str(rejection["custom_id"]) in skip.custom_ids:
                continue
            errors.write(dumps(rejection).encode())
            progress.update(ok=False)
            continue
        assert line is not None, "a line is either parsed or rejected"
        yield line


async def run_batch(options: RunBatchOptions, registry: Engines) -> Progress:
    """Run the whole input through `registry` (started)."""
    if options.resume and options.output == "-":
        raise ValueError("--resume needs an output file or URL, not stdout")
    output = LineSink(options.output, options.output_tmp_dir, append=options.resume)
    errors = (
        LineSink(options.error_file, options.output_tmp_dir, append=options.resume) if options.error_file else output
    )
    skip = Finished()
    if options.resume:
        for sink in {id(output): output, id(errors): errors}.values():
            if sink.path is not None:  # stdout holds nothing to resume from
                finished_lines(sink.path, into=skip)
    total = await asyncio.to_thread(count_lines, options.input)
    progress = Progress(total, already_done=len(skip))
    name = model_spec(options).name

    async def record(outcome: LineOutcome) -> None:
        (output if outcome.ok else errors).write(dumps(outcome.record).encode())
        progress.update(outcome.ok, outcome.usage.output_tokens)

    try:
        executor = LineExecutor(registry, registry.suggested_concurrency(name))
        lines = grouped_by_prefix(_lines_to_run(options, skip, errors, progress))
        await executor.run(lines, record, asyncio.Event())
        await output.finish()
        if errors is not output:
            await errors.finish()
    finally:
        output.close()
        errors.close()
        progress.close()
    return progress


async def main(options: RunBatchOptions) -> Progress:
    from app.engine.local.registry import EngineRegistry  # imports vLLM

    registry = EngineRegistry()
    await registry.start([model_spec(options)])
    try:
        return await run_batch(options, registry)
    finally:
        await registry.shutdown()
