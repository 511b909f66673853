from __future__ import annotations

from sqlalchemy import BigInteger, String
from sqlalchemy.orm import Mapped, mapped_column

from app.db.base import Base


class ProjectRateLimit(Base):
    """A project's daily limits for one model (OpenAI's `project.rate_limit`); None: no limit."""

    __tablename__ = "project_rate_limits"

    project: Mapped[str] = mapped_column(String(128), primary_key=True)
    model: Mapped[str] = mapped_column(String(256), primary_key=True)
    # Prompt tokens of the batches created in one UTC day (counted at validation).
    batch_1_day_max_input_tokens: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    # Requests (lines) of the batches created in one UTC day.
    max_requests_per_1_day: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    updated_at: Mapped[int] = mapped_column(BigInteger)
