"""Flex request bodies (`service_tier: "flex"`): the synchronous routes batchd answers only at
flex priority. batchd reads `service_tier` and `stream`; every other parameter goes to the engine
as it is (the engine's own checks answer them). Strict: a JSON value of another type is refused,
not converted."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

_FLEX = Field(
    description='batchd answers these routes at flex priority only (`"flex"`): it is not an online server; '
    "online traffic belongs to `vllm serve`."
)


class _FlexParams(BaseModel):
    model_config = ConfigDict(extra="allow", strict=True)

    model: str = Field(min_length=1, max_length=256)
    service_tier: Literal["flex"] = _FLEX


class FlexChatCompletionParams(_FlexParams):
    """`POST /v1/chat/completions` at flex priority; `stream: true` answers the finished result as events."""

    messages: list[dict[str, Any]] = Field(min_length=1)
    stream: bool | None = None


class FlexCompletionParams(_FlexParams):
    """`POST /v1/completions` at flex priority (not streamed)."""

    prompt: str | list[Any]
    stream: Literal[False] | None = None


class FlexEmbeddingParams(_FlexParams):
    """`POST /v1/embeddings` at flex priority."""

    input: str | list[Any]


class FlexResponseParams(_FlexParams):
    """`POST /v1/responses` at flex priority (`background` false or left out); `stream: true`
    answers the finished result as events."""

    input: str | list[dict[str, Any]]
    background: Literal[False] | None = None
    stream: bool | None = None
