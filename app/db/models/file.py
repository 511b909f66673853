from __future__ import annotations

from sqlalchemy import BigInteger, Index, Integer, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from app.db.base import Base


class File(Base):
    """A stored file. Deleted files stay as tombstones so a deleted id still works as a
    pagination cursor (clients commonly delete while iterating `files.list()`)."""

    __tablename__ = "files"

    # Monotonic insertion order: the stable sort key behind `after` cursors.
    seq: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    id: Mapped[str] = mapped_column(String(64), unique=True)
    project: Mapped[str] = mapped_column(String(128))
    filename: Mapped[str] = mapped_column(String(512))
    purpose: Mapped[str] = mapped_column(String(32))
    bytes: Mapped[int] = mapped_column(BigInteger)
    created_at: Mapped[int] = mapped_column(BigInteger)
    expires_at: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    status: Mapped[str] = mapped_column(String(16), default="processed")
    sha256: Mapped[str] = mapped_column(String(64))
    deleted_at: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    # Where an imported file came from: its URL without query string, fragment or credentials
    # (a presigned URL's signature is not kept); None: uploaded.
    source_url: Mapped[str | None] = mapped_column(Text, nullable=True)

    __table_args__ = (
        Index("ix_files_project_seq", "project", "seq"),
        Index("ix_files_expires_at", "expires_at"),
    )
