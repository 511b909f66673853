"""`GET /v1/models`: the models this server runs."""

from __future__ import annotations

from typing import Literal

from fastapi import APIRouter, Request
from pydantic import BaseModel

router = APIRouter(prefix="/models", tags=["models"])


class Model(BaseModel):
    id: str
    object: Literal["model"] = "model"
    created: int
    owned_by: str


class ModelList(BaseModel):
    object: Literal["list"] = "list"
    data: list[Model]


@router.get("", response_model=ModelList)
async def list_models(request: Request) -> ModelList:
    return ModelList(data=[Model(**card) for card in request.app.state.registry.model_cards()])
