"""Upstreams for tests: the paced fake fleet (harness/fake_fleet.py) and real `vllm serve`
processes on free ports."""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

from harness.fake_fleet import FakeFleet, upstream_config
from harness.ports import free_port
from harness.process import ManagedProcess, wait_http_ok


def paced_fleet(log_dir: Path, served_name: str) -> tuple[FakeFleet, Path]:
    """A started fake upstream at about 200 lines/s (40 ms a request, 8 at once, and batchd
    sends at most 8), slow enough to kill batchd mid-batch, and the config serving it as
    `served_name`."""
    fleet = FakeFleet(log_dir, delay_ms=40, max_concurrency=8).start()
    config = upstream_config(
        log_dir / "models.json", {served_name: {"urls": fleet.urls, "model": fleet.model, "max_concurrency": 8}}
    )
    return fleet, config


class VllmServer:
    """A real `vllm serve` (its OpenAI API server module) on a free port, CPU, eager, in a
    process group of its own that dies with the session (harness/watchdog.py)."""

    def __init__(self, log_dir: Path, model_path: str, served_name: str, extra: list[str] = ()) -> None:
        self.port = free_port()
        cmd = [
            sys.executable,
            "-m",
            "vllm.entrypoints.openai.api_server",
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--model",
            model_path,
            "--served-model-name",
            served_name,
            "--enforce-eager",
            "--dtype",
            "float32",
            *extra,
        ]
        env = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": "1", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
        self.process = ManagedProcess(cmd, log_dir / f"vllm-{served_name}-{self.port}.log", env=env)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def proc(self):
        return self.process.proc

    def launch(self) -> VllmServer:
        self.process.start()
        return self

    def wait(self, timeout: float = 400) -> VllmServer:
        wait_http_ok(f"http://127.0.0.1:{self.port}/health", self.process, timeout, "vllm serve")
        return self

    def stop(self) -> None:
        """SIGTERM to the group, 30 s of grace, then SIGKILL to whatever is left of it."""
        self.process.stop(30, signal.SIGTERM, group=True)
