"""vLLM's own media fetch through batchd's outbound policy.

A chat line for a multimodal model may name its image, audio or video by URL (`image_url`,
`audio_url`, `video_url`); vLLM downloads it in this process while it renders the prompt, with
its `MediaConnector` (registered as "http", the connector vLLM loads unless
`VLLM_MEDIA_CONNECTOR` names another). :func:`guard_media_fetches` registers a subclass under that
name whose http(s) downloads go through app/core/outbound.py like every other fetch a caller
names: public addresses only (unless `BATCHD_OUTBOUND_ALLOW` lists them), the connection pinned
to the checked address, each redirect hop checked. `data:` URLs and vLLM's local-path rules
(`--allowed-local-media-path`) are vLLM's as before; so is `--allowed-media-domains`.
"""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
from urllib3.util import parse_url

from app.core.outbound import DownloadRefused, OutboundPolicy, OutboundRefused, download
from app.engine.vllm_api import MEDIA_CONNECTOR_REGISTRY, MediaConnector, vllm_envs

MIB = 1024 * 1024
DEFAULT_TIMEOUT_S = 30.0


class GuardedMediaConnector(MediaConnector):
    async def load_from_url_async(self, url: str, media_io: Any, *, fetch_timeout: int | None = None) -> Any:
        if not _is_http(url):
            return await super().load_from_url_async(url, media_io, fetch_timeout=fetch_timeout)
        self._assert_url_in_allowed_media_domains(parse_url(url))
        data = await _fetch(url, media_io, fetch_timeout)
        return await asyncio.get_running_loop().run_in_executor(None, media_io.load_bytes, data)

    def load_from_url(self, url: str, media_io: Any, *, fetch_timeout: int | None = None) -> Any:
        if not _is_http(url):
            return super().load_from_url(url, media_io, fetch_timeout=fetch_timeout)
        self._assert_url_in_allowed_media_domains(parse_url(url))
        # The synchronous path (vLLM's offline helpers) may run inside an event loop: its own.
        with ThreadPoolExecutor(1) as pool:
            data = pool.submit(asyncio.run, _fetch(url, media_io, fetch_timeout)).result()
        return media_io.load_bytes(data)


def guard_media_fetches() -> None:
    """Make the guarded connector the one vLLM loads by default (idempotent)."""
    MEDIA_CONNECTOR_REGISTRY.register("http")(GuardedMediaConnector)


def _is_http(url: str) -> bool:
    return url.split(":", 1)[0].lower() in ("http", "https")


async def _fetch(url: str, media_io: Any, fetch_timeout: int | None) -> bytes:
    """The media's bytes within vLLM's size limit; a ValueError (the line's 400) otherwise."""
    limits = [n for n in (media_io.get_max_bytes(), vllm_envs.VLLM_MAX_MEDIA_DOWNLOAD_SIZE_MB * MIB) if n and n > 0]
    policy = OutboundPolicy.from_environ()
    timeout = fetch_timeout or DEFAULT_TIMEOUT_S
    try:
        return await download(url, policy, limit=min(limits, default=256 * MIB), timeout=timeout)
    except (TimeoutError, httpx.TimeoutException):  # the whole download's deadline, or one read's
        raise ValueError(f"Fetching the media URL timed out after {timeout:g} s.") from None
    except OutboundRefused as exc:
        raise ValueError(f"The media URL: {exc}") from None
    except DownloadRefused as exc:
        raise ValueError(f"Fetching the media URL failed: {exc}.") from None
    except httpx.HTTPError as exc:  # its kind only: its text may name an address the host resolved to
        raise ValueError(f"Could not fetch the media URL ({type(exc).__name__}).") from None
