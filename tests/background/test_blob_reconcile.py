"""The orphan-blob pass (app/background/blob_reconcile.py) on each backend's database: a running
batch's ordered copy and the copy's positions (an `output_order: "input"` batch's) stay; a copy's
positions whose batch no longer names the copy go, as any blob no row names."""

from __future__ import annotations

from app.background.blob_reconcile import remove_orphan_blobs
from app.core.statuses import BatchStatus
from app.db.engine import Database
from app.pipeline.input_order import positions_id
from app.storage.local import LocalBlobStore
from tests.background.support import add_batch, add_blob
from tests.support.database import run_on_database
from tests.worker.support import PROJECT


def test_a_running_batch_s_copy_and_its_positions_stay(db_url, tmp_path):
    async def scenario(db: Database) -> None:
        store = LocalBlobStore(tmp_path / "blobs")
        await add_batch(
            db,
            "batch-run",
            BatchStatus.IN_PROGRESS,
            in_progress_at=1,
            output_order="input",
            ordered_input="ordered-run",
        )
        for blob_id in ("ordered-run", positions_id("ordered-run"), positions_id("ordered-ended"), "stray"):
            await add_blob(store, blob_id)
        assert await remove_orphan_blobs(db, store, 0) == 2
        assert await store.exists(PROJECT, "ordered-run") and await store.exists(PROJECT, positions_id("ordered-run"))
        assert not await store.exists(PROJECT, positions_id("ordered-ended"))
        assert not await store.exists(PROJECT, "stray")

    run_on_database(db_url, scenario)
