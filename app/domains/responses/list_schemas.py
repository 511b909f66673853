"""The single requests list (`GET /v1/queue/requests`, batchd's own): the project's background
responses and flex requests, each one-line batch as its lane, status, latency and tokens."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel

from app.core.batch_kinds import RequestLane
from app.core.statuses import ResponseStatus
from app.schemas.common import LiteralOf


class SingleRequestUsage(BaseModel):
    input_tokens: int
    output_tokens: int
    total_tokens: int


class SingleRequest(BaseModel):
    id: str  # the response id (`resp_...`) of a background response; a flex request's `flex_...`
    object: Literal["queue.request"] = "queue.request"
    lane: Annotated[str, LiteralOf(RequestLane)]
    # OpenAI's Response statuses for both lanes (a flex request is never `incomplete`: its result
    # is gone once answered).
    status: Annotated[str, LiteralOf(ResponseStatus)]
    model: str | None
    endpoint: str
    created_at: int
    ended_at: int | None  # null while queued or running
    seconds: int | None  # from create to end, whole seconds; null while queued or running
    usage: SingleRequestUsage
