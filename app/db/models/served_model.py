from __future__ import annotations

from sqlalchemy import BigInteger, Float, Integer, String
from sqlalchemy.orm import Mapped, mapped_column

from app.db.base import Base


class ServedModel(Base):
    """A model one replica's engines serve, as that replica last published it. A replica started
    with --api-only runs no engines, so its `GET /v1/models` lists these; a row whose replica
    stopped publishing is ignored, then removed."""

    __tablename__ = "served_models"

    replica: Mapped[str] = mapped_column(String(128), primary_key=True)
    model_id: Mapped[str] = mapped_column(String(256), primary_key=True)
    created: Mapped[int] = mapped_column(BigInteger)
    owned_by: Mapped[str] = mapped_column(String(128))
    engine_state: Mapped[str] = mapped_column(String(16))
    lines_in_flight: Mapped[int] = mapped_column(Integer)
    lines_waiting: Mapped[int] = mapped_column(Integer)
    max_lines_in_flight: Mapped[int] = mapped_column(Integer)
    published_at: Mapped[float] = mapped_column(Float)
