from __future__ import annotations

from sqlalchemy import BigInteger, Boolean, Integer, String, false
from sqlalchemy.orm import Mapped, mapped_column

from app.db.base import Base


class ApiKey(Base):
    """An API key created with `batchd keys create`; only its keyed hash is stored."""

    __tablename__ = "api_keys"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    key_hash: Mapped[str] = mapped_column(String(64), unique=True)
    # The first characters, so an operator can tell keys apart in listings.
    prefix: Mapped[str] = mapped_column(String(16))
    project: Mapped[str] = mapped_column(String(128), index=True)
    # The Administration API's name for the key (and for the service account that owns it).
    name: Mapped[str | None] = mapped_column(String(256), nullable=True)
    created_at: Mapped[int] = mapped_column(BigInteger)
    revoked_at: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    # Admin keys (`batchd keys create --admin`) may also read organization-wide data such as usage.
    is_admin: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())
