from __future__ import annotations

from sqlalchemy import BigInteger, ForeignKey, Index, Integer, String
from sqlalchemy.orm import Mapped, mapped_column

from app.core.statuses import UploadStatus
from app.db.base import Base
from app.db.status_columns import status_check, status_type


class Upload(Base):
    """A multipart upload (OpenAI Uploads API): parts arrive as their own blobs, completion
    concatenates them into a File. Only `pending` uploads take parts; the others are final."""

    __tablename__ = "uploads"

    seq: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    id: Mapped[str] = mapped_column(String(64), unique=True)
    project: Mapped[str] = mapped_column(String(128))
    filename: Mapped[str] = mapped_column(String(512))
    purpose: Mapped[str] = mapped_column(String(32))
    mime_type: Mapped[str] = mapped_column(String(256))
    # The byte count the client announced; completion must match it exactly.
    bytes: Mapped[int] = mapped_column(BigInteger)
    status: Mapped[UploadStatus] = mapped_column(status_type(UploadStatus))
    created_at: Mapped[int] = mapped_column(BigInteger)
    expires_at: Mapped[int] = mapped_column(BigInteger)
    # `expires_after.seconds` for the File that completion creates (None: the purpose's default).
    file_expires_after: Mapped[int | None] = mapped_column(Integer, nullable=True)
    file_id: Mapped[str | None] = mapped_column(String(64), nullable=True)

    __table_args__ = (Index("ix_uploads_status_expires_at", "status", "expires_at"), status_check(UploadStatus))

    def status_at(self, now: float) -> UploadStatus:
        """The status as of `now`: a pending upload past its expiry is expired even before the
        sweep marks it."""
        if self.status == UploadStatus.PENDING and now >= self.expires_at:
            return UploadStatus.EXPIRED
        return self.status


class UploadPart(Base):
    """One part: its bytes are the blob stored under (project, id)."""

    __tablename__ = "upload_parts"

    seq: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    id: Mapped[str] = mapped_column(String(64), unique=True)
    upload_id: Mapped[str] = mapped_column(String(64), ForeignKey("uploads.id", ondelete="CASCADE"))
    project: Mapped[str] = mapped_column(String(128))
    bytes: Mapped[int] = mapped_column(BigInteger)
    created_at: Mapped[int] = mapped_column(BigInteger)

    __table_args__ = (Index("ix_upload_parts_upload_id", "upload_id"),)
