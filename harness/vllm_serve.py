"""A real `vllm serve` (its OpenAI API server module) as a child process on a free port."""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Sequence
from pathlib import Path

from harness.ports import free_port
from harness.process import ManagedProcess, wait_http_ok


class VllmServer:
    """`vllm serve` of `model_path` as `served_name`, CPU, eager, float32, and `extra` flags
    (e.g. ``--max-num-seqs 8 --scheduling-policy priority``) and `env` additions, offline, in a process group of its
    own that dies with the process that started it (harness/watchdog.py)."""

    def __init__(
        self,
        log_dir: Path,
        model_path: str | Path,
        served_name: str,
        extra: Sequence[str] = (),
        env: dict[str, str] | None = None,
    ) -> None:
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
            str(model_path),
            "--served-model-name",
            served_name,
            "--enforce-eager",
            "--dtype",
            "float32",
            *extra,
        ]
        env = {
            **os.environ,
            "VLLM_CPU_KVCACHE_SPACE": "1",
            "HF_HUB_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1",
            **(env or {}),
        }
        self.process = ManagedProcess(cmd, log_dir / f"vllm-{served_name}-{self.port}.log", env=env)

    @property
    def root_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def url(self) -> str:
        return f"{self.root_url}/v1"

    @property
    def proc(self):
        return self.process.proc

    def launch(self) -> VllmServer:
        """Start it without waiting for it to answer (see `wait`)."""
        self.process.start()
        return self

    def wait(self, timeout: float = 400) -> VllmServer:
        wait_http_ok(f"{self.root_url}/health", self.process, timeout, "vllm serve")
        return self

    def start(self, timeout: float = 400) -> VllmServer:
        return self.launch().wait(timeout)

    def stop(self) -> None:
        """SIGTERM to the group, 30 s of grace, then SIGKILL to whatever is left of it."""
        self.process.stop(30, signal.SIGTERM, group=True)
