"""`batchd run-batch`: the server's executor without the server.

Streams input lines (path, stdin or URL) through the same sliding window and the same vLLM
serving classes as `batchd serve`, and writes OpenAI-format result lines as they finish. A
malformed line gets an error line; the others run. With --resume, custom_ids already written
by an interrupted run are skipped; with --retry-failed, only the lines an earlier run's output
holds as failed run."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from pathlib import Path

from app.core.config import Settings
from app.engine.config.catalog import resolve_model_specs
from app.engine.config.specs import ModelSpec
from app.engine.errors import ModelConfigError
from app.engine.protocol import Engines
from app.engine.supervision import RestartPolicy
from app.pipeline.executor import LineExecutor, LineOutcome
from app.pipeline.jsonl import split_lines
from app.pipeline.lines import InputLine, LineIds, dumps, parse_line
from app.pipeline.prefix_order import in_prefix_order
from app.runbatch.options import RunBatchOptions, RunBatchRefused, check_locations, check_options
from app.runbatch.progress import Progress
from app.runbatch.resume import finished_lines
from app.runbatch.retry_failed import failed_lines
from app.runbatch.sinks import LineSink
from app.runbatch.sources import count_lines, input_chunks

log = logging.getLogger("batchd.run_batch")


def model_spec(options: RunBatchOptions) -> ModelSpec:
    model_arg = f"{options.served_model_name}={options.model}" if options.served_model_name else options.model
    specs = resolve_model_specs([model_arg], options.config, data_dir=options.data_dir)
    name = options.served_model_name or specs[0].name
    spec = next(s for s in specs if s.name == name)
    if not isinstance(spec, ModelSpec):
        raise ModelConfigError(f"batchd run-batch runs in-process models only; {name!r} is an upstream.")
    return spec.with_options(options.engine_options) if options.engine_options else spec


async def _lines_to_run(
    options: RunBatchOptions, skip: LineIds, retry: LineIds | None, errors: LineSink, progress: Progress
) -> AsyncIterator[tuple[bytes, InputLine]]:
    anonymous = 0  # input lines so far that gave no custom_id
    found: set[str] = set()
    async for line_no, raw in split_lines(input_chunks(options.input)):
        line = parse_line(line_no, raw)
        if line is None:
            continue
        if line.custom_id is None:
            anonymous += 1
            if (retry is not None and anonymous > retry.anonymous) or anonymous <= skip.anonymous:
                continue
        else:
            custom_id = str(line.custom_id)
            if retry is not None:
                if custom_id not in retry.custom_ids:
                    continue
                found.add(custom_id)
            if custom_id in skip.custom_ids:  # already written before --resume
                continue
        if isinstance(line, InputLine):
            yield raw, line
        else:  # refused: an error line, written now, in input order
            errors.write(dumps(line.error_record()).encode())
            progress.update(ok=False)
    if retry is not None and len(found) < len(retry.custom_ids):
        missing = sorted(retry.custom_ids - found)
        log.warning(
            "%d failed custom_ids of %s are not in the input %s (e.g. %s): not run",
            len(missing),
            options.retry_failed,
            options.input,
            ", ".join(missing[:3]),
        )


async def run_batch(options: RunBatchOptions, registry: Engines) -> Progress:
    """Run the whole input through `registry` (started)."""
    check_options(options)
    retry = await failed_lines(options.retry_failed) if options.retry_failed is not None else None
    output = LineSink(options.output, options.output_tmp_dir, append=options.resume)
    errors = (
        LineSink(options.error_file, options.output_tmp_dir, append=options.resume) if options.error_file else output
    )
    skip = LineIds()
    if options.resume:
        for sink in {id(output): output, id(errors): errors}.values():
            if sink.path is not None:  # stdout holds nothing to resume from
                finished_lines(sink.path, into=skip)
    total = len(retry) if retry is not None else await asyncio.to_thread(count_lines, options.input)
    progress = Progress(total, already_done=len(skip))
    name = model_spec(options).name

    async def record(outcome: LineOutcome) -> None:
        (output if outcome.ok else errors).write(dumps(outcome.record).encode())
        progress.update(outcome.ok, outcome.usage.output_tokens)

    try:
        executor = LineExecutor(registry, registry.suggested_concurrency(name))
        # The whole input in prompt-prefix order (the server's order too), spooled beside the output.
        spool_dir = Path(options.output_tmp_dir) if options.output_tmp_dir else None
        lines = in_prefix_order(_lines_to_run(options, skip, retry, errors, progress), spool_dir)
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
    """Check the options and locations (RunBatchRefused), then start the model and run."""
    try:
        check_options(options)
        spec = model_spec(options)
    except ValueError as error:  # ModelConfigError too: the --model or --config given
        raise RunBatchRefused(str(error)) from error
    await check_locations(options)

    from app.engine.local.registry import EngineRegistry  # imports vLLM

    # A dead engine is restarted within BATCHD_ENGINE_MAX_RESTARTS and its lines run again.
    registry = EngineRegistry(RestartPolicy.from_settings(Settings()))
    try:
        await registry.start([spec])
    except ModelConfigError as error:  # e.g. an --engine-arg vLLM has no option for
        raise RunBatchRefused(str(error)) from error
    try:
        return await run_batch(options, registry)
    finally:
        await registry.shutdown()
