"""Which lines of an ended batch a retry runs again, and the new input file of exactly those
lines (byte for byte as the original input had them). A line is retried when it did not
succeed: it is in the error file (a failed request, or one cancelled, expired or timed out), or
the batch never ran (it failed validation, or was cancelled or expired before it started)."""

from __future__ import annotations

from collections.abc import Collection

from app.core.line_errors import LineErrorCode
from app.core.statuses import BatchStatus
from app.db.models import Batch
from app.pipeline.jsonl import split_lines
from app.pipeline.lines import ResultLine, custom_id_of
from app.storage.base import BlobStore, BlobWriter

# The code every line of a batch that ended before it ran carries (as its error lines would).
_NEVER_RAN_CODE = {
    BatchStatus.CANCELLED: LineErrorCode.BATCH_CANCELLED,
    BatchStatus.EXPIRED: LineErrorCode.BATCH_EXPIRED,
}


def never_ran_codes(batch: Batch) -> set[str]:
    """The error codes of the lines of a batch that never ran: its validation errors' codes when
    it failed, batch_cancelled or batch_expired otherwise."""
    if batch.status == BatchStatus.FAILED:
        return {str(error.get("code")) for error in batch.errors or [] if error.get("code") is not None}
    return {_NEVER_RAN_CODE[batch.status]} if batch.status in _NEVER_RAN_CODE else set()


async def failed_custom_ids(
    store: BlobStore, project: str, error_file_id: str, codes: Collection[str] | None
) -> set[str]:
    """The custom_ids of the error file's lines (only those whose code is one of `codes`, if given)."""
    wanted: set[str] = set()
    async for _, raw in split_lines(store.read(project, error_file_id)):
        if not raw.strip():
            continue
        line = ResultLine.read(raw)
        if codes is None or line.code in codes:
            wanted.add(str(line.custom_id))
    return wanted


async def copy_lines(
    store: BlobStore, project: str, input_file_id: str, writer: BlobWriter, custom_ids: set[str] | None
) -> int:
    """Write the input lines whose custom_id is in `custom_ids` (every non-blank one if None) to
    `writer`; returns how many."""
    copied = 0
    async for _, raw in split_lines(store.read(project, input_file_id)):
        if not raw.strip():
            continue
        if custom_ids is not None and str(custom_id_of(raw)) not in custom_ids:
            continue
        writer.write(bytes(raw) + b"\n")
        await writer.drain()
        copied += 1
    return copied
