"""SQL for the webhook event outbox and its deliveries (endpoints: repositories/webhook_endpoints.py).

Delivery attempts are claimed with a lease and a random token (Postgres `FOR UPDATE SKIP LOCKED`,
SQLite's single writer) and every later write about the attempt is conditioned on that token, so
with several replicas one sends each attempt."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, cast

from sqlalchemy import Select, Table, func, or_, select, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.ext.asyncio import AsyncSession

from app.core.statuses import WebhookDeliveryStatus, WebhookEndpointStatus
from app.db.base import dialect_of, rowcount
from app.db.models import WebhookDelivery, WebhookEndpoint, WebhookEvent

# Why batchd disabled an endpoint (shown on the endpoint object).
DISABLED_FAILING = "Every delivery failed for too long; update the endpoint with status 'enabled' to resume."


@dataclass
class ClaimedDelivery:
    id: int
    attempts: int  # including the one just claimed
    event_id: str
    event_created_at: int
    body: str
    endpoint_id: str
    url: str
    secret: str
    previous_secret: str | None
    previous_secret_expires_at: int | None


class WebhookRepository:
    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    # -- outbox ---------------------------------------------------------------------------------

    async def add_event(self, event: WebhookEvent) -> bool:
        """Insert the event unless its batch already has one; True if inserted."""
        dialect = dialect_of(self.session)
        insert_fn = pg_insert if dialect == "postgresql" else sqlite_insert
        result = await self.session.execute(
            insert_fn(cast(Table, WebhookEvent.__table__))
            .values(
                id=event.id,
                project=event.project,
                type=event.type,
                batch_id=event.batch_id,
                body=event.body,
                created_at=event.created_at,
            )
            .on_conflict_do_nothing(index_elements=["batch_id"])
            .returning(WebhookEvent.id)
        )
        return result.first() is not None

    async def subscribed_endpoint_ids(self, project: str, event_type: str, batch_id: str | None = None) -> list[str]:
        """The project's enabled endpoints for `event_type`: its own, and the one bound to `batch_id`."""
        result = await self.session.execute(
            select(WebhookEndpoint.id, WebhookEndpoint.event_types).where(
                WebhookEndpoint.project == project,
                WebhookEndpoint.status == WebhookEndpointStatus.ENABLED,
                or_(WebhookEndpoint.batch_id.is_(None), WebhookEndpoint.batch_id == batch_id),
            )
        )
        # A project has a handful of endpoints: filter the JSON list here, not per dialect in SQL.
        return [endpoint_id for endpoint_id, types in result.all() if event_type in (types or [])]

    async def add_deliveries(self, event_id: str, endpoint_ids: Sequence[str], now: int) -> None:
        self.session.add_all(
            [
                WebhookDelivery(
                    event_id=event_id,
                    endpoint_id=e,
                    status=WebhookDeliveryStatus.PENDING,
                    attempts=0,
                    next_attempt_at=float(now),
                    created_at=now,
                )
                for e in endpoint_ids
            ]
        )
        await self.session.flush()

    # -- sending --------------------------------------------------------------------------------

    @staticmethod
    def _due(now: float) -> Select[int]:
        enabled = select(WebhookEndpoint.id).where(WebhookEndpoint.status == WebhookEndpointStatus.ENABLED)
        return select(WebhookDelivery.id).where(
            WebhookDelivery.status == WebhookDeliveryStatus.PENDING,
            WebhookDelivery.next_attempt_at <= now,
            WebhookDelivery.lease_expires_at.is_(None) | (WebhookDelivery.lease_expires_at < now),
            WebhookDelivery.endpoint_id.in_(enabled),
        )

    async def any_due(self, now: float) -> bool:
        """A read-only look first, so an idle sender never takes SQLite's single write lock."""
        result = await self.session.execute(self._due(now).limit(1))
        return result.first() is not None

    async def claim_due(self, now: float, lease_seconds: float, token: str, limit: int) -> list[ClaimedDelivery]:
        """Take up to `limit` due attempts for enabled endpoints; the lease covers one attempt."""
        due = (
            self._due(now)
            .order_by(WebhookDelivery.next_attempt_at)
            .limit(limit)
            .with_for_update(skip_locked=True, of=WebhookDelivery)
        )
        result = await self.session.execute(
            update(WebhookDelivery)
            .where(WebhookDelivery.id.in_(due.scalar_subquery()))
            .values(lease_expires_at=now + lease_seconds, claim_token=token, attempts=WebhookDelivery.attempts + 1)
            .returning(WebhookDelivery.id)
            .execution_options(synchronize_session=False)
        )
        ids = [row[0] for row in result.all()]
        if not ids:
            return []
        rows = await self.session.execute(
            select(
                WebhookDelivery.id,
                WebhookDelivery.attempts,
                WebhookEvent.id.label("event_id"),
                WebhookEvent.created_at.label("event_created_at"),
                WebhookEvent.body,
                WebhookEndpoint.id.label("endpoint_id"),
                WebhookEndpoint.url,
                WebhookEndpoint.secret,
                WebhookEndpoint.previous_secret,
                WebhookEndpoint.previous_secret_expires_at,
            )
            .join(WebhookEvent, WebhookEvent.id == WebhookDelivery.event_id)
            .join(WebhookEndpoint, WebhookEndpoint.id == WebhookDelivery.endpoint_id)
            .where(WebhookDelivery.id.in_(ids))
            .order_by(WebhookDelivery.id)
        )
        return [ClaimedDelivery(**row._mapping) for row in rows.all()]

    async def finish_attempt(
        self,
        delivery_id: int,
        token: str,
        *,
        status: WebhookDeliveryStatus,
        next_attempt_at: float | None,
        status_code: int | None,
        error: str | None,
        now: int,
    ) -> bool:
        """Record an attempt's result: `pending` again (retry at `next_attempt_at`), `delivered`
        or `failed`. False if the lease was lost meanwhile (another sender owns it now)."""
        values: dict[str, Any] = dict(
            status=status,
            lease_expires_at=None,
            claim_token=None,
            last_status_code=status_code,
            last_error=error[:512] if error else None,
        )
        if next_attempt_at is not None:
            values["next_attempt_at"] = next_attempt_at
        if status != WebhookDeliveryStatus.PENDING:
            values["finished_at"] = now
        result = await self.session.execute(
            update(WebhookDelivery)
            .where(WebhookDelivery.id == delivery_id, WebhookDelivery.claim_token == token)
            .values(**values)
            .execution_options(synchronize_session=False)
        )
        return rowcount(result) == 1

    async def endpoint_succeeded(self, endpoint_id: str) -> None:
        await self.session.execute(
            update(WebhookEndpoint)
            .where(WebhookEndpoint.id == endpoint_id, WebhookEndpoint.failing_since.is_not(None))
            .values(failing_since=None)
            .execution_options(synchronize_session=False)
        )

    async def endpoint_failed(self, endpoint_id: str, now: int, disable_after: float) -> bool:
        """Note a failure; disable the endpoint once it has failed without a success for
        `disable_after` seconds. True if this call disabled it."""
        await self.session.execute(
            update(WebhookEndpoint)
            .where(WebhookEndpoint.id == endpoint_id)
            .values(failing_since=func.coalesce(WebhookEndpoint.failing_since, now))
            .execution_options(synchronize_session=False)
        )
        result = await self.session.execute(
            update(WebhookEndpoint)
            .where(
                WebhookEndpoint.id == endpoint_id,
                WebhookEndpoint.status == WebhookEndpointStatus.ENABLED,
                WebhookEndpoint.failing_since <= now - disable_after,
            )
            .values(status=WebhookEndpointStatus.DISABLED, updated_at=now, disabled_reason=DISABLED_FAILING)
            .execution_options(synchronize_session=False)
        )
        return rowcount(result) == 1
