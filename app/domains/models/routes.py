"""`GET /v1/models` and `GET /v1/models/{model}`: the models this server runs and their engines."""

from __future__ import annotations

from fastapi import APIRouter

from app.api.deps import RuntimeDep
from app.domains.models.schemas import Model, ModelList
from app.domains.models.service import find_entry, list_entries
from app.schemas.common import ERROR_RESPONSES

router = APIRouter(prefix="/models", tags=["models"], responses=ERROR_RESPONSES)


@router.get("", response_model=ModelList)
async def list_models(runtime: RuntimeDep) -> ModelList:
    entries = await list_entries(runtime.settings, runtime.db, runtime.engines, runtime.worker)
    return ModelList(data=[Model(**entry) for entry in entries])


@router.get("/{model_id:path}", response_model=Model)
async def retrieve_model(model_id: str, runtime: RuntimeDep) -> Model:
    """One model (ids may contain `/`, as hub ids do)."""
    return Model(**await find_entry(runtime.settings, runtime.db, runtime.engines, runtime.worker, model_id))
