"""The Usage API's rules: OpenAI's query parameters, time buckets and pages over the per-minute
usage that checkpoints record (repositories/usage.py)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from app.core.endpoints import USAGE_COMPLETIONS
from app.core.errors import InvalidRequest, MissingParameter
from app.db.repositories.usage import GROUP_COLUMNS, UsageQuery, UsageRepository
from app.schemas.usage import CompletionsUsageResult, EmbeddingsUsageResult, UsageBucket, UsagePage

# bucket_width -> (seconds, default limit, maximum limit), as OpenAI's.
BUCKET_WIDTHS = {"1m": (60, 60, 1440), "1h": (3600, 24, 168), "1d": (86400, 7, 31)}


@dataclass(frozen=True)
class UsageParams:
    """The query parameters, as given (lists may be sent as `name=a&name=b` or `name[]=a`)."""

    start_time: str | None
    end_time: str | None = None
    bucket_width: str | None = None
    group_by: tuple[str, ...] = ()
    project_ids: tuple[str, ...] = ()
    models: tuple[str, ...] = ()
    batch: str | None = None
    limit: str | None = None
    page: str | None = None

    @classmethod
    def from_query(cls, get: Callable[[str], str | None], getlist: Callable[[str], list[str]]) -> UsageParams:
        def listed(name: str) -> tuple[str, ...]:
            return tuple(v for key in (name, f"{name}[]") for v in getlist(key) if v)

        scalars = ("start_time", "end_time", "bucket_width", "batch", "limit", "page")
        return cls(
            **{name: get(name) for name in scalars},
            group_by=listed("group_by"),
            project_ids=listed("project_ids"),
            models=listed("models"),
        )


def _int(name: str, value: str, minimum: int = 0) -> int:
    try:
        number = int(value)
    except ValueError:
        raise InvalidRequest(f"'{name}' must be an integer.", param=name) from None
    if number < minimum:
        raise InvalidRequest(f"'{name}' must be at least {minimum}.", param=name)
    return number


async def usage_page(session: AsyncSession, kind: str, params: UsageParams) -> UsagePage:
    """One page of buckets from `start_time` (aligned down to the bucket width) to `end_time`,
    empty buckets included, as OpenAI answers; `page` is the next bucket's start."""
    if params.start_time is None:
        raise MissingParameter("start_time")
    start = _int("start_time", params.start_time)
    end = _int("end_time", params.end_time) if params.end_time is not None else int(time.time()) + 1
    width_name = params.bucket_width or "1d"
    if width_name not in BUCKET_WIDTHS:
        raise InvalidRequest("'bucket_width' must be one of 1m, 1h, 1d.", param="bucket_width")
    width, default_limit, max_limit = BUCKET_WIDTHS[width_name]
    limit = _int("limit", params.limit, 1) if params.limit is not None else default_limit
    if limit > max_limit:
        raise InvalidRequest(f"'limit' must be at most {max_limit} for bucket_width {width_name}.", param="limit")
    for name in params.group_by:
        if name not in GROUP_COLUMNS:
            raise InvalidRequest(
                f"Invalid group_by {name!r}: batchd groups by {', '.join(GROUP_COLUMNS)}.", param="group_by"
            )
    if params.batch not in (None, "true", "false"):
        raise InvalidRequest("'batch' must be true or false.", param="batch")
    first = _int("page", params.page) if params.page else start // width * width
    buckets = [b for b in range(first, first + limit * width, width) if b < end]
    page_end = buckets[-1] + width if buckets else first
    rows: list[dict[str, Any]] = []
    if buckets and params.batch != "false":  # every line batchd runs is batch work
        query = UsageQuery(
            kind=kind,
            start=max(start, first),
            end=min(end, page_end),
            bucket_seconds=width,
            group_by=params.group_by,
            projects=params.project_ids,
            models=params.models,
        )
        rows = await UsageRepository(session).sums(query)
    by_bucket: dict[int, list[Any]] = {b: [] for b in buckets}
    for row in rows:
        by_bucket[int(row["bucket"])].append(_result(kind, row, params.group_by))
    return UsagePage(
        data=[UsageBucket(start_time=b, end_time=b + width, results=by_bucket[b]) for b in buckets],
        has_more=page_end < end,
        next_page=str(page_end) if page_end < end else None,
    )


def _result(kind: str, row: dict[str, Any], group_by: tuple[str, ...]) -> Any:
    grouped = {
        "project_id": row.get("project_id"),
        "model": row.get("model"),
        "batch": True if "batch" in group_by else None,
        "batch_id": row.get("batch"),
    }
    if kind == USAGE_COMPLETIONS:
        return CompletionsUsageResult(
            input_tokens=int(row["input_tokens"]),
            output_tokens=int(row["output_tokens"]),
            input_cached_tokens=int(row["cached_tokens"]),
            num_model_requests=int(row["requests"]),
            **grouped,
        )
    return EmbeddingsUsageResult(
        input_tokens=int(row["input_tokens"]), num_model_requests=int(row["requests"]), **grouped
    )
