"""Several projects sharing one batchd cluster (replicas over one database and blob store) in
front of the fake upstream fleet, and what the fleet's request log says about who got what:
shares per time window, how busy the fleet was, each batch's last line. Used by the fair-share
tests (tests/e2e/test_fair_share.py) and benchmark W6 (bench/w6_tenancy.py).

Each line carries its project and batch name in the body's `user` field ("team-a/b3"), which
the fleet logs with each request's start and finish."""

from __future__ import annotations

import json
import subprocess
import threading
from collections import Counter
from collections.abc import Iterable
from pathlib import Path

import openai

from harness.client import openai_client
from harness.fake_fleet import FakeFleet, upstream_config
from harness.server import BATCHD, ServerProcess

MODEL = "fleet-model"
Request = tuple[float, float, str]  # started, finished, "project/batch"


def key_of(project: str) -> str:
    return f"key-{project}"


def lines(tag: str, count: int) -> bytes:
    """`count` chat lines whose requests the fleet logs under `tag` ("project/batch")."""
    return b"".join(
        json.dumps(
            {
                "custom_id": f"{tag}-{i}",
                "method": "POST",
                "url": "/v1/chat/completions",
                "body": {"model": MODEL, "messages": [{"role": "user", "content": f"q{i}"}], "user": tag},
            }
        ).encode()
        + b"\n"
        for i in range(count)
    )


class TenancyCluster:
    """A fake fleet of `urls` x `per_url` slots, each request taking `delay_ms`, and `replicas`
    batchd servers in front of it that know API keys `key-<project>` for `projects`."""

    def __init__(
        self,
        work: Path,
        database_url: str,
        projects: Iterable[str],
        storage_env: dict[str, str],
        replicas: int = 2,
        urls: int = 2,
        per_url: int = 8,
        delay_ms: float = 100,
        env: dict[str, str] | None = None,
    ) -> None:
        self.work = work
        self.database_url = database_url
        self.capacity_slots = urls * per_url
        self.capacity = self.capacity_slots * 1000 / delay_ms  # lines/s
        self.fleet = FakeFleet(work, count=urls, delay_ms=delay_ms, max_concurrency=per_url)
        config = upstream_config(
            work / "fleet.json",
            {MODEL: {"urls": self.fleet.urls, "model": self.fleet.model, "max_concurrency": per_url, "timeout_s": 60}},
        )
        keys = ",".join(f"{key_of(p)}={p}" for p in projects)
        self.servers = [
            ServerProcess(
                work / f"replica-{i}",
                database_url,
                env={"BATCHD_API_KEYS": keys, "BATCHD_REPLICA_ID": f"replica-{i}", **storage_env, **(env or {})},
                models=True,
                args=["--config", str(config)],
            )
            for i in range(replicas)
        ]

    def start(self) -> TenancyCluster:
        self.fleet.start()
        for server in self.servers:
            server.data_dir.mkdir(parents=True, exist_ok=True)
        threads = [threading.Thread(target=server.start) for server in self.servers]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        down = [s.base_url for s in self.servers if s.proc is None or s.proc.poll() is not None]
        if down:
            self.stop()
            raise RuntimeError(f"replicas failed to start: {down}")
        return self

    def stop(self) -> None:
        for server in self.servers:
            server.kill()
        self.fleet.kill()

    def client(self, project: str, replica: int = 0) -> openai.OpenAI:
        return openai_client(self.servers[replica].base_url, key_of(project), max_retries=2)

    def set_weight(self, project: str, weight: int) -> None:
        subprocess.run(
            [str(BATCHD), "projects", "set", project, "--weight", str(weight)]
            + ["--database-url", self.database_url, "--data-dir", str(self.work / "cli")],
            check=True,
            capture_output=True,
            timeout=120,
            cwd=self.work,
        )

    def upload(self, project: str, name: str, count: int, replica: int = 0) -> str:
        client = self.client(project, replica)
        return client.files.create(file=(f"{name}.jsonl", lines(f"{project}/{name}", count)), purpose="batch").id

    def create(self, project: str, file_id: str, window: str = "24h", replica: int = 0):
        return self.client(project, replica).batches.create(
            input_file_id=file_id, endpoint="/v1/chat/completions", completion_window=window
        )

    def log(self) -> list[Request]:
        return self.fleet.request_log()


def project_of(tag: str) -> str:
    return tag.split("/", 1)[0]


def shares(log: Iterable[Request], start: float, end: float) -> dict[str, float]:
    """Each project's fraction of the requests that finished in [start, end)."""
    counts = Counter(project_of(tag) for _, finished, tag in log if start <= finished < end)
    total = sum(counts.values())
    return {project: n / total for project, n in sorted(counts.items())} if total else {}


def busy_fraction(log: Iterable[Request], slots: int, start: float, end: float) -> float:
    """Slot-seconds the fleet's requests held in [start, end) over all it had."""
    held = sum(max(0.0, min(finished, end) - max(started, start)) for started, finished, _ in log)
    return held / (slots * (end - start)) if end > start else 0.0


def in_flight(log: Iterable[Request], at: float, project: str | None = None) -> int:
    return sum(1 for started, finished, tag in log if started <= at < finished and project in (None, project_of(tag)))


def span(log: Iterable[Request], tag_prefix: str) -> tuple[float, float]:
    """When the fleet started the first and finished the last request whose tag starts so."""
    mine = [(started, finished) for started, finished, tag in log if tag.startswith(tag_prefix)]
    return min(s for s, _ in mine), max(f for _, f in mine)
