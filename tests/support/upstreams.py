"""Upstreams for tests: the paced fake fleet (harness/fake_fleet.py); real `vllm serve`
processes are harness/vllm_serve.py's."""

from __future__ import annotations

from pathlib import Path

from harness.fake_fleet import FakeFleet, upstream_config


def paced_fleet(log_dir: Path, served_name: str) -> tuple[FakeFleet, Path]:
    """A started fake upstream at about 200 lines/s (40 ms a request, 8 at once, and batchd
    sends at most 8), slow enough to kill batchd mid-batch, and the config serving it as
    `served_name`."""
    fleet = FakeFleet(log_dir, delay_ms=40, max_concurrency=8).start()
    config = upstream_config(
        log_dir / "models.json", {served_name: {"urls": fleet.urls, "model": fleet.model, "max_concurrency": 8}}
    )
    return fleet, config
