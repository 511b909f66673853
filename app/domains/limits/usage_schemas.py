"""Wire shapes of OpenAI's Usage API (`/v1/organization/usage/completions|embeddings|
audio_transcriptions`) and Costs API (`/v1/organization/costs`)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel


class _UsageGroup(BaseModel):
    """What a result is grouped by (null when not grouped by it)."""

    project_id: str | None = None
    user_id: str | None = None
    api_key_id: str | None = None
    model: str | None = None


class _BatchGroup(_UsageGroup):
    # OpenAI's: whether the group is batch work (always, here); set with group_by=batch.
    batch: bool | None = None
    # batchd's addition with group_by=batch: which batch the group is.
    batch_id: str | None = None


class CompletionsUsageResult(_BatchGroup):
    object: Literal["organization.usage.completions.result"] = "organization.usage.completions.result"
    input_tokens: int
    output_tokens: int
    input_cached_tokens: int
    input_audio_tokens: int = 0
    output_audio_tokens: int = 0
    num_model_requests: int


class EmbeddingsUsageResult(_BatchGroup):
    object: Literal["organization.usage.embeddings.result"] = "organization.usage.embeddings.result"
    input_tokens: int
    num_model_requests: int


class AudioTranscriptionsUsageResult(_UsageGroup):
    object: Literal["organization.usage.audio_transcriptions.result"] = "organization.usage.audio_transcriptions.result"
    seconds: int
    num_model_requests: int


class CostAmount(BaseModel):
    value: float
    currency: str


class CostsResult(BaseModel):
    object: Literal["organization.costs.result"] = "organization.costs.result"
    amount: CostAmount
    line_item: str | None = None
    project_id: str | None = None
    api_key_id: str | None = None
    # With group_by=line_item: the tokens (or audio seconds) the line item prices.
    quantity: float | None = None
    quantity_unit: str | None = None


class UsageBucket(BaseModel):
    object: Literal["bucket"] = "bucket"
    start_time: int
    end_time: int
    results: (
        list[CompletionsUsageResult]
        | list[EmbeddingsUsageResult]
        | list[AudioTranscriptionsUsageResult]
        | list[CostsResult]
    )


class UsagePage(BaseModel):
    object: Literal["page"] = "page"
    data: list[UsageBucket]
    has_more: bool
    next_page: str | None
