from __future__ import annotations

from sqlalchemy import JSON, BigInteger, CheckConstraint, Integer, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from app.db.base import Base


class Project(Base):
    """An operator's settings for one project (`batchd projects set`). A project without a row has
    the defaults: weight 1 and the server-wide token limit."""

    __tablename__ = "projects"
    __table_args__ = (
        CheckConstraint("weight >= 1", name="weight_positive"),
        CheckConstraint(
            "max_enqueued_tokens IS NULL OR max_enqueued_tokens >= 0", name="max_enqueued_tokens_not_negative"
        ),
        CheckConstraint("retention_days IS NULL OR retention_days >= 1", name="retention_days_positive"),
        CheckConstraint("max_bytes IS NULL OR max_bytes >= 0", name="max_bytes_not_negative"),
        CheckConstraint(
            "max_active_batches IS NULL OR max_active_batches >= 0", name="max_active_batches_not_negative"
        ),
    )

    name: Mapped[str] = mapped_column(String(128), primary_key=True)
    # Its share of each model's lines while other projects also have work, relative to theirs.
    weight: Mapped[int] = mapped_column(Integer, default=1)
    # Enqueued prompt tokens per model; None falls back to BATCHD_PROJECT_MAX_ENQUEUED_TOKENS.
    max_enqueued_tokens: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    # The completion windows its batches may use, comma-separated; None: BATCHD_COMPLETION_WINDOWS.
    completion_windows: Mapped[str | None] = mapped_column(String(256), nullable=True)
    updated_at: Mapped[int] = mapped_column(BigInteger)
    # The Administration API's view: a display name, when it was created (None: before 0020, or
    # by `batchd projects set`), and when it was archived (its keys stop working).
    title: Mapped[str | None] = mapped_column(String(256), nullable=True)
    created_at: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    archived_at: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    # Which served models its batches may name: `allow_list` or `deny_list` of model_ids (a JSON
    # list); None: every model.
    model_permissions_mode: Mapped[str | None] = mapped_column(String(16), nullable=True)
    model_ids: Mapped[str | None] = mapped_column(Text, nullable=True)
    # Its files (batch inputs and outputs among them) and its ended batches' results are deleted
    # this many days after they were made; None: kept until they expire.
    retention_days: Mapped[int | None] = mapped_column(Integer, nullable=True)
    # Its own stored-bytes and active-batch limits; None: BATCHD_PROJECT_MAX_BYTES and
    # BATCHD_PROJECT_MAX_ACTIVE_BATCHES; 0: no limit.
    max_bytes: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    max_active_batches: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    # The `s3://bucket/prefix/` URIs its files may be imported from besides
    # BATCHD_IMPORT_ALLOWED_URIS (a JSON list); None: those only.
    allowed_import_uris: Mapped[list | None] = mapped_column(JSON, nullable=True)
