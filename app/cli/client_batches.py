"""`batchd batches create | list | get | cancel | download | estimate | retry`: the Batch API of any
OpenAI-compatible server (estimate and retry are batchd's extensions)."""

from __future__ import annotations

import argparse
import itertools
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from app.cli import client_files, client_progress
from app.cli.client_common import (
    EXIT_API_ERROR,
    EXIT_CANCELLED,
    EXIT_CODES_HELP,
    EXIT_EXPIRED,
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_USAGE,
    add_client_flags,
    command,
    emit,
)
from app.core.statuses import BatchStatus

if TYPE_CHECKING:
    import openai

ENDED = {
    BatchStatus.COMPLETED: EXIT_OK,
    BatchStatus.FAILED: EXIT_FAILED,
    BatchStatus.EXPIRED: EXIT_EXPIRED,
    BatchStatus.CANCELLED: EXIT_CANCELLED,
}


def _input_file(client: openai.OpenAI, given: str) -> tuple[str, bool]:
    """The id of FILE, uploaded (purpose batch) when it is a path, and whether it was uploaded here."""
    path = Path(given)
    if not path.exists() and given.startswith("file-"):
        return given, False
    return client_files.upload(client, path, "batch").id, True


def _pair(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"{text!r}: expected KEY=VALUE")
    return key, value


def _when(seconds: int | None) -> str:
    return "-" if seconds is None else datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%d %H:%M:%S")


def _line(batch: Any) -> str:
    counts = batch.request_counts
    done = "-" if counts is None else f"{counts.completed + counts.failed}/{counts.total} ({counts.failed} failed)"
    return f"{batch.id}  {batch.status}  {batch.endpoint}  {done}  {_when(batch.created_at)}"


def _details(batch: Any) -> list[str]:
    lines = [_line(batch), f"input_file_id: {batch.input_file_id}"]
    lines += [f"{name}: {value}" for name in ("output_file_id", "error_file_id") if (value := getattr(batch, name))]
    for error in (batch.errors.data or []) if batch.errors else []:
        where = f" (line {error.line})" if error.line is not None else ""
        lines.append(f"error: {error.code}{where}: {error.message}")
    return lines


def _save(client: openai.OpenAI, batch: Any, output: Path | None, errors: Path | None) -> None:
    if output is not None:
        client_files.download(client, batch.output_file_id, output)
    if errors is not None:
        client_files.download(client, batch.error_file_id, errors)


def _finish(args: argparse.Namespace, client: openai.OpenAI, batch: Any) -> int:
    """Print the batch (after --wait: once ended, its files saved) and the exit status it stands for."""
    if not args.wait:
        emit(args, batch, batch.id)
        return EXIT_OK
    try:
        batch = client_progress.wait(client, batch, args.poll_interval)
    except KeyboardInterrupt:
        print(f"batchd: interrupted; {batch.id} keeps running", file=sys.stderr)
        return EXIT_INTERRUPTED
    _save(client, batch, args.output, args.errors)
    emit(args, batch, batch.id)
    if batch.status != BatchStatus.COMPLETED:
        print(f"batchd: {batch.id} {batch.status}", file=sys.stderr)
    return ENDED[batch.status]


def _usage_problem(args: argparse.Namespace) -> bool:
    if (args.output or args.errors) and not args.wait:
        print("batchd: error: --output and --errors need --wait (or use `batchd batches download`)", file=sys.stderr)
        return True
    return False


@command
def _create(args: argparse.Namespace, client: openai.OpenAI) -> int:
    if _usage_problem(args):
        return EXIT_USAGE
    file_id, _ = _input_file(client, args.file)
    batch = client.batches.create(
        input_file_id=file_id,
        endpoint=args.endpoint,
        completion_window=args.window,
        metadata=dict(args.metadata) or None,
    )
    return _finish(args, client, batch)


@command
def _retry(args: argparse.Namespace, client: openai.OpenAI) -> int:
    import openai

    if _usage_problem(args):
        return EXIT_USAGE
    body = {"errors": args.only} if args.only else None
    batch = client.post(f"/batches/{args.batch_id}/retry", body=body, cast_to=openai.types.Batch)
    return _finish(args, client, batch)


@command
def _list(args: argparse.Namespace, client: openai.OpenAI) -> int:
    batches = list(itertools.islice(client.batches.list(limit=min(args.limit, 100)), args.limit))
    emit(args, batches, [_line(b) for b in batches])
    return EXIT_OK


@command
def _get(args: argparse.Namespace, client: openai.OpenAI) -> int:
    batch = client.batches.retrieve(args.batch_id)
    emit(args, batch, _details(batch))
    return EXIT_OK


@command
def _cancel(args: argparse.Namespace, client: openai.OpenAI) -> int:
    batch = client.batches.cancel(args.batch_id)
    emit(args, batch, _line(batch))
    return EXIT_OK


@command
def _download(args: argparse.Namespace, client: openai.OpenAI) -> int:
    batch = client.batches.retrieve(args.batch_id)
    if batch.status not in ENDED:
        print(f"batchd: error: {batch.id} has not ended ({batch.status})", file=sys.stderr)
        return EXIT_API_ERROR
    _save(client, batch, args.output, args.errors)
    emit(args, batch, batch.id)
    return EXIT_OK


@command
def _estimate(args: argparse.Namespace, client: openai.OpenAI) -> int:
    file_id, uploaded = _input_file(client, args.file)
    body = {"input_file_id": file_id, "endpoint": args.endpoint, "completion_window": args.window}
    try:
        quote: dict[str, Any] = client.post("/batches/estimate", body=body, cast_to=dict)
    finally:
        if uploaded:  # the quote's copy only; `create` uploads the file again
            client.files.delete(file_id)
    text = [f"{name}: {quote[name]}" for name in ("model", "lines", "input_tokens", "max_output_tokens")]
    if quote.get("cost"):
        text.append(f"cost: {quote['cost']['total']} {quote['cost']['currency']}")
    text += [
        f"projected_finish_at: {_when(quote.get('projected_finish_at'))}",
        f"feasible: {quote.get('feasible')}",
    ]
    text += [f"error: {e['code']} (line {e.get('line')}): {e['message']}" for e in quote.get("errors") or []]
    emit(args, quote, text)
    return EXIT_OK


def _add_wait_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--wait", action="store_true", help="wait until the batch ends, its progress on stderr")
    parser.add_argument("--output", type=Path, help="with --wait: save the output file here")
    parser.add_argument("--errors", type=Path, help="with --wait: save the error file here")
    parser.add_argument("--poll-interval", type=float, default=2.0, metavar="SECONDS", help="default: 2")


def add_parser(commands) -> None:
    batches = commands.add_parser(
        "batches", help="the Batch API of a server (OPENAI_BASE_URL, OPENAI_API_KEY)", epilog=EXIT_CODES_HELP
    )
    sub = batches.add_subparsers(dest="batches_command", required=True)
    create = sub.add_parser(
        "create", help="upload FILE (or take a file id) and create a batch of it", epilog=EXIT_CODES_HELP
    )
    create.add_argument("file", metavar="FILE", help="a JSONL path, or the id of an uploaded file")
    create.add_argument("--endpoint", required=True, help="e.g. /v1/chat/completions")
    create.add_argument("--window", default="24h", help="the completion window (default: 24h)")
    create.add_argument("--metadata", action="append", default=[], type=_pair, metavar="KEY=VALUE", help="repeatable")
    _add_wait_flags(create)
    create.set_defaults(func=_create)
    list_ = sub.add_parser("list", help="batches, newest first: id, status, endpoint, lines done, created (UTC)")
    list_.add_argument("--limit", type=int, default=20, help="at most this many (default: 20)")
    list_.set_defaults(func=_list)
    get = sub.add_parser("get", help="one batch")
    get.add_argument("batch_id", metavar="ID")
    get.set_defaults(func=_get)
    cancel = sub.add_parser("cancel", help="cancel a batch")
    cancel.add_argument("batch_id", metavar="ID")
    cancel.set_defaults(func=_cancel)
    download = sub.add_parser("download", help="save an ended batch's output and error files")
    download.add_argument("batch_id", metavar="ID")
    download.add_argument("--output", type=Path, help="the output file's path")
    download.add_argument("--errors", type=Path, help="the error file's path")
    download.set_defaults(func=_download)
    estimate = sub.add_parser("estimate", help="batchd's quote: lines, tokens, cost and projected finish")
    estimate.add_argument("file", metavar="FILE", help="a JSONL path (uploaded, then deleted), or a file id")
    estimate.add_argument("--endpoint", required=True, help="e.g. /v1/chat/completions")
    estimate.add_argument("--window", default="24h", help="the completion window (default: 24h)")
    estimate.set_defaults(func=_estimate)
    retry = sub.add_parser(
        "retry", help="batchd's retry: a new batch of the lines that did not succeed", epilog=EXIT_CODES_HELP
    )
    retry.add_argument("batch_id", metavar="ID")
    retry.add_argument("--only", action="append", metavar="CODE", help="only lines with this error code; repeatable")
    _add_wait_flags(retry)
    retry.set_defaults(func=_retry)
    for parser in (create, list_, get, cancel, download, estimate, retry):
        add_client_flags(parser)
