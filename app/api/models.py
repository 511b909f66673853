"""`GET /v1/models` and `GET /v1/models/{model}`: the models this server runs and their engines."""

from __future__ import annotations

from typing import Literal

from fastapi import APIRouter, Request
from pydantic import BaseModel

from app.schemas.common import ERROR_RESPONSES
from app.services.models import find_entry, list_entries

router = APIRouter(prefix="/models", tags=["models"], responses=ERROR_RESPONSES)


class Model(BaseModel):
    id: str
    object: Literal["model"] = "model"
    created: int
    owned_by: str
    # batchd's additions (read-only; the dashboard's models page shows them).
    engine_state: Literal["starting", "ready", "dead", "stopped"]
    lines_in_flight: int
    lines_waiting: int
    max_lines_in_flight: int


class ModelList(BaseModel):
    object: Literal["list"] = "list"
    data: list[Model]


@router.get("", response_model=ModelList)
async def list_models(request: Request) -> ModelList:
    return ModelList(data=[Model(**entry) for entry in await list_entries(request.app.state)])


@router.get("/{model_id:path}", response_model=Model)
async def retrieve_model(model_id: str, request: Request) -> Model:
    """One model (ids may contain `/`, as hub ids do)."""
    return Model(**await find_entry(request.app.state, model_id))
