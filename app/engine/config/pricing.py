"""The price table behind the Costs API: a ``pricing:`` block per model in the config file::

    models:
      my-chat:
        pricing:
          input: 0.15          # per million input tokens (uncached)
          cached_input: 0.075  # per million cached input tokens (default: input)
          output: 0.60         # per million output tokens
          audio_minute: 0.006  # per minute of transcribed audio
          batch_discount: 0.5  # share taken off list prices for batch work (default 0.5, as OpenAI's)
          currency: usd        # lowercase ISO-4217 (default usd)

Every line batchd runs is batch work, so every cost carries the discount. Prices are kept as
decimals: costs are exact sums of usage times price, not float drift. A model without a block
costs nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from app.engine.errors import ModelConfigError

_PRICES = ("input", "cached_input", "output", "audio_minute", "batch_discount")


@dataclass(frozen=True)
class ModelPrice:
    input: Decimal = Decimal(0)
    cached_input: Decimal = Decimal(0)
    output: Decimal = Decimal(0)
    audio_minute: Decimal = Decimal(0)
    batch_discount: Decimal = Decimal("0.5")
    currency: str = "usd"


def check_pricing(where: str, name: str, block: Any) -> ModelPrice:
    """Type-check a ``pricing:`` block; unknown keys and negative prices fail start-up."""
    if not isinstance(block, Mapping):
        raise ModelConfigError(f"{where}: {name}.pricing must be a mapping.")
    values: dict[str, Any] = {}
    for key, value in block.items():
        if key == "currency":
            if not isinstance(value, str) or not value.isalpha():
                raise ModelConfigError(f"{where}: {name}.pricing.currency must be an ISO-4217 code ({value!r}).")
            values[key] = value.lower()
            continue
        if key not in _PRICES:
            allowed = ", ".join([*_PRICES, "currency"])
            raise ModelConfigError(f"{where}: unknown option {name}.pricing.{key} (allowed: {allowed}).")
        if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
            raise ModelConfigError(f"{where}: {name}.pricing.{key} must be a number >= 0 ({value!r}).")
        values[key] = Decimal(str(value))  # str: 0.15 stays 0.15, not its binary neighbour
    if values.get("batch_discount", 0) > 1:
        raise ModelConfigError(f"{where}: {name}.pricing.batch_discount must be between 0 and 1.")
    values.setdefault("cached_input", values.get("input", Decimal(0)))
    return ModelPrice(**values)
