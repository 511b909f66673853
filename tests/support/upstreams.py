"""Upstreams for tests: the paced fake fleet (harness/fake_fleet.py), a fake upstream in this
process (`fake_upstream_in_thread`); real `vllm serve` processes are harness/vllm_serve.py's."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from harness.fake_fleet import FakeFleet, upstream_config
from harness.fake_upstream import FakeUpstream
from harness.ports import free_port


def paced_fleet(log_dir: Path, served_name: str) -> tuple[FakeFleet, Path]:
    """A started fake upstream at about 200 lines/s (40 ms a request, 8 at once, and batchd
    sends at most 8), slow enough to kill batchd mid-batch, and the config serving it as
    `served_name`."""
    fleet = FakeFleet(log_dir, delay_ms=40, max_concurrency=8).start()
    config = upstream_config(
        log_dir / "models.json", {served_name: {"urls": fleet.urls, "model": fleet.model, "max_concurrency": 8}}
    )
    return fleet, config


@contextmanager
def fake_upstream_in_thread(fake: FakeUpstream) -> Iterator[str]:
    """Serve `fake` (harness/fake_upstream.py) on a free port from an event loop of its own, in a
    thread: no process to start, and a test can change it as it serves (its `loras`). Yields its
    URL (ending in /v1)."""
    loop = asyncio.new_event_loop()
    loop.set_exception_handler(_quiet_about_cancelled)
    thread = threading.Thread(target=loop.run_forever, name="fake-upstream", daemon=True)
    thread.start()
    port = free_port()
    server = asyncio.run_coroutine_threadsafe(fake.serve(port), loop).result(timeout=10)
    try:
        yield f"http://127.0.0.1:{port}/v1"
    finally:

        async def close() -> None:
            server.close()
            # The connections clients keep alive: their handlers end here, not with the loop.
            handlers = [task for task in asyncio.all_tasks() if task is not asyncio.current_task()]
            for task in handlers:
                task.cancel()
            await asyncio.gather(*handlers, return_exceptions=True)

        asyncio.run_coroutine_threadsafe(close(), loop).result(timeout=10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=10)
        loop.close()


def _quiet_about_cancelled(loop: asyncio.AbstractEventLoop, context: dict) -> None:
    """asyncio (3.11) reports each connection handler cancelled at the end as an error: not one."""
    if not isinstance(context.get("exception"), asyncio.CancelledError):
        loop.default_exception_handler(context)
