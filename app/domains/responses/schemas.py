"""Background Responses wire shapes (the `openai` client's `types/responses/*`): field names and
values exactly as OpenAI's Response object has them. A Response carries many more fields than
batchd decides (the engine's body, the request's echo): they pass through as they are."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from app.core.statuses import ResponseStatus
from app.schemas.common import LiteralOf


class ResponseCreateParams(BaseModel):
    """The body of `POST /v1/responses`: a Responses API request with `background: true` (the
    service says why another is refused). Its other parameters go to the engine as they are.
    Strict: a JSON value of another type (`"stream": 0`, `"max_output_tokens": "5"`) is refused,
    not converted."""

    model_config = ConfigDict(extra="allow", strict=True)

    model: str = Field(min_length=1, max_length=256)
    input: str | list[dict[str, Any]]
    background: Literal[True] = Field(
        description='A background response (queued, then polled); `service_tier: "flex"` instead waits for the '
        "response (FlexResponseParams). Online traffic belongs to `vllm serve`."
    )
    instructions: str | None = None
    max_output_tokens: int | None = Field(default=None, ge=1)
    metadata: dict[str, str] | None = None
    stream: Literal[False] | None = Field(default=None, description="Background responses are not streamed.")


class ResponseError(BaseModel):
    code: str
    message: str


class ResponseObject(BaseModel):
    """A background response; `output` and `usage` once it has completed, `error` once failed."""

    model_config = ConfigDict(extra="allow")

    id: str
    object: Literal["response"] = "response"
    created_at: int
    status: Annotated[str, LiteralOf(ResponseStatus)]
    background: bool = True
    model: str
    output: list[dict[str, Any]]
    usage: dict[str, Any] | None
    error: ResponseError | None
    incomplete_details: dict[str, Any] | None


class ResponseDeleted(BaseModel):
    id: str
    object: Literal["response"] = "response"
    deleted: bool = True
