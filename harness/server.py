"""A real `batchd serve` subprocess on a free port, the way users run it."""

from __future__ import annotations

import os
import sys
from functools import cached_property
from pathlib import Path
from typing import Protocol

import httpx
import openai

from harness.client import openai_client, tls_context
from harness.ports import free_port
from harness.process import ManagedProcess, wait_http_ok

BATCHD = Path(sys.executable).with_name("batchd")


class BlobLocation(Protocol):
    """Where a server keeps its blobs when not in its data dir (tests/support/s3.py's S3Location)."""

    def env(self) -> dict[str, str]: ...


class ServerProcess:
    """A batchd server on a free port; `stop()` sends SIGTERM, `kill()` SIGKILL. Its process
    group (vLLM's engine processes with it) goes either way, and with the process that started
    it (harness/watchdog.py)."""

    def __init__(
        self,
        data_dir: Path,
        database_url: str | None = None,
        env: dict[str, str] | None = None,
        args: list[str] | None = None,
        models: bool = False,
        s3: BlobLocation | None = None,
        *,
        session: bool = True,
        niceness: int = 0,
        log_path: Path | None = None,
    ) -> None:
        self.data_dir = data_dir
        self.database_url = database_url
        self.s3 = s3
        self.env = {**(s3.env() if s3 is not None else {}), **(env or {})}
        # Without engines a server starts in about a second; the Files API needs none.
        self.args = (args or []) + ([] if models else ["--no-models"])
        self.port = free_port()
        self.log_path = log_path or data_dir.parent / f"{data_dir.name}-server-{self.port}.log"
        cmd = [str(BATCHD), "serve", "--port", str(self.port), "--data-dir", str(data_dir)]
        if database_url:
            cmd += ["--database-url", database_url]
        self.process = ManagedProcess(
            cmd + self.args,
            self.log_path,
            env={**os.environ, "BATCHD_LOG_LEVEL": "warning", **self.env},
            session=session,
            niceness=niceness,
        )

    @cached_property
    def http(self) -> httpx.Client:
        """A plain HTTP client: `server.http.get(url)` reads the same for an app run in process
        (tests/support/app_server.py)."""
        return httpx.Client(timeout=30, verify=tls_context())

    def client(self, api_key: str, **options) -> openai.OpenAI:
        """An `openai` client of this server (harness/client.py's `openai_client`)."""
        return openai_client(self.base_url, api_key, **options)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def proc(self):
        return self.process.proc

    @property
    def pid(self) -> int:
        return self.process.pid

    def launch(self) -> ServerProcess:
        """Start it without waiting for it to be healthy (see `wait_healthy`)."""
        self.process.start()
        return self

    def wait_healthy(self, timeout: float = 300) -> ServerProcess:
        try:
            wait_http_ok(f"http://127.0.0.1:{self.port}/health", self.process, timeout, "batchd")
        except TimeoutError:
            self.kill()
            raise
        return self

    def start(self, timeout: float = 300) -> ServerProcess:
        return self.launch().wait_healthy(timeout)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def stop(self, timeout: float = 60) -> None:
        self.process.stop(timeout)

    def kill(self) -> None:
        self.process.kill()
