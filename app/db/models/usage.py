from __future__ import annotations

from sqlalchemy import BigInteger, Index, Integer, PrimaryKeyConstraint, String
from sqlalchemy.orm import Mapped, mapped_column

from app.db.base import Base


class UsageMinute(Base):
    """What the lines of one batch that finished in one minute used: the chargeback record behind
    `/v1/organization/usage/*`. Added to in the checkpoint's own transaction, so a line is counted
    exactly when its checkpoint chunk is stored; kept after the batch's lines are deleted."""

    __tablename__ = "usage_minutes"

    project: Mapped[str] = mapped_column(String(128))
    model: Mapped[str] = mapped_column(String(256))
    batch_id: Mapped[str] = mapped_column(String(64))
    # The public id of the key that created the batch (None: open mode, or rows from before 0021).
    api_key_id: Mapped[str | None] = mapped_column(String(64), nullable=True)
    # Unix seconds of the minute's start (UTC).
    minute: Mapped[int] = mapped_column(BigInteger)
    # `completions`, `embeddings` or `audio_transcriptions`: which usage endpoint reports it.
    kind: Mapped[str] = mapped_column(String(32))
    input_tokens: Mapped[int] = mapped_column(BigInteger, default=0)
    cached_tokens: Mapped[int] = mapped_column(BigInteger, default=0)
    output_tokens: Mapped[int] = mapped_column(BigInteger, default=0)
    requests: Mapped[int] = mapped_column(Integer, default=0)
    # Audio duration of transcription and translation lines.
    seconds: Mapped[int] = mapped_column(BigInteger, default=0, server_default="0")

    __table_args__ = (
        PrimaryKeyConstraint("project", "model", "batch_id", "minute", name="pk_usage_minutes"),
        Index("ix_usage_minutes_kind_minute", "kind", "minute"),
    )
