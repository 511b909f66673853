"""Flex processing (`service_tier: "flex"`): a synchronous chat, completions, embeddings or
Responses call is written as a one-line batch of its own API (`api = "flex"`) in the same
short-deadline lane as a background response (app/domains/responses/), and the HTTP call waits
for it: the batch row is polled with a short backoff (across replicas: any of them may run it).

A line that has not started within `flex_wait_seconds` is cancelled before it can start and
answered `429 resource_unavailable` with a Retry-After; a client that goes away cancels its line.
Token limits, model permissions, usage and costs are the batch machinery's."""

from __future__ import annotations

import asyncio
import math
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from app.core import jsonbody
from app.core.batch_kinds import FLEX_KIND
from app.core.config import Settings
from app.core.endpoints import CHAT_COMPLETIONS, COMPLETIONS, EMBEDDINGS, RESPONSES
from app.core.errors import ApiError, InvalidRequest, NotFound, TooManyRequests
from app.core.line_errors import LineErrorCode
from app.core.statuses import TERMINAL_BATCH_STATUSES, BatchStatus
from app.db.engine import Database
from app.db.models import Batch
from app.db.unit_of_work import unit_of_work
from app.domains.limits.quotas import check_batch_create
from app.domains.responses.flex_repository import FlexRepository
from app.domains.responses.flex_schemas import (
    FlexChatCompletionParams,
    FlexCompletionParams,
    FlexEmbeddingParams,
    FlexResponseParams,
)
from app.domains.responses.one_line import delete_with_files, queue_one_line, request_object, result_of
from app.schemas.common import validated
from app.storage.base import BlobStore

FLEX = "flex"
BODY_MODELS: dict[str, type[BaseModel]] = {
    CHAT_COMPLETIONS: FlexChatCompletionParams,
    COMPLETIONS: FlexCompletionParams,
    EMBEDDINGS: FlexEmbeddingParams,
    RESPONSES: FlexResponseParams,
}
ONLINE_REFUSED = (
    'batchd answers {endpoint} at flex priority only (`service_tier: "flex"`): it is not an online server. '
    'Send online traffic to `vllm serve`, or set `service_tier` to "flex" (or use the Batch API).'
)
# The request's fields that are about how batchd answers it, not what the engine runs.
_NOT_FOR_THE_ENGINE = ("service_tier", "stream", "stream_options", "background")
_FIRST_POLL, _LONGEST_POLL = 0.02, 0.5


def is_flex(raw_body: bytes) -> bool:
    """Whether a body asks for the flex tier (a JSON object with `service_tier: "flex"`, not a
    background response: that one is queued and polled)."""
    try:
        request = jsonbody.loads(raw_body)
    except ValueError:
        return False
    return isinstance(request, dict) and request.get("service_tier") == FLEX and request.get("background") is not True


@dataclass
class FlexAnswer:
    """What the engine answered: its status and body (`service_tier: "flex"` set on a success);
    `request` is the request as the client sent it (its `stream` and `stream_options`)."""

    status_code: int
    body: dict[str, Any]
    request: dict[str, Any]

    @property
    def stream(self) -> bool:
        return self.status_code == 200 and self.request.get("stream") is True


class ClientGone(Exception):
    """The client disconnected while its line waited or ran: the line was cancelled."""


class FlexService:
    def __init__(
        self, db: Database, store: BlobStore, settings: Settings, wake: Callable[[str | None], Awaitable[None]]
    ) -> None:
        self.db = db
        self.store = store
        self.settings = settings
        self.wake = wake

    async def answer(
        self,
        endpoint: str,
        project: str,
        raw_body: bytes,
        *,
        api_key_id: str | None,
        is_disconnected: Callable[[], Awaitable[bool]],
    ) -> FlexAnswer:
        request = self.request(endpoint, raw_body)
        batch_id = await self._create(endpoint, project, request, api_key_id)
        await self.wake(None)
        batch = await self._wait(project, batch_id, is_disconnected)
        return await self._answer_of(batch, request)

    @staticmethod
    def request(endpoint: str, raw_body: bytes) -> dict[str, Any]:
        """The request, checked; a 400 that says where online traffic goes without the flex tier."""
        request = request_object(raw_body)
        if request.get("service_tier") != FLEX:
            message = ONLINE_REFUSED.format(endpoint=endpoint)
            raise InvalidRequest(message, param="service_tier", code="unsupported_value")
        validated(BODY_MODELS[endpoint], request)
        return request

    async def _create(self, endpoint: str, project: str, request: dict[str, Any], api_key_id: str | None) -> str:
        body = {name: value for name, value in request.items() if name not in _NOT_FOR_THE_ENGINE}
        async with unit_of_work(self.db.write_sessions) as session:
            await check_batch_create(session, self.settings, project)
            batch = await queue_one_line(
                session,
                self.store,
                self.settings,
                FlexRepository(session),
                batch_id=f"flex_{uuid.uuid4().hex}",
                kind=FLEX_KIND,
                project=project,
                endpoint=endpoint,
                body=body,
                api_key_id=api_key_id,
            )
        return batch.id

    async def _wait(self, project: str, batch_id: str, is_disconnected: Callable[[], Awaitable[bool]]) -> Batch:
        """The batch once it has ended; a 429 if its line could not start in time."""
        loop = asyncio.get_running_loop()
        start_by = loop.time() + self.settings.flex_wait_seconds
        delay, started = _FIRST_POLL, False
        while True:
            async with self.db.read() as session:
                state = await FlexRepository(session).state(batch_id)
            if state is None:
                raise NotFound(f"The flex request {batch_id} was deleted while it waited.")
            batch, started = state[0], started or state[1]
            if batch.status in TERMINAL_BATCH_STATUSES:
                return batch
            if await is_disconnected():
                await self._cancel(project, batch_id, only_unstarted=False)
                raise ClientGone(batch_id)
            if not started and batch.status != BatchStatus.CANCELLING and loop.time() >= start_by:
                if await self._cancel(project, batch_id, only_unstarted=True):
                    retry_after = max(1, math.ceil(self.settings.flex_wait_seconds))
                    raise TooManyRequests(
                        f"The flex request could not start within {self.settings.flex_wait_seconds:g} s "
                        "(BATCHD_FLEX_WAIT_SECONDS): batchd is busy. Retry later, or use the Batch API.",
                        retry_after=retry_after,
                        code="resource_unavailable",
                    )
                started = True  # it started meanwhile: wait for its result
            await asyncio.sleep(delay)
            delay = min(delay * 1.5, _LONGEST_POLL)

    async def _cancel(self, project: str, batch_id: str, *, only_unstarted: bool) -> bool:
        now = int(time.time())
        async with self.db.write() as session:
            repo = FlexRepository(session)
            if only_unstarted:
                cancelled = await repo.cancel_unstarted(project, batch_id, now)
            else:
                cancelled = await repo.request_cancel(project, batch_id, now)
        if cancelled:
            await self.wake(batch_id)
        return cancelled

    async def _answer_of(self, batch: Batch, request: dict[str, Any]) -> FlexAnswer:
        if batch.status == BatchStatus.FAILED:  # refused at validation (a model, a token limit), or dead-lettered
            first = (batch.errors or [{}])[0]
            code = str(first.get("code") or LineErrorCode.INVALID_REQUEST)
            message = str(first.get("message") or "The request could not run.")
            if code == LineErrorCode.PROCESSING_FAILED:  # the server's failure, not the request's
                raise ApiError(message, code=code)
            refusal = NotFound if code == LineErrorCode.MODEL_NOT_FOUND else InvalidRequest
            raise refusal(message, param=first.get("param"), code=code)
        if batch.status != BatchStatus.COMPLETED:  # cancelled or expired: it did not finish
            raise _unavailable(f"The flex request did not finish ({batch.status}).", self.settings)
        async with self.db.read() as session:
            result = await result_of(session, self.store, batch)
        if result is None:
            raise _unavailable("The flex request's result is no longer available.", self.settings)
        if result.error is not None or not isinstance(result.body, dict):  # batchd's: it never finished
            error = result.error or {}
            raise _unavailable(str(error.get("message") or "The flex request did not finish."), self.settings)
        await self._forget(batch)
        if result.status_code != 200:
            return FlexAnswer(result.status_code or 500, result.body, request)
        return FlexAnswer(200, {**result.body, "service_tier": FLEX}, request)

    async def _forget(self, batch: Batch) -> None:
        """The answered batch becomes a tombstone and its files go (the usage it booked stays):
        a flex request leaves nothing in the project's files."""
        async with unit_of_work(self.db.write_sessions) as session:
            await delete_with_files(session, self.store, FlexRepository(session), batch)


def _unavailable(message: str, settings: Settings) -> ApiError:
    return TooManyRequests(
        message, retry_after=max(1, math.ceil(settings.flex_wait_seconds)), code="resource_unavailable"
    )
