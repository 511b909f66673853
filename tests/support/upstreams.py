"""Upstream servers for tests: the fake fleet (:mod:`tests.support.fake_upstream`) and real
`vllm serve` processes, each on free ports, and the config that points batchd at them."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx

from tests.support.server import free_port


def wait_healthy(url: str, proc: subprocess.Popen, log_path: Path, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{url} exited with {proc.returncode}:\n{log_path.read_text(errors='replace')[-5000:]}")
        try:
            if httpx.get(url, timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise TimeoutError(f"{url} did not come up:\n{log_path.read_text(errors='replace')[-5000:]}")


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
    ) -> None:
        self.ports = ports or [free_port() for _ in range(count)]
        self.model = model
        self.delay_ms, self.max_concurrency = delay_ms, max_concurrency
        self.log_path = log_dir / f"fake-upstream-{self.ports[0]}.log"
        self.cpu_file = log_dir / f"fake-upstream-{self.ports[0]}.cpu.json"
        self.proc: subprocess.Popen | None = None

    @property
    def urls(self) -> list[str]:
        return [f"http://127.0.0.1:{port}/v1" for port in self.ports]

    def start(self) -> FakeFleet:
        cmd = [
            sys.executable,
            "-m",
            "tests.support.fake_upstream",
            "--model",
            self.model,
            "--delay-ms",
            str(self.delay_ms),
            "--max-concurrency",
            str(self.max_concurrency),
            "--cpu-file",
            str(self.cpu_file),
        ]
        for port in self.ports:
            cmd += ["--port", str(port)]
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                cmd, stdout=log, stderr=subprocess.STDOUT, cwd=Path(__file__).resolve().parents[2]
            )
        for url in self.urls:
            wait_healthy(f"{url}/models", self.proc, self.log_path, 30)
        return self

    def stats(self, port: int | None = None) -> dict:
        return httpx.get(f"http://127.0.0.1:{port or self.ports[0]}/_stats", timeout=5).json()

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def stop(self) -> dict:
        """SIGTERM; returns the CPU the process used (``cpu_s``) and requests it served."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(30)
        try:
            return json.loads(self.cpu_file.read_text())
        except (OSError, ValueError):
            return {}


def upstream_config(path: Path, models: dict[str, dict]) -> Path:
    """Write a `--config` file whose models are upstream blocks ({name: upstream options})."""
    path.write_text(json.dumps({"models": {name: {"upstream": block} for name, block in models.items()}}))
    return path


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
    """A real `vllm serve` (its OpenAI API server module) on a free port, CPU, eager."""

    def __init__(self, log_dir: Path, model_path: str, served_name: str, extra: list[str] = ()) -> None:
        self.port = free_port()
        self.log_path = log_dir / f"vllm-{served_name}-{self.port}.log"
        self.cmd = [
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
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def launch(self) -> VllmServer:
        env = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": "1", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                self.cmd, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True
            )
        return self

    def wait(self, timeout: float = 400) -> VllmServer:
        assert self.proc is not None
        wait_healthy(f"http://127.0.0.1:{self.port}/health", self.proc, self.log_path, timeout)
        return self

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
