"""The fake upstream fleet (harness/fake_upstream.py) as a child process on free ports, and the
`--config` file that points batchd at upstreams."""

from __future__ import annotations

import json
import signal
import sys
from pathlib import Path

import httpx

from harness.client import tls_context
from harness.ports import free_port
from harness.process import ManagedProcess, wait_http_ok

ROOT = Path(__file__).resolve().parents[1]


class FakeFleet:
    """One fake-upstream process serving ``count`` ports (or the given ones)."""

    def __init__(
        self,
        log_dir: Path,
        count: int = 1,
        ports: list[int] | None = None,
        model: str = "fake-model",
        delay_ms: float = 0.0,
        max_concurrency: int = 1_000_000,
        record_priority: bool = False,
        reject_priority: bool = False,
        tokenize_failures: int | None = None,
        loras: list[str] | None = None,
        held: bool = False,
    ) -> None:
        self.ports = ports or [free_port() for _ in range(count)]
        self.model = model
        self.cpu_file = log_dir / f"fake-upstream-{self.ports[0]}.cpu.json"
        cmd = [
            sys.executable,
            "-m",
            "harness.fake_upstream",
            "--model",
            model,
            "--delay-ms",
            str(delay_ms),
            "--max-concurrency",
            str(max_concurrency),
            "--cpu-file",
            str(self.cpu_file),
        ]
        cmd += ["--record-priority"] if record_priority else []
        cmd += ["--reject-priority"] if reject_priority else []
        cmd += ["--tokenize-failures", str(tokenize_failures)] if tokenize_failures is not None else []
        cmd += ["--held"] if held else []  # serve nothing until release()
        for name in loras or []:  # LoRA adapters listed with `parent` = model, and answered
            cmd += ["--lora", name]
        for port in self.ports:
            cmd += ["--port", str(port)]
        self.process = ManagedProcess(cmd, log_dir / f"fake-upstream-{self.ports[0]}.log", cwd=ROOT)

    @property
    def urls(self) -> list[str]:
        return [f"http://127.0.0.1:{port}/v1" for port in self.ports]

    def start(self) -> FakeFleet:
        self.process.start()
        try:
            for url in self.urls:
                wait_http_ok(f"{url}/models", self.process, 30, "the fake upstream")
        except (RuntimeError, TimeoutError):
            self.process.kill()
            raise
        return self

    def _get(self, path: str, port: int | None = None, timeout: float = 5) -> httpx.Response:
        """A GET of the fleet's control route `path` (every port is one process: the first's by default)."""
        return httpx.get(f"http://127.0.0.1:{port or self.ports[0]}{path}", timeout=timeout, verify=tls_context())

    def stats(self, port: int | None = None) -> dict:
        return self._get("/_stats", port).json()

    def priorities(self) -> dict[str, int | None]:
        """The last message of each chat request received -> its ``priority`` (--record-priority)."""
        return self._get("/_priorities").json()

    def request_log(self) -> list[tuple[float, float, str, int]]:
        """Every request the fleet answered, all ports: (started: when it left the port's queue,
        finished, the body's `user`, the priority it was queued at)."""
        return [tuple(entry) for entry in self._get("/_log", timeout=30).json()]

    def release(self) -> None:
        """Start serving (a fleet created `held` queues every request until then)."""
        self._get("/_release").raise_for_status()

    def stats_reset(self) -> None:
        """Zero the counters and the first/last request times (every port: one process)."""
        self._get("/_stats/reset").raise_for_status()

    def kill(self) -> None:
        self.process.kill()

    def stop(self) -> dict:
        """SIGTERM; returns the CPU the process used (``cpu_s``) and requests it served."""
        self.process.stop(30, signal.SIGTERM)
        try:
            return json.loads(self.cpu_file.read_text())
        except (OSError, ValueError):
            return {}


def upstream_config(path: Path, models: dict[str, dict]) -> Path:
    """Write a `--config` file whose models are upstream blocks ({name: upstream options})."""
    path.write_text(json.dumps({"models": {name: {"upstream": block} for name, block in models.items()}}))
    return path
