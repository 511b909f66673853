from __future__ import annotations

from sqlalchemy import Boolean, Float, Integer, LargeBinary, String, false
from sqlalchemy.orm import Mapped, mapped_column

from app.db.base import Base


class IdempotencyKey(Base):
    """A POST sent with an `Idempotency-Key`, per project and API key (`api_key_id`, "" in open
    mode; `is_admin` as it was): while `locked_until` is set, a request holding it (`owner`) is
    running; `committed` once the route's own transaction committed its work; once done, what a
    repeat of the same request (its `fingerprint`) gets: the response `body` (`stored_bytes` of it,
    counted in the project's storage), or, for a response that carried a secret or did not fit,
    the `retrieve_path` a repeat is answered from. Rows older than the setting's hours are swept."""

    __tablename__ = "idempotency_keys"

    project: Mapped[str] = mapped_column(String(128), primary_key=True)
    api_key_id: Mapped[str] = mapped_column(String(64), primary_key=True, server_default="")
    key: Mapped[str] = mapped_column(String(255), primary_key=True)
    is_admin: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())
    created_at: Mapped[float] = mapped_column(Float, index=True)
    owner: Mapped[str | None] = mapped_column(String(64))
    locked_until: Mapped[float | None] = mapped_column(Float)
    committed: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())
    fingerprint: Mapped[str | None] = mapped_column(String(64))
    status_code: Mapped[int | None] = mapped_column(Integer)
    content_type: Mapped[str | None] = mapped_column(String(255))
    body: Mapped[bytes | None] = mapped_column(LargeBinary)
    retrieve_path: Mapped[str | None] = mapped_column(String(1024))
    stored_bytes: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
