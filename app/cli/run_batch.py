"""`batchd run-batch`: one batch file through a model with no server (a drop-in for `vllm run-batch`)."""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from pathlib import Path

from app.core.config import Settings
from app.runbatch.engine_flags import add_engine_flags


def _run_batch(args: argparse.Namespace) -> int:
    from app.runbatch.engine_flags import engine_options
    from app.runbatch.options import RunBatchOptions, RunBatchRefused
    from app.runbatch.runner import main as run_batch_main
    from app.runbatch.sinks import reserve_stdout

    if args.output == "-" or args.error_file == "-":
        reserve_stdout()  # before vLLM starts logging or spawning

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    options = RunBatchOptions(
        input=args.input,
        output=args.output,
        model=args.model,
        served_model_name=args.served_model_name[0] if args.served_model_name else None,
        error_file=args.error_file,
        output_tmp_dir=args.output_tmp_dir,
        resume=args.resume,
        retry_failed=args.retry_failed,
        config=args.model_config_file,
        data_dir=args.data_dir or Settings().data_dir,
        engine_options=engine_options(args),
    )
    try:
        progress = asyncio.run(run_batch_main(options))
    except RunBatchRefused as error:
        print(f"batchd run-batch: error: {error}", file=sys.stderr)
        return 2
    print(progress.summary(), file=sys.stderr)
    return 0


def add_parser(commands) -> None:
    run_batch = commands.add_parser(
        "run-batch",
        help="run a batch file through a model, no server (drop-in for `vllm run-batch`)",
        description="Checks its options, input and output before it loads the model; a flag it does "
        "not know is refused (vLLM engine options beyond those listed go as --engine-arg KEY=VALUE).",
        allow_abbrev=False,
    )
    run_batch.add_argument(
        "-i",
        "--input-file",
        dest="input",
        required=True,
        help="input JSONL: a path, - for stdin, or an http(s) URL (presigned GET)",
    )
    run_batch.add_argument(
        "-o",
        "--output-file",
        dest="output",
        required=True,
        help="output JSONL: a path, - for stdout, or an http(s) URL (presigned PUT)",
    )
    run_batch.add_argument("--model", required=True, help="model path, hub id, or a built-in model name")
    run_batch.add_argument(
        "--served-model-name", nargs="+", help="the name lines use in body.model (first one is used)"
    )
    run_batch.add_argument("--error-file", help="write failed lines here (OpenAI style) instead of inline")
    run_batch.add_argument("--output-tmp-dir", help="where URL outputs are staged before upload")
    run_batch.add_argument(
        "--resume", action="store_true", help="skip lines an interrupted run with the same output already wrote"
    )
    run_batch.add_argument(
        "--retry-failed",
        metavar="PREVIOUS_OUTPUT",
        help="run only the lines that failed in an earlier run of the same input: its output (failed lines "
        "inline) or its --error-file, a path or an http(s) URL",
    )
    run_batch.add_argument(
        "--config", dest="model_config_file", type=Path, help="YAML/JSON model options file (as for `batchd serve`)"
    )
    run_batch.add_argument("--data-dir", type=Path, help="where built-in models are built (default ./data)")
    add_engine_flags(run_batch)
    run_batch.set_defaults(func=_run_batch)
