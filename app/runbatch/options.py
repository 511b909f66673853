"""What a `batchd run-batch` run is given, and the checks made before any model loads: options
that cannot work together, an input that cannot be read, an output that cannot be written."""

from __future__ import annotations

import asyncio
import errno
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from app.runbatch.sources import is_url, open_input


class RunBatchRefused(Exception):
    """The run cannot start; the message is one line for the user."""


@dataclass
class RunBatchOptions:
    input: str
    output: str
    model: str
    served_model_name: str | None = None
    error_file: str | None = None
    output_tmp_dir: str | None = None
    resume: bool = False
    retry_failed: str | None = None  # an earlier run's output (or error file): run only its failed lines
    config: Path | None = None
    data_dir: Path = Path("./data")
    # dtype, max_model_len, gpu_memory_utilization, engine_args (as in the config file)
    engine_options: dict = field(default_factory=dict)


def check_options(options: RunBatchOptions) -> None:
    """Refuse options that cannot work together (ValueError), before any engine starts."""
    if options.resume and options.output == "-":
        raise ValueError("--resume needs an output file or URL, not stdout")
    if options.retry_failed is not None:
        if _same_location(options.retry_failed, options.output):
            raise ValueError("--retry-failed reads the earlier output: write the new one elsewhere (-o)")
        if options.retry_failed == "-" and options.input == "-":
            raise ValueError("-i and --retry-failed cannot both read stdin")


def _same_location(source: str, target: str) -> bool:
    """Whether reading `source` and writing `target` name one file (`-` is stdin, then stdout)."""
    if source == "-" or target == "-":
        return False
    if is_url(source) or is_url(target):  # a presigned GET and PUT of one object differ in their query
        return source.split("?", 1)[0] == target.split("?", 1)[0]
    return Path(source).resolve() == Path(target).resolve()


async def check_locations(options: RunBatchOptions) -> None:
    """Open what the run reads and try writing where it writes (RunBatchRefused if it cannot),
    leaving no file behind: a mistyped path fails now, not after minutes of model loading."""
    for flag, location in (("-i", options.input), ("--retry-failed", options.retry_failed)):
        if location is not None:
            try:
                await open_input(location)
            except (OSError, httpx.HTTPError) as error:
                raise RunBatchRefused(f"cannot read {flag} {location}: {_reason(error)}") from error
    for flag, location in (("-o", options.output), ("--error-file", options.error_file)):
        if location is not None and location != "-":
            directory = Path(options.output_tmp_dir or tempfile.gettempdir()) if is_url(location) else None
            await _check_writable(flag, location, directory)
    if options.output_tmp_dir is not None:
        await _check_writable("--output-tmp-dir", options.output_tmp_dir, Path(options.output_tmp_dir))


async def _check_writable(flag: str, location: str, directory: Path | None) -> None:
    """`directory` None: `location` is a file path, written next to itself (OUT.partial)."""
    try:
        if directory is None:
            if Path(location).is_dir():
                raise IsADirectoryError(f"{location} is a directory")
            directory = Path(location).parent
        await asyncio.to_thread(_probe_directory, directory)
    except OSError as error:
        raise RunBatchRefused(f"cannot write {flag} {location}: {_reason(error)}") from error


def _probe_directory(directory: Path) -> None:
    if directory.exists() and not directory.is_dir():
        raise NotADirectoryError(errno.ENOTDIR, "Not a directory")
    directory.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryFile(dir=directory):  # gone when closed
        pass


def _reason(error: Exception) -> str:
    if isinstance(error, httpx.HTTPStatusError):
        return f"HTTP {error.response.status_code}"
    if isinstance(error, OSError) and error.strerror:
        return error.strerror[0].lower() + error.strerror[1:]
    return str(error) or type(error).__name__
