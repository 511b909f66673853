"""Several projects sharing one batchd cluster (replicas over one database and blob store) in
front of the fake upstream fleet, and what the fleet's request log says about who got what:
shares per time window, how busy the fleet was, each batch's last line. Used by the fair-share
tests (tests/e2e/test_fair_share.py) and benchmark W6 (bench/workloads/w6/).

Each line carries its project and batch name in the body's `user` field ("team-a/b3"), which
the fleet logs with each request's start (when it left the fleet's queue), finish and priority.
Each model has a fleet of its own (its own slots), as models on separate vLLM servers do; the
fleets serve their queues lowest priority first (harness/fake_upstream.py)."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import NamedTuple

import openai

from harness.client import openai_client
from harness.fake_fleet import FakeFleet, upstream_config
from harness.server import BATCHD, ServerProcess

MODEL = "fleet-model"


class Request(NamedTuple):
    """One request as the fleet logged it."""

    started: float  # left the fleet's queue (wall clock)
    finished: float
    tag: str  # "project/batch"
    priority: int  # the priority it was queued at (0 without one)


def key_of(project: str) -> str:
    return f"key-{project}"


def lines(tag: str, count: int, model: str = MODEL) -> bytes:
    """`count` chat lines for `model` whose requests the fleet logs under `tag` ("project/batch")."""
    return b"".join(
        json.dumps(
            {
                "custom_id": f"{tag}-{i}",
                "method": "POST",
                "url": "/v1/chat/completions",
                "body": {"model": model, "messages": [{"role": "user", "content": f"q{i}"}], "user": tag},
            }
        ).encode()
        + b"\n"
        for i in range(count)
    )


class TenancyCluster:
    """For each of `models`, a fake fleet of `urls` x `per_url` slots, each request taking
    `delay_ms`; and `replicas` batchd servers in front of them that know API keys
    `key-<project>` for `projects`. With `priority`, the models' upstream blocks say
    ``priority: true`` (the fleet is started with --scheduling-policy priority), so batchd sends
    each line's priority. `upstream_max_concurrency`: the blocks' ``max_concurrency`` per URL
    (default: the fleet's slots); above the slots, lines queue at the fleet, where priority
    orders them, as docs/priority.md recommends for a fleet that schedules by priority. With
    `held`, the fleets serve nothing until `release()` (lines queue at them and in batchd), so a
    scenario can have every batch exist before the first line is answered."""

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
        models: Sequence[str] = (MODEL,),
        priority: bool = False,
        upstream_max_concurrency: int | None = None,
        held: bool = False,
    ) -> None:
        self.work = work
        self.held = held
        self.database_url = database_url
        self.capacity_slots = urls * per_url  # per model
        self.capacity = self.capacity_slots * 1000 / delay_ms  # lines/s per model
        self.fleets = {
            model: FakeFleet(work, count=urls, model=model, delay_ms=delay_ms, max_concurrency=per_url, held=held)
            for model in models
        }
        self.fleet = self.fleets[models[0]]
        blocks = {
            model: {
                "urls": fleet.urls,
                "model": model,
                "max_concurrency": upstream_max_concurrency or per_url,
                "timeout_s": 60,
            }
            | ({"priority": True} if priority else {})
            for model, fleet in self.fleets.items()
        }
        config = upstream_config(work / "fleet.json", blocks)
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
        for fleet in self.fleets.values():
            fleet.start()
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
        for fleet in self.fleets.values():
            fleet.kill()

    def release(self) -> None:
        """Let every model's fleet serve (a `held` cluster's fleets queue all until then)."""
        for fleet in self.fleets.values():
            fleet.release()

    def client(self, project: str, replica: int = 0) -> openai.OpenAI:
        """`project`'s client of replica number `replica` (modulo the replicas: a scenario
        written for two runs on one)."""
        server = self.servers[replica % len(self.servers)]
        return openai_client(server.base_url, key_of(project), max_retries=2)

    def set_weight(self, project: str, weight: int) -> None:
        set_weight(self.database_url, self.work, project, weight)

    def set_weights(self, weights: dict[str, int]) -> None:
        set_weights(self.database_url, self.work, weights)

    def upload(self, project: str, name: str, count: int, replica: int = 0, model: str = MODEL) -> str:
        client = self.client(project, replica)
        body = lines(f"{project}/{name}", count, model)
        return client.files.create(file=(f"{name}.jsonl", body), purpose="batch").id

    def create(self, project: str, file_id: str, window: str = "24h", replica: int = 0):
        return self.client(project, replica).batches.create(
            input_file_id=file_id,
            endpoint="/v1/chat/completions",
            completion_window=window,  # type: ignore[arg-type]  # batchd also takes its own windows
        )

    def log(self, model: str | None = None) -> list[Request]:
        """The request log of `model`'s fleet (the first model's by default)."""
        fleet = self.fleets[model] if model else self.fleet
        return [Request(*entry) for entry in fleet.request_log()]


def set_weight(database_url: str, work: Path, project: str, weight: int) -> None:
    """`batchd projects set PROJECT --weight N`, as an admin would (replicas see it within
    their weight cache's 3 s)."""
    subprocess.run(
        [str(BATCHD), "projects", "set", project, "--weight", str(weight)]
        + ["--database-url", database_url, "--data-dir", str(work / "cli")],
        check=True,
        capture_output=True,
        timeout=120,
        cwd=work,
    )


# `batchd projects set` once a project, in one interpreter: ten `batchd` processes cost ten
# interpreter starts and app imports (17 s on a loaded 2-core host), this one.
_SET_EACH = "import json, sys; from app.cli import main; sys.exit(max(main(a) for a in json.loads(sys.argv[1])))"


def set_weights(database_url: str, work: Path, weights: dict[str, int]) -> None:
    """`batchd projects set PROJECT --weight N` for each of `weights`, as an admin would (the
    CLI's own entry point, one process for all)."""
    tail = ["--database-url", database_url, "--data-dir", str(work / "cli")]
    commands = [["projects", "set", p, "--weight", str(w), *tail] for p, w in weights.items()]
    if commands:
        subprocess.run(
            [sys.executable, "-c", _SET_EACH, json.dumps(commands)],
            check=True,
            capture_output=True,
            timeout=120,
            cwd=work,
        )


def project_of(tag: str) -> str:
    return tag.split("/", 1)[0]


def shares(log: Iterable[Request], start: float, end: float) -> dict[str, float]:
    """Each project's fraction of the requests that finished in [start, end)."""
    counts = Counter(project_of(r.tag) for r in log if start <= r.finished < end)
    total = sum(counts.values())
    return {project: n / total for project, n in sorted(counts.items())} if total else {}


def busy_fraction(log: Iterable[Request], slots: int, start: float, end: float) -> float:
    """Slot-seconds the fleet's requests held in [start, end) over all it had."""
    held = sum(max(0.0, min(r.finished, end) - max(r.started, start)) for r in log)
    return held / (slots * (end - start)) if end > start else 0.0


def in_flight(log: Iterable[Request], at: float, project: str | None = None) -> int:
    return sum(1 for r in log if r.started <= at < r.finished and project in (None, project_of(r.tag)))


def span(log: Iterable[Request], tag_prefix: str) -> tuple[float, float]:
    """When the fleet started the first and finished the last request whose tag starts so."""
    mine = [r for r in log if r.tag.startswith(tag_prefix)]
    return min(r.started for r in mine), max(r.finished for r in mine)
