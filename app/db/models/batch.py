from __future__ import annotations

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    ColumnElement,
    Float,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    String,
    Text,
    false,
    func,
)
from sqlalchemy.ext.hybrid import hybrid_property
from sqlalchemy.orm import Mapped, mapped_column

from app.core import tracing
from app.core.batch_kinds import BatchApi, BatchKind
from app.core.statuses import BatchStatus, ExportStatus
from app.db.base import Base
from app.db.status_columns import status_check, status_type


class Batch(Base):
    """A batch job and its live counters. The worker owns it through a lease; `fence` grows on
    every claim and every worker write is conditioned on it, so a stale worker cannot write."""

    __tablename__ = "batches"

    seq: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    id: Mapped[str] = mapped_column(String(64), unique=True)
    project: Mapped[str] = mapped_column(String(128))
    endpoint: Mapped[str] = mapped_column(String(64))
    input_file_id: Mapped[str] = mapped_column(String(64))
    completion_window: Mapped[str] = mapped_column(String(16))
    status: Mapped[BatchStatus] = mapped_column(status_type(BatchStatus))
    model: Mapped[str | None] = mapped_column(String(256), nullable=True)
    metadata_: Mapped[dict | None] = mapped_column("metadata", JSON, nullable=True)
    errors: Mapped[list | None] = mapped_column(JSON, nullable=True)
    output_expires_after: Mapped[int | None] = mapped_column(Integer, nullable=True)
    # batchd's: its lines may name different models, each line run on its own (else one model).
    allow_mixed_models: Mapped[bool] = mapped_column(Boolean, server_default=false())
    output_file_id: Mapped[str | None] = mapped_column(String(64), nullable=True)
    error_file_id: Mapped[str | None] = mapped_column(String(64), nullable=True)

    created_at: Mapped[int] = mapped_column(BigInteger)
    expires_at: Mapped[int] = mapped_column(BigInteger)  # the hard expiry: not done by then, it ends `expired`
    # The deadline the scheduler orders work by, when earlier than `expires_at` (a background
    # response's short-deadline lane); None: `expires_at`. Passing it ends nothing.
    due_at: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    in_progress_at: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    finalizing_at: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    completed_at: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    failed_at: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    expired_at: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    cancelling_at: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    cancelled_at: Mapped[int | None] = mapped_column(BigInteger, nullable=True)

    total: Mapped[int] = mapped_column(Integer, default=0)
    completed: Mapped[int] = mapped_column(Integer, default=0)
    failed: Mapped[int] = mapped_column(Integer, default=0)
    input_tokens: Mapped[int] = mapped_column(BigInteger, default=0)
    cached_tokens: Mapped[int] = mapped_column(BigInteger, default=0)
    output_tokens: Mapped[int] = mapped_column(BigInteger, default=0)
    reasoning_tokens: Mapped[int] = mapped_column(BigInteger, default=0)
    # Prompt tokens counted at validation (None: not counted, no token limit applied); they count
    # against the project's enqueued-token limit for the model until the batch ends.
    prompt_tokens: Mapped[int | None] = mapped_column(BigInteger, nullable=True)

    lease_owner: Mapped[str | None] = mapped_column(String(128), nullable=True)
    lease_expires_at: Mapped[float | None] = mapped_column(Float, nullable=True)
    fence: Mapped[int] = mapped_column(Integer, default=0)

    # Which API made the batch and shows it (a BatchApi value): its kind (app/core/batch_kinds.py).
    api: Mapped[str] = mapped_column(String(16), default=BatchApi.OPENAI, server_default=BatchApi.OPENAI)
    # Lines that never ran (cancelled, expired, timed out), counted at finalize, so Anthropic's
    # request_counts can tell them from lines that failed.
    unexecuted: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    # Set by `DELETE /v1/batches/{id}`: the API no longer shows it, but its id stays a list cursor
    # until the tombstone is purged (with its shards and chunks: ON DELETE CASCADE).
    deleted_at: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    # The batch whose unsuccessful lines this one runs again (`POST /v1/batches/{id}/retry`).
    retry_of: Mapped[str | None] = mapped_column(String(64), nullable=True)
    # W3C trace context of the create request (app/core/tracing.py); None when tracing was off.
    traceparent: Mapped[str | None] = mapped_column(String(64), nullable=True)
    # The public id of the API key that created the batch (its usage is booked under it).
    api_key_id: Mapped[str | None] = mapped_column(String(64), nullable=True)
    # The blob of the input's lines in prompt-prefix order (app/pipeline/prefix_order.py) that the
    # shards are byte ranges of, while the batch runs; None: the shards are ranges of the input.
    # An `output_order: "input"` batch's copy has its positions beside it (app/pipeline/input_order.py).
    ordered_input: Mapped[str | None] = mapped_column(String(96), nullable=True)
    # batchd's `output_order`: "completion" (the default: prompt-prefix order when the batch is
    # prefix-ordered) or "input" (the output and error files list lines in input order).
    output_order: Mapped[str] = mapped_column(String(16), server_default="completion")
    # Set by `POST /v1/batches/{id}/pause` (None after resume): the batch stays in_progress, but
    # no replica claims its shards (running ones give theirs back once their lines in flight end).
    paused_at: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    # batchd's results by reference (app/domains/batches/export.py): where the output and error
    # files are copied once the batch ends, an `s3://` prefix or presigned PUT URLs by kind
    # ({"output": url, "error": url}); None: nowhere.
    output_uri: Mapped[str | None] = mapped_column(Text, nullable=True)
    output_urls: Mapped[dict | None] = mapped_column(JSON, nullable=True)
    # The copy's state: None (no export), "pending" (from create until it is done), "completed",
    # "failed" (after the last attempt); the last attempt's error ({"code", "message"}); the
    # attempts made; when the next one is due (while one runs: until when it holds the batch).
    export_status: Mapped[str | None] = mapped_column(String(16), nullable=True)
    export_error: Mapped[dict | None] = mapped_column(JSON, nullable=True)
    export_attempts: Mapped[int] = mapped_column(Integer, server_default="0")
    export_next_at: Mapped[float | None] = mapped_column(Float, nullable=True)

    @hybrid_property
    def deadline(self) -> int:
        """The deadline that orders the batch's work: `due_at` when set, else `expires_at`. On
        the class, the same as an SQL expression (`Batch.deadline`), which every query uses."""
        return self.expires_at if self.due_at is None else self.due_at

    @deadline.inplace.expression
    @classmethod
    def _deadline_expression(cls) -> ColumnElement[int]:
        return func.coalesce(cls.due_at, cls.expires_at)

    @property
    def shard_source(self) -> str:
        """The blob the shards' byte ranges are ranges of: the ordered copy or the input file."""
        return self.ordered_input or self.input_file_id

    __table_args__ = (
        Index("ix_batches_project_seq", "project", "seq"),
        Index("ix_batches_status", "status"),
        Index("ix_batches_project_api_seq", "project", "api", "seq"),
        Index("ix_batches_export_status", "export_status"),
        status_check(BatchStatus),
    )


def new_batch(
    kind: BatchKind,
    *,
    batch_id: str,
    project: str,
    endpoint: str,
    input_file_id: str,
    completion_window: str,
    created_at: int,
    expires_at: int,
    api_key_id: str | None,
    total: int = 0,
    due_at: int | None = None,
    metadata: dict | None = None,
    output_expires_after: int | None = None,
    retry_of: str | None = None,
    allow_mixed_models: bool = False,
    output_order: str = "completion",
    output_uri: str | None = None,
    output_urls: dict | None = None,
) -> Batch:
    """A new batch of `kind`, validating, with the trace context of the request that creates it."""
    return Batch(
        id=batch_id,
        api=kind.api,
        project=project,
        endpoint=endpoint,
        input_file_id=input_file_id,
        completion_window=completion_window,
        status=BatchStatus.VALIDATING,
        metadata_=metadata,
        output_expires_after=output_expires_after,
        allow_mixed_models=allow_mixed_models,
        created_at=created_at,
        due_at=due_at,
        expires_at=expires_at,
        total=total,
        retry_of=retry_of,
        output_order=output_order,
        output_uri=output_uri,
        output_urls=output_urls,
        export_status=ExportStatus.PENDING if output_uri or output_urls else None,
        traceparent=tracing.request_traceparent(batch_id=batch_id, project=project),
        api_key_id=api_key_id,
    )


class BatchChunk(Base):
    """A checkpoint: finished lines of one shard, recorded together. Their output and error lines
    are the blob `blob_id` (in the batch's project); the row only says which lines it holds, so
    the database stays the size of the lines in flight, not of their results (W9). `payload`
    holds the lines instead of a blob for checkpoints carried over from the old per-line rows."""

    __tablename__ = "batch_chunks"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    batch_id: Mapped[str] = mapped_column(String(64), ForeignKey("batches.id", ondelete="CASCADE"))
    shard_no: Mapped[int] = mapped_column(Integer)
    blob_id: Mapped[str | None] = mapped_column(String(64), nullable=True)
    payload: Mapped[bytes | None] = mapped_column(LargeBinary, nullable=True)
    # The line numbers this chunk counts (uint32, little-endian); its blob may hold others too
    # (a retried write), which are not part of it.
    line_nos: Mapped[bytes] = mapped_column(LargeBinary)
    lines: Mapped[int] = mapped_column(Integer)

    __table_args__ = (Index("ix_batch_chunks_batch_id_shard_no", "batch_id", "shard_no"),)


class BatchPromptTokens(Base):
    """A batch's prompt tokens for one model, counted at validation: they count against its
    project's enqueued-token limit for that model until the batch ends. An OpenAI batch has one
    row; a Message Batch one per model its requests name."""

    __tablename__ = "batch_prompt_tokens"

    batch_id: Mapped[str] = mapped_column(String(64), ForeignKey("batches.id", ondelete="CASCADE"), primary_key=True)
    model: Mapped[str] = mapped_column(String(256), primary_key=True)
    tokens: Mapped[int] = mapped_column(BigInteger)
