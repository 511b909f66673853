"""What the client command groups (`batchd batches`, `batchd files`) share: the `openai` client
from the flags or OPENAI_BASE_URL / OPENAI_API_KEY, one-line errors, --json output, exit codes."""

from __future__ import annotations

import argparse
import functools
import json
import os
import sys
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import openai

# Exit codes a pipeline can branch on (argparse's usage errors are 2).
EXIT_OK = 0
EXIT_API_ERROR = 1
EXIT_USAGE = 2
EXIT_FAILED = 3
EXIT_EXPIRED = 4
EXIT_CANCELLED = 5
EXIT_INTERRUPTED = 130
EXIT_CODES_HELP = (
    "exit status: 0 done (after --wait: the batch completed, some lines may have failed), 1 an API "
    "or connection error (the message on stderr), 2 a usage error; after --wait: 3 the batch failed, "
    "4 it expired, 5 it was cancelled, 130 interrupted (the batch keeps running)"
)


def add_client_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--base-url", help="the API's base URL, e.g. http://127.0.0.1:8000/v1 (env OPENAI_BASE_URL)")
    parser.add_argument("--api-key", help="the API key (env OPENAI_API_KEY)")
    parser.add_argument("--json", action="store_true", help="print the object(s) as JSON")


def open_client(args: argparse.Namespace) -> openai.OpenAI:
    import openai

    return openai.OpenAI(
        base_url=args.base_url or os.environ.get("OPENAI_BASE_URL"),
        api_key=args.api_key or os.environ.get("OPENAI_API_KEY"),
    )


def one_line(text: str) -> str:
    return " ".join(str(text).split())


def _error_message(error: Exception) -> str:
    import openai

    if isinstance(error, openai.APIStatusError):
        body = error.body
        message = body.get("message") if isinstance(body, dict) else None
        return f"{error.status_code} {message or error.message}"
    if isinstance(error, openai.APIConnectionError):
        return f"{error} ({error.request.method} {error.request.url})"
    return str(error) or type(error).__name__


def command(func: Callable[[argparse.Namespace, openai.OpenAI], int]) -> Callable[[argparse.Namespace], int]:
    """A client command: the client opened from the flags, an API or file error as one line on stderr and exit 1."""

    @functools.wraps(func)
    def run(args: argparse.Namespace) -> int:
        import openai

        try:
            return func(args, open_client(args))
        except (openai.OpenAIError, OSError) as error:
            print(f"batchd: error: {one_line(_error_message(error))}", file=sys.stderr)
            return EXIT_API_ERROR
        except KeyboardInterrupt:
            print("batchd: interrupted", file=sys.stderr)
            return EXIT_INTERRUPTED

    return run


def as_json(obj: Any) -> Any:
    if hasattr(obj, "model_dump"):
        return obj.model_dump(mode="json")
    return obj


def emit(args: argparse.Namespace, obj: Any, text: Iterable[str] | str) -> None:
    """`obj` as JSON with --json (a list as a JSON array), else the lines of `text`."""
    if args.json:
        value = [as_json(o) for o in obj] if isinstance(obj, list) else as_json(obj)
        print(json.dumps(value, indent=2))
    else:
        for line in [text] if isinstance(text, str) else text:
            print(line)
