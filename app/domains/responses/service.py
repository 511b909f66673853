"""Background Responses on batchd's batches: `POST /v1/responses` with `background: true` is
written as a one-line batch of its own API (`api = "response"`) whose line is the request on
`/v1/responses`, so validation, shards, leases, replicas, fair share, limits, usage and costs run
it as any batch; create, retrieve, cancel and delete read and move that batch.

The short-deadline lane: the batch is due (`due_at`) `background_response_deadline_seconds` after
it is created. The scheduler runs each project's batches earliest deadline first and lines at risk
of missing theirs ahead of fair share (app/scheduling/), so a background response goes ahead of
the project's large batches and, once near its deadline, ahead of other projects' too. Passing
that deadline ends nothing: the batch's hard expiry (`expires_at`) is
`background_response_expiry_seconds` after creation, and one not finished by then ends `failed`
(`batch_expired`), as an expired batch's lines do."""

from __future__ import annotations

import time
import uuid
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from app.core.batch_kinds import RESPONSE_KIND
from app.core.config import Settings
from app.core.endpoints import RESPONSES
from app.core.errors import Conflict, InvalidRequest
from app.core.statuses import TERMINAL_BATCH_STATUSES, BatchStatus
from app.db.models import Batch
from app.domains.limits.quotas import check_batch_create
from app.domains.lookup import RESPONSE, get_or_404
from app.domains.responses.one_line import delete_with_files, first_line, queue_one_line, request_object, result_of
from app.domains.responses.repository import BackgroundResponseRepository
from app.domains.responses.schemas import ResponseCreateParams
from app.domains.responses.view import response_object
from app.schemas.common import validated
from app.storage.base import BlobStore

ONLINE_REFUSED = (
    "batchd is not an online server: it runs background responses (`background: true`, then poll "
    'GET /v1/responses/{response_id}) and flex ones (`service_tier: "flex"`: the call waits for the '
    "response to run through the batch queue). Send online traffic to `vllm serve`."
)
# The request's fields that are about how batchd answers it, not what the engine runs.
_NOT_FOR_THE_ENGINE = ("background", "stream")


def new_response_id() -> str:
    return f"resp_{uuid.uuid4().hex}"


class BackgroundResponseService:
    def __init__(self, session: AsyncSession, store: BlobStore, settings: Settings) -> None:
        self.session = session
        self.store = store
        self.settings = settings
        self.repo = BackgroundResponseRepository(session)

    async def create(self, project: str, raw_body: bytes, *, api_key_id: str | None = None) -> dict[str, Any]:
        """Check the request (nothing is stored when it is refused), write it as the batch's
        one-line input file and queue the batch; the Response, `queued`."""
        request = self._request(raw_body)
        await check_batch_create(self.session, self.settings, project)
        body = {name: value for name, value in request.items() if name not in _NOT_FOR_THE_ENGINE}
        batch = await queue_one_line(
            self.session,
            self.store,
            self.settings,
            self.repo,
            batch_id=new_response_id(),
            kind=RESPONSE_KIND,
            project=project,
            endpoint=RESPONSES,
            body=body,
            api_key_id=api_key_id,
        )
        return response_object(batch, request, started=False, result=None)

    @staticmethod
    def _request(raw_body: bytes) -> dict[str, Any]:
        request = request_object(raw_body)
        if request.get("background") is not True:
            raise InvalidRequest(ONLINE_REFUSED, param="background", code="unsupported_value")
        stream = request.get("stream")
        if stream is not None and stream is not False:  # by identity: 0 == False, and is not a boolean
            raise InvalidRequest(
                "Background responses are not streamed here (`stream` must be false or left out): "
                "poll GET /v1/responses/{response_id}.",
                param="stream",
                code="unsupported_value",
            )
        validated(ResponseCreateParams, request)
        return request

    async def get(self, project: str, response_id: str) -> dict[str, Any]:
        return await self._view(await self._batch(project, response_id))

    async def _batch(self, project: str, response_id: str) -> Batch:
        return await get_or_404(self.repo, project, response_id, RESPONSE)

    async def _view(self, batch: Batch) -> dict[str, Any]:
        request = await first_line(self.session, self.store, batch.project, batch.input_file_id)
        body = request.get("body") if isinstance(request, dict) else None
        started = batch.status == BatchStatus.IN_PROGRESS and await self.repo.started(batch.id)
        result = await result_of(self.session, self.store, batch) if batch.status == BatchStatus.COMPLETED else None
        return response_object(
            batch, body if isinstance(body, dict) else {"model": batch.model}, started=started, result=result
        )

    async def cancel(self, project: str, response_id: str) -> dict[str, Any]:
        """A queued or running response is `cancelled` at once (its line is stopped, its result
        dropped); one that has ended is returned as it is, so cancelling twice is harmless."""
        batch = await self._batch(project, response_id)
        if batch.status not in TERMINAL_BATCH_STATUSES and batch.status != BatchStatus.CANCELLING:
            await self.repo.request_cancel(project, batch.id, int(time.time()))
            await self.session.refresh(batch)
        return await self._view(batch)

    async def delete(self, project: str, response_id: str) -> str:
        """Delete an ended response with its request and result files. The batch becomes a
        tombstone, as a deleted batch does."""
        batch = await self._batch(project, response_id)
        if batch.status not in TERMINAL_BATCH_STATUSES:
            raise Conflict(
                f"Response {response_id} cannot be deleted while it is queued or running; cancel it first "
                "(a cancelled one can be deleted once its line has stopped, within seconds).",
                param="response_id",
            )
        if not await delete_with_files(self.session, self.store, self.repo, batch):
            raise RESPONSE.not_found(response_id)  # deleted by a request that got there first
        return batch.id
