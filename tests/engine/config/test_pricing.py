"""The model config's `pricing:` blocks (the Costs API's price table; no engine needed)."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import pytest

from app.engine.config.catalog import resolve_model_specs
from app.engine.config.pricing import ModelPrice
from app.engine.config.specs import load_prices
from app.engine.errors import ModelConfigError


def test_prices_are_decimals_with_openais_defaults():
    config = {
        "models": {
            "chat": {"upstream": {"urls": ["http://a/v1"]}, "pricing": {"input": 0.15, "output": 0.6}},
            "asr": {"pricing": {"audio_minute": 0.006, "batch_discount": 0, "currency": "EUR"}},
            "plain": {"max_model_len": 256},
        }
    }
    prices = load_prices(config)
    assert prices == {
        "chat": ModelPrice(input=Decimal("0.15"), cached_input=Decimal("0.15"), output=Decimal("0.6")),
        "asr": ModelPrice(audio_minute=Decimal("0.006"), batch_discount=Decimal(0), currency="eur"),
    }
    # A price alone serves nothing; a price beside engine options changes nothing of the engine.
    [chat, plain] = resolve_model_specs([], config, data_dir=Path("/tmp"))
    assert (chat.name, plain.name) == ("chat", "plain")


@pytest.mark.parametrize(
    ("pricing", "message"),
    [
        ({"inputs": 1}, "unknown option chat.pricing.inputs"),
        ({"input": -1}, "chat.pricing.input must be a number >= 0"),
        ({"input": "1"}, "chat.pricing.input must be a number >= 0"),
        ({"batch_discount": 1.5}, "batch_discount must be between 0 and 1"),
        ({"currency": "$"}, "currency must be an ISO-4217 code"),
        ([1], "chat.pricing must be a mapping"),
    ],
)
def test_a_wrong_price_fails_at_start_up(pricing, message):
    with pytest.raises(ModelConfigError, match=message.replace(".", r"\.")):
        load_prices({"models": {"chat": {"pricing": pricing}}})
