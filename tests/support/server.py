"""Run a real `batchd serve` subprocess for tests, the way users run it."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

BATCHD = Path(sys.executable).with_name("batchd")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class ServerProcess:
    """A batchd server on a free port; `stop()` sends SIGTERM, `kill()` SIGKILL."""

    def __init__(
        self,
        data_dir: Path,
        database_url: str | None = None,
        env: dict[str, str] | None = None,
        args: list[str] | None = None,
        models: bool = False,
        s3=None,
    ) -> None:
        self.data_dir = data_dir
        self.database_url = database_url
        # An S3Location (tests/support/s3.py) when the blobs go to a bucket, else None (local).
        self.s3 = s3
        self.env = {**(s3.env() if s3 is not None else {}), **(env or {})}
        # Without engines a server starts in about a second; the Files API needs none.
        self.args = (args or []) + ([] if models else ["--no-models"])
        self.port = free_port()
        self.proc: subprocess.Popen | None = None
        self.log_path = data_dir.parent / f"{data_dir.name}-server-{self.port}.log"

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def start(self, timeout: float = 300) -> ServerProcess:
        cmd = [str(BATCHD), "serve", "--port", str(self.port), "--data-dir", str(self.data_dir)]
        if self.database_url:
            cmd += ["--database-url", self.database_url]
        env = {**os.environ, "BATCHD_LOG_LEVEL": "warning", **self.env}
        self._log = open(self.log_path, "ab")  # noqa: SIM115 - closed in stop()
        # Its own process group: a kill takes vLLM's engine processes down with the server, as
        # a service manager killing the unit would.
        self.proc = subprocess.Popen(
            cmd + self.args, env=env, stdout=self._log, stderr=subprocess.STDOUT, start_new_session=True
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"batchd exited with {self.proc.returncode}:\n{self.log()}")
            try:
                if httpx.get(f"http://127.0.0.1:{self.port}/health", timeout=2).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        self.kill()
        raise TimeoutError(f"batchd did not become healthy:\n{self.log()}")

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def _wait(self, sig: int, timeout: float) -> None:
        if self.proc is None:
            return
        if self.proc.poll() is None:
            (os.killpg if sig == signal.SIGKILL else os.kill)(self.proc.pid, sig)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                pass
        # Whatever the server left behind in its group (engine processes) goes too.
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()

    def stop(self, timeout: float = 60) -> None:
        self._wait(signal.SIGTERM, timeout)
        self._log.close()

    def kill(self) -> None:
        self._wait(signal.SIGKILL, 30)
        self._log.close()
