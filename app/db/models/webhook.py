from __future__ import annotations

from sqlalchemy import JSON, BigInteger, Float, ForeignKey, Index, Integer, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from app.core.statuses import WebhookDeliveryStatus, WebhookEndpointStatus
from app.db.base import Base
from app.db.status_columns import status_check, status_type


class WebhookEndpoint(Base):
    """A project's webhook receiver. The signing secret is stored as is: HMAC signing needs it.
    After a rotation that keeps the old secret, both sign until `previous_secret_expires_at`."""

    __tablename__ = "webhook_endpoints"

    seq: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    id: Mapped[str] = mapped_column(String(64), unique=True)
    project: Mapped[str] = mapped_column(String(128))
    name: Mapped[str] = mapped_column(String(256))
    url: Mapped[str] = mapped_column(String(2048))
    event_types: Mapped[list] = mapped_column(JSON)
    secret: Mapped[str] = mapped_column(String(128))
    previous_secret: Mapped[str | None] = mapped_column(String(128), nullable=True)
    previous_secret_expires_at: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    # Disabled by the owner, or by batchd after failing for too long.
    status: Mapped[WebhookEndpointStatus] = mapped_column(
        status_type(WebhookEndpointStatus), default=WebhookEndpointStatus.ENABLED
    )
    disabled_reason: Mapped[str | None] = mapped_column(String(256), nullable=True)
    # Start of the current run of failed deliveries; cleared by any success.
    failing_since: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    created_at: Mapped[int] = mapped_column(BigInteger)
    updated_at: Mapped[int] = mapped_column(BigInteger)
    # The batch it was registered with (a batch's `webhook`): only that batch's ending is sent to
    # it, the project's endpoint API does not show it, and it is removed once that event is sent.
    batch_id: Mapped[str | None] = mapped_column(String(64), nullable=True)

    __table_args__ = (
        Index("ix_webhook_endpoints_project_seq", "project", "seq"),
        Index("ix_webhook_endpoints_batch_id", "batch_id"),
        status_check(WebhookEndpointStatus),
    )


class WebhookEvent(Base):
    """The outbox: one row per batch ending, written in the transaction that ends the batch.
    `body` holds the exact bytes every delivery of it sends."""

    __tablename__ = "webhook_events"

    seq: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    id: Mapped[str] = mapped_column(String(64), unique=True)
    project: Mapped[str] = mapped_column(String(128))
    type: Mapped[str] = mapped_column(String(64))
    # A batch ends once: the unique key makes a second event for it impossible.
    batch_id: Mapped[str] = mapped_column(String(64), unique=True)
    body: Mapped[str] = mapped_column(Text)
    created_at: Mapped[int] = mapped_column(BigInteger)


class WebhookDelivery(Base):
    """One event to one endpoint, retried until delivered or given up. A sender claims an attempt
    with a lease (`claim_token`, `lease_expires_at`) so one replica sends each attempt."""

    __tablename__ = "webhook_deliveries"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    event_id: Mapped[str] = mapped_column(String(64), ForeignKey("webhook_events.id", ondelete="CASCADE"))
    endpoint_id: Mapped[str] = mapped_column(String(64), ForeignKey("webhook_endpoints.id", ondelete="CASCADE"))
    status: Mapped[WebhookDeliveryStatus] = mapped_column(
        status_type(WebhookDeliveryStatus), default=WebhookDeliveryStatus.PENDING
    )
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    next_attempt_at: Mapped[float] = mapped_column(Float)
    lease_expires_at: Mapped[float | None] = mapped_column(Float, nullable=True)
    claim_token: Mapped[str | None] = mapped_column(String(64), nullable=True)
    last_status_code: Mapped[int | None] = mapped_column(Integer, nullable=True)
    last_error: Mapped[str | None] = mapped_column(String(512), nullable=True)
    created_at: Mapped[int] = mapped_column(BigInteger)
    finished_at: Mapped[int | None] = mapped_column(BigInteger, nullable=True)

    __table_args__ = (
        Index("ix_webhook_deliveries_due", "status", "next_attempt_at"),
        status_check(WebhookDeliveryStatus),
    )
