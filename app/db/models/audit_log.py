from __future__ import annotations

from sqlalchemy import BigInteger, Integer, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from app.db.base import Base


class AuditLog(Base):
    """One change made through the Administration API, written in the change's own transaction."""

    __tablename__ = "audit_logs"

    # Ordering and the wire id (`audit_log-<seq>`): newest first, the cursor is the seq.
    seq: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    type: Mapped[str] = mapped_column(String(64))  # OpenAI's event type, e.g. project.created
    effective_at: Mapped[int] = mapped_column(BigInteger, index=True)
    # The id of what changed (a project, key or service account), for the resource_ids filter.
    resource_id: Mapped[str] = mapped_column(String(128))
    project_id: Mapped[str | None] = mapped_column(String(128), nullable=True)
    # The wire id of the key that made the change (None in open mode).
    actor_key_id: Mapped[str | None] = mapped_column(String(64), nullable=True)
    # JSON: the event's own object, e.g. {"id": "proj_..", "data": {"title": ..}}.
    details: Mapped[str] = mapped_column(Text)
