"""Models API wire models, named as OpenAI's (openai-python `types/model.py`), with batchd's
read-only additions about the engine behind each model."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel

from app.core.statuses import EngineState
from app.schemas.common import LiteralOf


class Model(BaseModel):
    id: str
    object: Literal["model"] = "model"
    created: int
    owned_by: str
    # A LoRA adapter's base model (as `vllm serve` lists adapters); null for a model.
    parent: str | None = None
    # batchd's additions (read-only; the dashboard's models page shows them).
    engine_state: Annotated[str, LiteralOf(EngineState)]
    # True while its engine is loaded and takes lines (false while it waits to be loaded on demand).
    loaded: bool
    lines_in_flight: int
    lines_waiting: int
    max_lines_in_flight: int


class ModelList(BaseModel):
    object: Literal["list"] = "list"
    data: list[Model]
