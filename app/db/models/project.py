from __future__ import annotations

from sqlalchemy import BigInteger, CheckConstraint, Integer, String
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
    )

    name: Mapped[str] = mapped_column(String(128), primary_key=True)
    # Its share of each model's lines while other projects also have work, relative to theirs.
    weight: Mapped[int] = mapped_column(Integer, default=1)
    # Enqueued prompt tokens per model; None falls back to BATCHD_PROJECT_MAX_ENQUEUED_TOKENS.
    max_enqueued_tokens: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    updated_at: Mapped[int] = mapped_column(BigInteger)
