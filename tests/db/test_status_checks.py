"""Every status column takes exactly its enum's values (app/core/statuses.py), on both databases:
each value is accepted, anything else is refused by the CHECK constraint that migration 0007
adds; its downgrade removes the constraints and a second upgrade puts them back."""

from __future__ import annotations

import asyncio
from enum import StrEnum

import pytest
from alembic import command
from sqlalchemy import text
from sqlalchemy.exc import IntegrityError

from app.core.statuses import BatchStatus, ShardStatus, UploadStatus, WebhookDeliveryStatus, WebhookEndpointStatus
from app.db.engine import Database
from app.db.migrate import alembic_config, upgrade_sync
from app.db.models import Batch, BatchShard, Upload, WebhookDelivery, WebhookEndpoint, WebhookEvent

STATUS_ENUMS: dict[str, type[StrEnum]] = {
    "batches": BatchStatus,
    "batch_shards": ShardStatus,
    "uploads": UploadStatus,
    "webhook_endpoints": WebhookEndpointStatus,
    "webhook_deliveries": WebhookDeliveryStatus,
}
UNKNOWN = "paused"


async def _seed(url: str) -> None:
    """One row in every table with a status column."""
    db = Database(url)
    try:
        async with db.write() as session:
            session.add_all(
                [
                    Batch(
                        id="batch_1",
                        project="p",
                        endpoint="/v1/chat/completions",
                        input_file_id="file-1",
                        completion_window="24h",
                        status=BatchStatus.VALIDATING,
                        created_at=0,
                        expires_at=2**40,
                    ),
                    Upload(
                        id="upload_1",
                        project="p",
                        filename="in.jsonl",
                        purpose="batch",
                        mime_type="application/jsonl",
                        bytes=1,
                        status=UploadStatus.PENDING,
                        created_at=0,
                        expires_at=2**40,
                    ),
                    WebhookEndpoint(
                        id="we_1",
                        project="p",
                        name="hook",
                        url="https://example.com/hook",
                        event_types=["batch.completed"],
                        secret="whsec_x",
                        status=WebhookEndpointStatus.ENABLED,
                        created_at=0,
                        updated_at=0,
                    ),
                    WebhookEvent(
                        id="evt_1", project="p", type="batch.completed", batch_id="batch_1", body="{}", created_at=0
                    ),
                ]
            )
            await session.flush()
            session.add_all(
                [
                    BatchShard(
                        batch_id="batch_1",
                        shard_no=0,
                        first_line=1,
                        end_line=2,
                        start_offset=0,
                        lines=1,
                        status=ShardStatus.PENDING,
                        fence=0,
                        taken_over=0,
                        lines_done=0,
                    ),
                    WebhookDelivery(
                        event_id="evt_1",
                        endpoint_id="we_1",
                        status=WebhookDeliveryStatus.PENDING,
                        attempts=0,
                        next_attempt_at=0.0,
                        created_at=0,
                    ),
                ]
            )
    finally:
        await db.dispose()


async def _set_status(url: str, table: str, status: str) -> None:
    db = Database(url)
    try:
        async with db.write() as session:
            await session.execute(text(f"UPDATE {table} SET status = :status"), {"status": status})
    finally:
        await db.dispose()


async def _statuses(url: str) -> dict[str, list[str]]:
    db = Database(url)
    try:
        async with db.read() as session:
            return {
                table: [row[0] for row in await session.execute(text(f"SELECT status FROM {table}"))]
                for table in STATUS_ENUMS
            }
    finally:
        await db.dispose()


async def _insert_batch(url: str, status: str) -> None:
    db = Database(url)
    try:
        async with db.write() as session:
            await session.execute(
                text(
                    "INSERT INTO batches (id, project, endpoint, input_file_id, completion_window, status, created_at,"
                    " expires_at, total, completed, failed, input_tokens, cached_tokens, output_tokens,"
                    " reasoning_tokens, fence)"
                    " VALUES ('batch_2', 'p', '/v1/embeddings', 'file-2', '24h', :status, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0)"
                ),
                {"status": status},
            )
    finally:
        await db.dispose()


def _assert_enforced(url: str) -> None:
    for table, enum in STATUS_ENUMS.items():
        for member in enum:
            asyncio.run(_set_status(url, table, member.value))
        with pytest.raises(IntegrityError):
            asyncio.run(_set_status(url, table, UNKNOWN))
        first = next(iter(enum)).value
        asyncio.run(_set_status(url, table, first))
        assert asyncio.run(_statuses(url))[table] == [first]
    with pytest.raises(IntegrityError):
        asyncio.run(_insert_batch(url, UNKNOWN))
    assert asyncio.run(_statuses(url))["batches"] == [BatchStatus.VALIDATING.value]


def test_status_columns_take_only_their_enum_values(database_factory, tmp_path):
    url = database_factory() or f"sqlite+aiosqlite:///{tmp_path / 'batchd.db'}"
    upgrade_sync(url)
    asyncio.run(_seed(url))
    _assert_enforced(url)

    # Down to 0006: the constraints are gone (and the rows kept).
    command.downgrade(alembic_config(url), "0006")
    for table in STATUS_ENUMS:
        asyncio.run(_set_status(url, table, UNKNOWN))
    assert asyncio.run(_statuses(url)) == {table: [UNKNOWN] for table in STATUS_ENUMS}
    for table, enum in STATUS_ENUMS.items():
        asyncio.run(_set_status(url, table, next(iter(enum)).value))

    # Up again: enforced as after the first upgrade.
    upgrade_sync(url)
    _assert_enforced(url)
