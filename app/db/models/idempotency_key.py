from __future__ import annotations

from sqlalchemy import Float, Integer, LargeBinary, String
from sqlalchemy.orm import Mapped, mapped_column

from app.db.base import Base


class IdempotencyKey(Base):
    """A POST sent with an `Idempotency-Key`, per project: while `locked_until` is set, a request
    holding it (`owner`) is running; once done, the response it gave (replayed to repeats of the
    same request, whose `fingerprint` it keeps). Rows older than the setting's hours are swept."""

    __tablename__ = "idempotency_keys"

    project: Mapped[str] = mapped_column(String(128), primary_key=True)
    key: Mapped[str] = mapped_column(String(255), primary_key=True)
    created_at: Mapped[float] = mapped_column(Float, index=True)
    owner: Mapped[str | None] = mapped_column(String(64))
    locked_until: Mapped[float | None] = mapped_column(Float)
    fingerprint: Mapped[str | None] = mapped_column(String(64))
    status_code: Mapped[int | None] = mapped_column(Integer)
    content_type: Mapped[str | None] = mapped_column(String(255))
    body: Mapped[bytes | None] = mapped_column(LargeBinary)
