"""SQL for batches.

API reads are scoped to a project. A batch is claimed whole only for the steps one replica
must take alone (validate, finalize, cancel, expire); its lines run as shards
(repositories/shards.py). Those writes are fenced: each is conditioned on the `fence` the
replica got when it claimed the batch, so one whose lease was taken over writes nothing
(LeaseLost)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass

from sqlalchemy import ColumnElement, Select, and_, case, delete, exists, func, literal, or_, select, update
from sqlalchemy.orm import aliased

from app.core.batch_kinds import UNLISTED_APIS
from app.core.statuses import (
    ACTIVE_BATCH_STATUSES,
    CANCELLABLE_BATCH_STATUSES,
    TERMINAL_BATCH_STATUSES,
    BatchStatus,
    ExportStatus,
    ShardStatus,
    batch_moves_from,
)
from app.db.base import dialect_of, rowcount
from app.db.models import Batch, BatchShard, File
from app.db.repositories.base import Page, ProjectScopedRepository

# An input this small is validated in milliseconds: it goes first (claim).
SMALL_INPUT_BYTES = 1024 * 1024


class LeaseLost(Exception):
    """Another worker now owns the batch; this one must stop writing."""


@dataclass
class Claim:
    batch_id: str
    fence: int
    # The lease was taken from another worker that let it expire.
    taken_over: bool = False


@dataclass
class LineRow:
    line_no: int
    ok: bool
    line: str
    input_tokens: int = 0
    cached_tokens: int = 0
    output_tokens: int = 0
    reasoning_tokens: int = 0
    model: str | None = None  # the line's own model, when it names one (its usage is booked there)
    seconds: int = 0  # audio seconds of a speech-to-text line


@dataclass(frozen=True)
class BatchFilters:
    """What `GET /v1/batches` may narrow a list to (every one given must hold)."""

    statuses: tuple[BatchStatus, ...] = ()
    metadata: tuple[tuple[str, str], ...] = ()  # (key, value): the batch's metadata has exactly that
    created_after: int | None = None  # created_at >= it
    created_before: int | None = None  # created_at < it
    endpoint: str | None = None
    model: str | None = None


def _moving(target: BatchStatus, statuses: Sequence[BatchStatus] | None = None) -> ColumnElement[bool]:
    """The batch is in one of `statuses` (by default, any that may move to `target`), each of
    them allowed to move to `target` by BATCH_MOVES (ForbiddenBatchMove otherwise)."""
    return Batch.status.in_(batch_moves_from(target, statuses))


class BatchRepository(ProjectScopedRepository[Batch]):
    model = Batch

    # -- API side (project-scoped) ------------------------------------------------------------

    def scoped(self, project: str | None) -> Select[Batch]:
        """The project's batches the batch APIs show: not deleted (a deleted id still works as a
        cursor), and not single requests (background responses: only `/v1/responses` shows those;
        flex requests: none)."""
        return self.not_deleted(project).where(Batch.api.not_in(UNLISTED_APIS))

    def not_deleted(self, project: str | None) -> Select[Batch]:
        return super().scoped(project).where(Batch.deleted_at.is_(None))

    async def mark_deleted(self, batch: Batch, now: int) -> bool:
        """Make an ended batch a tombstone; False if it is not ended or already deleted."""
        result = await self.session.execute(
            update(Batch)
            .where(Batch.seq == batch.seq, Batch.status.in_(TERMINAL_BATCH_STATUSES), Batch.deleted_at.is_(None))
            .values(deleted_at=now)
        )
        return rowcount(result) == 1

    async def purge_tombstones(self, deleted_before: int) -> int:
        """Forget batches deleted before `deleted_before`; their shards and chunks go with them
        (ON DELETE CASCADE; a chunk's blob, if any is left: the orphan blob sweep)."""
        result = await self.session.execute(
            delete(Batch).where(Batch.deleted_at.is_not(None), Batch.deleted_at < deleted_before)
        )
        return rowcount(result)

    async def page_filtered(
        self, project: str | None, filters: BatchFilters, *, after: str | None, limit: int
    ) -> Page[Batch]:
        """A page of the project's batches that match `filters`, newest first; the cursor is
        found among all of them, so a filter never loses a client its place."""
        return await self.page(project, after=after, limit=limit, where=self._conditions(filters))

    def _conditions(self, filters: BatchFilters) -> list[ColumnElement[bool]]:
        where: list[ColumnElement[bool]] = []
        if filters.statuses:
            where.append(Batch.status.in_(filters.statuses))
        if filters.created_after is not None:
            where.append(Batch.created_at >= filters.created_after)
        if filters.created_before is not None:
            where.append(Batch.created_at < filters.created_before)
        if filters.endpoint is not None:
            where.append(Batch.endpoint == filters.endpoint)
        if filters.model is not None:
            where.append(Batch.model == filters.model)
        where.extend(self._metadata_is(key, value) for key, value in filters.metadata)
        return where

    def _metadata_is(self, key: str, value: str) -> ColumnElement[bool]:
        """The batch's metadata holds `key` with `value`. The key is always a bound value, never
        part of a JSON path: a key with a quote or a dot in it means itself."""
        if dialect_of(self.session) == "postgresql":
            return Batch.metadata_[key].as_string() == value
        # SQLite: its JSON paths cannot quote every key, so the pairs are read with json_each
        # (which yields nothing for SQL NULL and no keyed row for a JSON null).
        pairs = func.json_each(Batch.metadata_).table_valued("key", "value")
        return exists(select(literal(1)).select_from(pairs).where(pairs.c.key == key, pairs.c.value == value))

    async def request_cancel(self, project: str, batch_id: str, now: int) -> bool:
        result = await self.session.execute(
            update(Batch)
            .where(
                Batch.project == project,
                Batch.id == batch_id,
                _moving(BatchStatus.CANCELLING, CANCELLABLE_BATCH_STATUSES),
            )
            .values(status=BatchStatus.CANCELLING, cancelling_at=now)
        )
        return rowcount(result) == 1

    async def set_paused(self, project: str, batch_ids: Sequence[str] | None, paused_at: int | None) -> int:
        """Pause (`paused_at` a time) or resume (None) the project's running batches `batch_ids`
        (None: all of them) that are not so already; how many changed."""
        query = update(Batch).where(Batch.project == project, Batch.status == BatchStatus.IN_PROGRESS)
        if batch_ids is not None:
            query = query.where(Batch.id.in_(list(batch_ids)))
        query = query.where(Batch.paused_at.is_(None) if paused_at is not None else Batch.paused_at.is_not(None))
        return rowcount(await self.session.execute(query.values(paused_at=paused_at)))

    async def any_of_project(self, project: str) -> bool:
        result = await self.session.execute(select(Batch.id).where(Batch.project == project).limit(1))
        return result.first() is not None

    async def run_state(self, batch_id: str) -> tuple[BatchStatus | None, bool]:
        """The batch's status and whether it is paused."""
        row = (await self.session.execute(select(Batch.status, Batch.paused_at).where(Batch.id == batch_id))).first()
        return (None, False) if row is None else (row.status, row.paused_at is not None)

    async def request_cancel_all(self, project: str, now: int) -> int:
        """Cancel every queued or running batch of a project (it was archived); how many."""
        result = await self.session.execute(
            update(Batch)
            .where(Batch.project == project, _moving(BatchStatus.CANCELLING, CANCELLABLE_BATCH_STATUSES))
            .values(status=BatchStatus.CANCELLING, cancelling_at=now)
        )
        return rowcount(result)

    async def active_batch_using_file(self, project: str, file_id: str) -> str | None:
        result = await self.session.execute(
            select(Batch.id)
            .where(Batch.project == project, Batch.input_file_id == file_id, Batch.status.in_(ACTIVE_BATCH_STATUSES))
            .limit(1)
        )
        return result.scalar_one_or_none()

    # -- worker side --------------------------------------------------------------------------

    async def claim(
        self,
        owner: str,
        now: float,
        lease_seconds: float,
        skip: Sequence[str],
        idle_projects_only: bool = False,
        only: str | None = None,
    ) -> Claim | None:
        """Atomically take a batch that has a one-replica step to take and whose lease is free or
        expired: validating or finalizing; cancelling, or in_progress past its expiry, once no
        replica holds a live lease on one of its shards; in_progress with every shard done (the
        replica that finished the last shard normally moves it on itself). Projects take turns:
        the batch of the project with the fewest such steps under a live lease anywhere goes
        first, then the smallest input file, then the oldest; a small input (SMALL_INPUT_BYTES,
        validated in milliseconds) goes before all of them, the smallest first whatever its
        project, so a small batch is not validated after big ones created with it.
        `idle_projects_only` takes only a project with none, or a small input; `only`, that batch
        if it has such a step."""
        live_shard = exists().where(
            BatchShard.batch_id == Batch.id,
            BatchShard.status == ShardStatus.RUNNING,
            BatchShard.lease_expires_at >= now,
        )
        unfinished_shard = exists().where(BatchShard.batch_id == Batch.id, BatchShard.status != ShardStatus.DONE)
        has_work = or_(
            Batch.status.in_((BatchStatus.VALIDATING, BatchStatus.FINALIZING)),
            and_(Batch.status == BatchStatus.CANCELLING, ~live_shard),
            and_(
                Batch.status == BatchStatus.IN_PROGRESS,
                or_(~unfinished_shard, and_(Batch.expires_at <= now, ~live_shard)),
            ),
        )
        other = aliased(Batch)
        project_steps = (
            select(func.count())
            .where(other.project == Batch.project, other.lease_expires_at >= now)
            .correlate(Batch)
            .scalar_subquery()
        )
        input_bytes = func.coalesce(  # no file row: size unknown, not small
            select(File.bytes).where(File.id == Batch.input_file_id).correlate(Batch).scalar_subquery(),
            SMALL_INPUT_BYTES + 1,
        )
        small = input_bytes <= SMALL_INPUT_BYTES
        candidate = (
            select(Batch.seq, Batch.lease_owner)
            .where(has_work, (Batch.lease_expires_at.is_(None)) | (Batch.lease_expires_at < now))
            # Small inputs smallest first, whoever's they are (a 60-line batch is not held behind
            # its own project's 2,000-line one); larger ones by turns across projects.
            .order_by(
                case((small, 0), else_=1), case((small, input_bytes), else_=0), project_steps, input_bytes, Batch.seq
            )
            .limit(1)
            .with_for_update(skip_locked=True, of=Batch)
        )
        if idle_projects_only:
            candidate = candidate.where(or_(small, project_steps == 0))
        if skip:
            candidate = candidate.where(Batch.id.not_in(list(skip)))
        if only is not None:
            candidate = candidate.where(Batch.id == only)
        # Picked first and then updated (the FOR UPDATE keeps the row ours on Postgres; SQLite's
        # write transaction is exclusive), so who held it before is known: a claim of a lease
        # someone else let expire is a takeover.
        picked = (await self.session.execute(candidate)).first()
        if picked is None:
            return None
        seq, previous = picked
        result = await self.session.execute(
            update(Batch)
            .where(Batch.seq == seq)
            .values(lease_owner=owner, lease_expires_at=now + lease_seconds, fence=Batch.fence + 1)
            .returning(Batch.id, Batch.fence)
        )
        batch_id, fence = result.one()
        return Claim(batch_id, fence, taken_over=previous not in (None, owner))

    async def _fenced_update(self, claim: Claim, *conditions, **values) -> bool:
        result = await self.session.execute(
            update(Batch).where(Batch.id == claim.batch_id, Batch.fence == claim.fence, *conditions).values(**values)
        )
        return rowcount(result) == 1

    async def heartbeat(self, claim: Claim, now: float, lease_seconds: float) -> None:
        if not await self._fenced_update(claim, lease_expires_at=now + lease_seconds):
            raise LeaseLost(claim.batch_id)

    async def release(self, claim: Claim) -> None:
        await self._fenced_update(claim, lease_owner=None, lease_expires_at=None)

    async def load(self, batch_id: str) -> Batch | None:
        result = await self.session.execute(select(Batch).where(Batch.id == batch_id))
        return result.scalar_one_or_none()

    async def status(self, batch_id: str) -> BatchStatus | None:
        result = await self.session.execute(select(Batch.status).where(Batch.id == batch_id))
        return result.scalar_one_or_none()

    async def transition(
        self,
        claim: Claim,
        from_statuses: Sequence[BatchStatus] | None = None,
        /,
        *,
        status: BatchStatus | None = None,
        **values,
    ) -> bool:
        """Guarded status change to `status` from one of `from_statuses` (by default, from any
        status BATCH_MOVES lets move there; a move it does not allow raises ForbiddenBatchMove);
        False if the status moved on (e.g. a cancel arrived). Without `status`, the write only
        needs the batch still in one of `from_statuses`."""
        if status is None:
            if not from_statuses:
                raise ValueError("A write with no status change names the statuses it is guarded on.")
            return await self._fenced_update(claim, Batch.status.in_(list(from_statuses)), **values)
        return await self._fenced_update(claim, _moving(status, from_statuses), status=status, **values)

    async def fail_unfinished(self, batch_id: str, status: BatchStatus, now: int, errors: list[dict]) -> bool:
        """`status` -> failed, whoever holds the batch (the dead letter): the lease goes and the
        fence moves, so a step still running anywhere writes nothing more. False if the batch
        moved on meanwhile."""
        result = await self.session.execute(
            update(Batch)
            .where(Batch.id == batch_id, _moving(BatchStatus.FAILED, (status,)))
            .values(
                status=BatchStatus.FAILED,
                failed_at=now,
                errors=errors,
                lease_owner=None,
                lease_expires_at=None,
                fence=Batch.fence + 1,
            )
        )
        return rowcount(result) == 1

    async def ordered_inputs(self) -> AsyncIterator[tuple[str, str]]:
        """(project, blob id) of every running batch's prompt-ordered copy of its input."""
        result = await self.session.stream(
            select(Batch.project, Batch.ordered_input).where(Batch.ordered_input.is_not(None))
        )
        async for project, blob_id in result:
            if blob_id is not None:
                yield project, blob_id

    async def finish_running(self, batch_id: str, now: int) -> bool:
        """in_progress -> finalizing once every shard is done; True for the one caller that moved it."""
        unfinished_shard = exists().where(BatchShard.batch_id == Batch.id, BatchShard.status != ShardStatus.DONE)
        result = await self.session.execute(
            update(Batch)
            .where(Batch.id == batch_id, _moving(BatchStatus.FINALIZING, (BatchStatus.IN_PROGRESS,)), ~unfinished_shard)
            .values(status=BatchStatus.FINALIZING, finalizing_at=now)
        )
        return rowcount(result) == 1

    # -- results by reference (app/background/exporter.py) ------------------------------------

    async def due_exports(self, now: float, limit: int) -> list[Batch]:
        """Ended batches whose export is pending and due (no attempt holds it), oldest first."""
        result = await self.session.execute(
            select(Batch)
            .where(
                Batch.export_status == ExportStatus.PENDING,
                Batch.status.in_(list(TERMINAL_BATCH_STATUSES)),
                Batch.deleted_at.is_(None),
                or_(Batch.export_next_at.is_(None), Batch.export_next_at <= now),
            )
            .order_by(Batch.seq)
            .limit(limit)
        )
        return list(result.scalars())

    async def claim_export(self, batch_id: str, attempts: int, now: float, until: float) -> bool:
        """Take the next attempt at the batch's export (its `attempts`-th so far, as read): held
        until `until`, so no other replica makes it meanwhile. False if another one took it."""
        result = await self.session.execute(
            update(Batch)
            .where(
                Batch.id == batch_id,
                Batch.export_status == ExportStatus.PENDING,
                Batch.export_attempts == attempts,
                or_(Batch.export_next_at.is_(None), Batch.export_next_at <= now),
            )
            .values(export_attempts=attempts + 1, export_next_at=until)
        )
        return rowcount(result) == 1

    async def finish_export(
        self, batch_id: str, attempt: int, *, status: ExportStatus, error: dict | None, next_at: float | None
    ) -> bool:
        """Record attempt number `attempt`'s outcome (False if it no longer holds the export)."""
        result = await self.session.execute(
            update(Batch)
            .where(Batch.id == batch_id, Batch.export_status == ExportStatus.PENDING, Batch.export_attempts == attempt)
            .values(export_status=status, export_error=error, export_next_at=next_at)
        )
        return rowcount(result) == 1


__all__ = ["BatchFilters", "BatchRepository", "Claim", "LeaseLost", "LineRow"]
