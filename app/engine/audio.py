"""The audio of a transcription or translation line, in vLLM run-batch's line format:
``body.file_url`` is an ``http(s)://`` URL or a ``data:...;base64,`` URL (no ``file``).

:func:`fetch_audio` returns its bytes, read with a size limit so an oversized file is refused
before it is held in memory: a ``data:`` URL is measured before it is decoded, a download is
streamed and stopped at the limit, through the outbound policy (app/core/outbound.py: public
addresses only unless ``BATCHD_OUTBOUND_ALLOW`` lists the host). Every failure is an
:class:`AudioFetchError`, which the engines turn into that line's 400
(:func:`fetch_error_reply`), never a failed batch.

Memory stays bounded: at most ``BATCHD_AUDIO_MAX_IN_FLIGHT`` lines of a process hold audio
at once (:func:`audio_slot`, taken before the download and kept until the line is answered), so
audio never takes more than that many times the size limit, whatever the engine's window. One
project's lines hold at most ``BATCHD_AUDIO_MAX_IN_FLIGHT_PER_PROJECT`` of those slots (the line
pipeline names the project in :data:`LINE_PROJECT`), so a project whose audio hosts are slow
cannot take every slot from the others; and a download has one deadline, connect to last byte,
so a server trickling bytes frees its slot when that passes.

Settings (environment, read when a line runs, so ``batchd run-batch`` honours them too):
``BATCHD_AUDIO_MAX_BYTES`` (default 25 MB, OpenAI's limit for an audio file),
``BATCHD_AUDIO_FETCH_TIMEOUT_S`` (default 30 s for the whole download),
``BATCHD_AUDIO_MAX_IN_FLIGHT`` (default 16) and ``BATCHD_AUDIO_MAX_IN_FLIGHT_PER_PROJECT``
(default half of it). No vLLM here.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import httpx

from app.core.endpoints import TRANSLATIONS
from app.core.outbound import DownloadRefused, OutboundPolicy, OutboundRefused, download

MAX_BYTES_SETTING = "BATCHD_AUDIO_MAX_BYTES"
TIMEOUT_SETTING = "BATCHD_AUDIO_FETCH_TIMEOUT_S"
DEFAULT_MAX_BYTES = 25 * 1024 * 1024
DEFAULT_TIMEOUT_S = 30.0
IN_FLIGHT_SETTING = "BATCHD_AUDIO_MAX_IN_FLIGHT"
DEFAULT_IN_FLIGHT = 16
PER_PROJECT_SETTING = "BATCHD_AUDIO_MAX_IN_FLIGHT_PER_PROJECT"

# The project whose line is running, set by the line pipeline around each engine call (the
# engines' interface carries no project); "" (run-batch, a test) shares the slots unlimited.
LINE_PROJECT: ContextVar[str] = ContextVar("batchd_line_project", default="")


@dataclass
class _Share:
    """One project's share of the slots, and how many of its lines wait for or hold one."""

    gate: asyncio.Semaphore
    lines: int = 0


@dataclass
class _Slots:
    """A process's audio slots: all of them, and a share per project with lines at them."""

    total: asyncio.Semaphore
    per_project: int
    projects: dict[str, _Share] = field(default_factory=dict)


# One per event loop (a process runs its lines on one loop; tests may run several in turn).
_slots: dict[asyncio.AbstractEventLoop, _Slots] = {}


class AudioFetchError(Exception):
    """``file_url`` could not be turned into audio bytes (the message says why)."""


@asynccontextmanager
async def audio_slot() -> AsyncIterator[None]:
    """Hold it while a line's audio is in memory (download, decode, inference): its project's
    share first, then one of the process's slots."""
    slots = _loop_slots()
    project = LINE_PROJECT.get()
    if not project:
        async with slots.total:
            yield
        return
    share = slots.projects.get(project)
    if share is None:
        share = slots.projects[project] = _Share(asyncio.Semaphore(slots.per_project))
    share.lines += 1
    try:
        async with share.gate, slots.total:
            yield
    finally:
        share.lines -= 1
        if not share.lines:  # the map holds only projects with lines at the slots
            del slots.projects[project]


def _loop_slots() -> _Slots:
    loop = asyncio.get_running_loop()
    slots = _slots.get(loop)
    if slots is None:
        for stale in [known for known in _slots if known.is_closed()]:
            del _slots[stale]
        total = _setting(IN_FLIGHT_SETTING, DEFAULT_IN_FLIGHT, int)
        per_project = min(total, _setting(PER_PROJECT_SETTING, max(1, total // 2), int))
        slots = _slots[loop] = _Slots(asyncio.Semaphore(total), per_project)
    return slots


def max_audio_bytes() -> int:
    return _setting(MAX_BYTES_SETTING, DEFAULT_MAX_BYTES, int)


def _fetch_timeout() -> float:
    return _setting(TIMEOUT_SETTING, DEFAULT_TIMEOUT_S, float)


def _setting(name: str, default: Any, kind: type) -> Any:
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        value = kind(raw)
    except ValueError:
        raise AudioFetchError(f"The server setting {name}={raw!r} is not a number.") from None
    return value if value > 0 else default


def file_url_problem(body: dict[str, Any]) -> tuple[str, str] | None:
    """``(param, message)`` when the line cannot name its audio (cheap, fetches nothing)."""
    if "file" in body:
        return "body.file", "The 'file' field is not supported in batch requests. Use 'file_url' instead."
    file_url = body.get("file_url")
    if not isinstance(file_url, str) or not file_url:
        return "body.file_url", "Missing required parameter: 'file_url' (an http(s) URL or a data: URL of the audio)."
    scheme = urlsplit(file_url).scheme.lower()
    if scheme not in ("http", "https", "data"):
        return "body.file_url", f"Unsupported URL scheme {scheme!r} in file_url; supported: http, https, data."
    if scheme == "data" and ";base64," not in file_url.split(",", 1)[0] + ",":
        return "body.file_url", "A data: file_url must be base64-encoded (data:<type>;base64,<data>)."
    return None


async def fetch_audio(file_url: str) -> bytes:
    """The bytes ``file_url`` names, at most ``BATCHD_AUDIO_MAX_BYTES`` of them."""
    limit = max_audio_bytes()
    if file_url[:5].lower() == "data:":
        return _decode_data_url(file_url, limit)
    if urlsplit(file_url).scheme.lower() not in ("http", "https"):
        raise AudioFetchError("file_url must be an http(s) URL or a data: URL.")
    return await _download(file_url, limit)


def _decode_data_url(file_url: str, limit: int) -> bytes:
    header, sep, data = file_url.partition(",")
    if not sep or not header.lower().endswith(";base64"):
        raise AudioFetchError("A data: file_url must be base64-encoded (data:<type>;base64,<data>).")
    # Measured before decoding: an oversized line never becomes a second copy in memory.
    size = len(data.rstrip("=")) * 3 // 4
    if size > limit:
        raise AudioFetchError(_too_large(f"{size} bytes", limit))
    try:
        return base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        raise AudioFetchError("The data: file_url is not valid base64.") from None


async def _download(url: str, limit: int) -> bytes:
    timeout = _fetch_timeout()
    try:
        return await download(url, OutboundPolicy.from_environ(), limit=limit, timeout=timeout)
    except DownloadRefused as exc:
        if exc.status is not None:
            raise AudioFetchError(f"Fetching file_url answered HTTP {exc.status}.") from None
        if exc.encoding:
            raise AudioFetchError(
                f"Fetching file_url answered a compressed body ({exc.encoding}); serve the audio file as is."
            ) from None
        raise AudioFetchError(_too_large(exc.size, limit)) from None
    except (TimeoutError, httpx.TimeoutException):  # the whole download's deadline, or one read's
        raise AudioFetchError(f"Fetching file_url timed out after {timeout:g} s.") from None
    except OutboundRefused as exc:
        raise AudioFetchError(f"file_url: {exc}") from None
    except httpx.HTTPError as exc:  # its kind only: its text may name an address the host resolved to
        raise AudioFetchError(f"Could not fetch file_url ({type(exc).__name__}).") from None


def _too_large(size: str, limit: int) -> str:
    return f"The audio file is too large ({size}); the limit is {limit} bytes (the server's {MAX_BYTES_SETTING})."


def fetch_error_reply(endpoint: str, exc: AudioFetchError) -> tuple[int, dict[str, Any]]:
    """The line's answer to an unusable ``file_url``: 400 in vLLM's error envelope, worded as
    ``vllm run-batch`` words it ("Failed to process transcription: ...")."""
    operation = "translation" if endpoint == TRANSLATIONS else "transcription"
    return 400, {
        "error": {
            "message": f"Failed to process {operation}: {exc}",
            "type": "BadRequestError",
            "param": "file_url",
            "code": 400,
        }
    }
