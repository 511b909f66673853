from __future__ import annotations

from sqlalchemy import BigInteger, Float, ForeignKey, Index, Integer, String, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from app.core.statuses import ShardStatus
from app.db.base import Base
from app.db.status_columns import status_check, status_type


class BatchShard(Base):
    """A slice of a batch's input (lines [first_line, end_line), bytes [start_offset, end_offset))
    that any replica may claim. Like a batch, it is held through a lease and a fence that grows
    on every claim; every checkpoint write is conditioned on it. `replica` is who ran it last."""

    __tablename__ = "batch_shards"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    batch_id: Mapped[str] = mapped_column(String(64), ForeignKey("batches.id", ondelete="CASCADE"))
    shard_no: Mapped[int] = mapped_column(Integer)
    first_line: Mapped[int] = mapped_column(Integer)
    end_line: Mapped[int] = mapped_column(Integer)
    start_offset: Mapped[int] = mapped_column(BigInteger)
    end_offset: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    lines: Mapped[int] = mapped_column(Integer)
    status: Mapped[ShardStatus] = mapped_column(status_type(ShardStatus), default=ShardStatus.PENDING)
    lease_owner: Mapped[str | None] = mapped_column(String(128), nullable=True)
    lease_expires_at: Mapped[float | None] = mapped_column(Float, nullable=True)
    fence: Mapped[int] = mapped_column(Integer, default=0)
    replica: Mapped[str | None] = mapped_column(String(128), nullable=True)
    # 1 when the last claim took the shard over from a replica whose lease had expired.
    taken_over: Mapped[int] = mapped_column(Integer, default=0)
    lines_done: Mapped[int] = mapped_column(Integer, default=0)
    started_at: Mapped[float | None] = mapped_column(Float, nullable=True)
    finished_at: Mapped[float | None] = mapped_column(Float, nullable=True)

    __table_args__ = (
        UniqueConstraint("batch_id", "shard_no", name="uq_batch_shards_batch_id_shard_no"),
        Index("ix_batch_shards_status", "status"),
        status_check(ShardStatus),
    )
