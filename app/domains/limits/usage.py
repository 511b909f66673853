"""The Usage API's rules: OpenAI's query parameters, time buckets and pages over the per-minute
usage that checkpoints record (repositories/usage.py). The Costs API (services/costs.py) reads
the same rows through the same window rules."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from app.core.endpoints import USAGE_AUDIO_TRANSCRIPTIONS, USAGE_COMPLETIONS
from app.core.errors import InvalidRequest, MissingParameter
from app.db.repositories.usage import GROUP_COLUMNS, UsageQuery, UsageRepository
from app.domains.limits.usage_schemas import (
    AudioTranscriptionsUsageResult,
    CompletionsUsageResult,
    EmbeddingsUsageResult,
    UsageBucket,
    UsagePage,
)

# bucket_width -> (seconds, default limit, maximum limit), as OpenAI's.
BUCKET_WIDTHS = {"1m": (60, 60, 1440), "1h": (3600, 24, 168), "1d": (86400, 7, 31)}
# Times past this (the year 5138) are refused, not handed to a BIGINT column.
MAX_UNIX_SECONDS = 10**11
NO_USERS = "batchd has API keys and projects but no users: filter by 'api_key_ids' or 'project_ids' instead."


@dataclass(frozen=True)
class UsageParams:
    """The query parameters, as given (lists may be sent as `name=a&name=b` or `name[]=a`)."""

    start_time: str | None
    end_time: str | None = None
    bucket_width: str | None = None
    group_by: tuple[str, ...] = ()
    project_ids: tuple[str, ...] = ()
    api_key_ids: tuple[str, ...] = ()
    user_ids: tuple[str, ...] = ()
    models: tuple[str, ...] = ()
    line_items: tuple[str, ...] = ()
    batch: str | None = None
    limit: str | None = None
    page: str | None = None

    @classmethod
    def from_query(cls, get: Callable[[str], str | None], getlist: Callable[[str], list[str]]) -> UsageParams:
        def listed(name: str) -> tuple[str, ...]:
            return tuple(v for key in (name, f"{name}[]") for v in getlist(key) if v)

        return cls(
            start_time=get("start_time"),
            end_time=get("end_time"),
            bucket_width=get("bucket_width"),
            group_by=listed("group_by"),
            project_ids=listed("project_ids"),
            api_key_ids=listed("api_key_ids"),
            user_ids=listed("user_ids"),
            models=listed("models"),
            line_items=listed("line_items"),
            batch=get("batch"),
            limit=get("limit"),
            page=get("page"),
        )


@dataclass(frozen=True)
class Window:
    """The buckets of one page: their width, starts, and the time range they cover."""

    width: int
    buckets: list[int]
    start: int  # inclusive: the later of start_time and the page's first bucket
    end: int  # exclusive: the earlier of end_time and the page's last bucket's end
    next_page: int | None


def _int(name: str, value: str, minimum: int = 0, maximum: int = MAX_UNIX_SECONDS) -> int:
    try:
        number = int(value)
    except ValueError:
        raise InvalidRequest(f"'{name}' must be an integer.", param=name) from None
    if not minimum <= number <= maximum:
        raise InvalidRequest(f"'{name}' must be between {minimum} and {maximum}.", param=name)
    return number


def page_window(params: UsageParams, widths: dict[str, tuple[int, int, int]] = BUCKET_WIDTHS) -> Window:
    """The page's buckets from `start_time` (aligned down to the bucket width) to `end_time`;
    `page` is a bucket start returned as `next_page`, so it must be aligned and in range."""
    if params.start_time is None:
        raise MissingParameter("start_time")
    start = _int("start_time", params.start_time)
    end = _int("end_time", params.end_time) if params.end_time is not None else int(time.time()) + 1
    width_name = params.bucket_width or "1d"
    if width_name not in widths:
        raise InvalidRequest(f"'bucket_width' must be one of {', '.join(widths)}.", param="bucket_width")
    width, default_limit, max_limit = widths[width_name]
    limit = _int("limit", params.limit, 1, max_limit) if params.limit is not None else default_limit
    first = start // width * width
    if params.page:
        page = _int("page", params.page)
        if page % width or page < first:
            raise InvalidRequest(
                f"Invalid 'page': pass the 'next_page' of the previous response (a {width_name} bucket start).",
                param="page",
            )
        first = page
    buckets = [b for b in range(first, first + limit * width, width) if b < end]
    page_end = buckets[-1] + width if buckets else first
    return Window(width, buckets, max(start, first), min(end, page_end), page_end if page_end < end else None)


def check_grouping(params: UsageParams, allowed: tuple[str, ...]) -> None:
    """Refuse what batchd cannot answer (never answer it as if unfiltered)."""
    if params.user_ids:
        raise InvalidRequest(f"Invalid 'user_ids': {NO_USERS}", param="user_ids")
    for name in params.group_by:
        if name not in allowed:
            raise InvalidRequest(f"Invalid group_by {name!r}: batchd groups by {', '.join(allowed)}.", param="group_by")


async def usage_page(session: AsyncSession, kind: str, params: UsageParams) -> UsagePage:
    """One page of buckets, empty buckets included, as OpenAI answers."""
    allowed = tuple(name for name in GROUP_COLUMNS if kind != USAGE_AUDIO_TRANSCRIPTIONS or name != "batch")
    check_grouping(params, allowed)
    if params.batch not in (None, "true", "false"):
        raise InvalidRequest("'batch' must be true or false.", param="batch")
    window = page_window(params)
    rows: list[dict[str, Any]] = []
    if window.buckets and params.batch != "false":  # every line batchd runs is batch work
        query = UsageQuery(
            kinds=(kind,),
            start=window.start,
            end=window.end,
            bucket_seconds=window.width,
            group_by=params.group_by,
            projects=params.project_ids,
            models=params.models,
            api_keys=params.api_key_ids,
        )
        rows = await UsageRepository(session).sums(query)
    by_bucket: dict[int, list[Any]] = {b: [] for b in window.buckets}
    for row in rows:
        by_bucket[int(row["bucket"])].append(_result(kind, row, params.group_by))
    return UsagePage(
        data=[UsageBucket(start_time=b, end_time=b + window.width, results=by_bucket[b]) for b in window.buckets],
        has_more=window.next_page is not None,
        next_page=None if window.next_page is None else str(window.next_page),
    )


def _result(kind: str, row: dict[str, Any], group_by: tuple[str, ...]) -> Any:
    grouped = {"project_id": row.get("project_id"), "api_key_id": row.get("api_key_id"), "model": row.get("model")}
    if kind == USAGE_AUDIO_TRANSCRIPTIONS:
        return AudioTranscriptionsUsageResult(
            seconds=int(row["seconds"]), num_model_requests=int(row["requests"]), **grouped
        )
    batched = {"batch": True if "batch" in group_by else None, "batch_id": row.get("batch")}
    if kind == USAGE_COMPLETIONS:
        return CompletionsUsageResult(
            input_tokens=int(row["input_tokens"]),
            output_tokens=int(row["output_tokens"]),
            input_cached_tokens=int(row["cached_tokens"]),
            num_model_requests=int(row["requests"]),
            **grouped,
            **batched,
        )
    return EmbeddingsUsageResult(
        input_tokens=int(row["input_tokens"]), num_model_requests=int(row["requests"]), **grouped, **batched
    )
