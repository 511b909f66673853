"""The Costs API's rules (`/v1/organization/costs`): the usage rows of every kind, priced by
the model config's price table (app/engine/config/pricing.py), in daily buckets.

Line items are `<model>, input` (uncached input tokens), `<model>, cached input`, `<model>,
output` and `<model>, audio` (seconds), each at its list price less the model's batch
discount. Amounts are summed as decimals, so a cost is exactly its usage times its price."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator, Mapping
from decimal import Decimal
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from app.core.endpoints import USAGE_AUDIO_TRANSCRIPTIONS, USAGE_COMPLETIONS, USAGE_EMBEDDINGS
from app.core.errors import InvalidRequest
from app.db.repositories.usage import UsageQuery, UsageRepository
from app.domains.limits.usage import UsageParams, check_grouping, page_window
from app.domains.limits.usage_schemas import CostAmount, CostsResult, UsageBucket, UsagePage
from app.engine.config.pricing import ModelPrice

# Only daily buckets, as OpenAI's: (seconds, default limit, maximum limit).
COST_BUCKET_WIDTHS = {"1d": (86400, 7, 180)}
COST_GROUPS = ("project_id", "api_key_id", "line_item")
MILLION = Decimal(1_000_000)
UNPRICED = ModelPrice()


def line_items(model: str, row: Mapping[str, Any], price: ModelPrice) -> Iterator[tuple[str, int, str, Decimal]]:
    """(line item, quantity, unit, amount) of one usage row of `model`; quantities of zero are left out."""
    kept = 1 - price.batch_discount
    cached = int(row["cached_tokens"])
    tokens = (
        ("input", int(row["input_tokens"]) - cached, price.input),
        ("cached input", cached, price.cached_input),
        ("output", int(row["output_tokens"]), price.output),
    )
    for name, quantity, per_million in tokens:
        if quantity:
            yield f"{model}, {name}", quantity, "tokens", quantity * per_million / MILLION * kept
    seconds = int(row["seconds"])
    if seconds:
        yield f"{model}, audio", seconds, "duration_seconds", seconds * price.audio_minute / 60 * kept


async def costs_page(session: AsyncSession, params: UsageParams, prices: Mapping[str, ModelPrice]) -> UsagePage:
    """One page of daily cost buckets at the prices the model config file said at start."""
    check_grouping(params, COST_GROUPS)
    if params.models or params.batch is not None:
        name = "models" if params.models else "batch"
        raise InvalidRequest(
            f"Invalid '{name}': the Costs API filters by project_ids, api_key_ids and line_items.", param=name
        )
    window = page_window(params, COST_BUCKET_WIDTHS)
    grouped = [name for name in params.group_by if name != "line_item"]
    rows: list[dict[str, Any]] = []
    if window.buckets:
        query = UsageQuery(
            kinds=(USAGE_COMPLETIONS, USAGE_EMBEDDINGS, USAGE_AUDIO_TRANSCRIPTIONS),
            start=window.start,
            end=window.end,
            bucket_seconds=window.width,
            group_by=(*grouped, "model"),
            projects=params.project_ids,
            api_keys=params.api_key_ids,
        )
        rows = await UsageRepository(session).sums(query)
    by_line = "line_item" in params.group_by
    totals: dict[tuple, list] = defaultdict(lambda: [Decimal(0), 0])
    for row in rows:
        price = prices.get(row["model"], UNPRICED)
        for item, quantity, unit, amount in line_items(row["model"], row, price):
            if params.line_items and item not in params.line_items:
                continue
            key = (
                int(row["bucket"]),
                price.currency,
                *(row.get(name) for name in grouped),
                (item, unit) if by_line else None,
            )
            totals[key][0] += amount
            totals[key][1] += quantity
    by_bucket: dict[int, list[CostsResult]] = {b: [] for b in window.buckets}
    for key in sorted(totals, key=lambda k: tuple("" if v is None else str(v) for v in k)):
        bucket, currency, *values, line = key
        amount, quantity = totals[key]
        itemized = {} if line is None else {"line_item": line[0], "quantity_unit": line[1], "quantity": quantity}
        amount_of = CostAmount(value=float(amount), currency=currency)
        by_bucket[bucket].append(CostsResult(amount=amount_of, **dict(zip(grouped, values, strict=True)), **itemized))
    return UsagePage(
        data=[UsageBucket(start_time=b, end_time=b + window.width, results=by_bucket[b]) for b in window.buckets],
        has_more=window.next_page is not None,
        next_page=None if window.next_page is None else str(window.next_page),
    )
