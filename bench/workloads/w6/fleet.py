"""The clusters W6 runs on: batchd replicas on one Postgres and one blob directory in front of
fake upstream fleets, one per model, that serve their waiting queues by priority."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from harness import postgres
from harness.poll import wait_for_batch, wait_until
from harness.tenancy import TenancyCluster

URLS, PER_URL, DELAY_MS = 2, 8, 50  # per model: 16 slots, 320 lines/s
SECOND_MODEL = "fleet-model-2"
SURPLUS_ENV = "BATCHD_UPSTREAM_WINDOW_SURPLUS"  # batchd's upstream window over the fleet's slots


@contextmanager
def running_cluster(work: Path, projects: list[str], **options) -> Iterator[TenancyCluster]:
    """A started cluster on a fresh Postgres database, dropped when it stops."""
    work.mkdir(parents=True, exist_ok=True)
    database = postgres.create_database()
    cluster = TenancyCluster(
        work,
        database,
        projects,
        {"BATCHD_STORAGE_URL": str(work / "blobs")},
        urls=URLS,
        per_url=PER_URL,
        delay_ms=DELAY_MS,
        **options,
    )
    try:
        yield cluster.start()
    finally:
        cluster.stop()
        postgres.drop_database(database)


def started(cluster: TenancyCluster, prefix: str) -> None:
    """Wait until the fleet has served a line of a batch tagged ``prefix``."""
    wait_until(lambda: any(r.tag.startswith(prefix) for r in cluster.log()), timeout=120, what=prefix)


def complete(cluster: TenancyCluster, project: str, batch_id: str):
    """Wait for the batch to end; it must have completed."""
    batch = wait_for_batch(cluster.client(project), batch_id, timeout=3600, interval=0.05)
    assert batch.status == "completed", batch
    return batch
