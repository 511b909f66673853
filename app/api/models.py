"""`GET /v1/models` and `GET /v1/models/{model}`: the models this server runs and their engines."""

from __future__ import annotations

from fastapi import APIRouter, Request

from app.schemas.common import ERROR_RESPONSES
from app.schemas.models import Model, ModelList
from app.services.models import find_entry, list_entries

router = APIRouter(prefix="/models", tags=["models"], responses=ERROR_RESPONSES)


@router.get("", response_model=ModelList)
async def list_models(request: Request) -> ModelList:
    return ModelList(data=[Model(**entry) for entry in await list_entries(request.app.state)])


@router.get("/{model_id:path}", response_model=Model)
async def retrieve_model(model_id: str, request: Request) -> Model:
    """One model (ids may contain `/`, as hub ids do)."""
    return Model(**await find_entry(request.app.state, model_id))
