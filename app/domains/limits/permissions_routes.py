"""Which served models a project may use (`/v1/organization/projects/{project_id}/model_permissions`,
as `client.admin.organization.projects.model_permissions.*` calls them)."""

from __future__ import annotations

from fastapi import APIRouter

from app.domains.limits.deps import ModelPermissionsDep
from app.domains.organization.deps import ADMIN_RESPONSES, AdminDep, JsonObject
from app.domains.organization.schemas import ModelPermissionsDeleted, ModelPermissionsObject, ModelPermissionsParams
from app.schemas.common import json_body, validated

router = APIRouter(
    prefix="/organization/projects/{project_id}/model_permissions",
    tags=["admin"],
    responses=ADMIN_RESPONSES,
    dependencies=[AdminDep],
)


@router.get("", response_model=ModelPermissionsObject)
async def retrieve_model_permissions(project_id: str, permissions: ModelPermissionsDep) -> ModelPermissionsObject:
    return await permissions.get(project_id)


@router.post("", response_model=ModelPermissionsObject, openapi_extra=json_body(ModelPermissionsParams))
async def update_model_permissions(
    project_id: str, permissions: ModelPermissionsDep, body: JsonObject = None
) -> ModelPermissionsObject:
    """From the next batch validated, lines naming a model the project may not use fail."""
    return await permissions.set(project_id, validated(ModelPermissionsParams, body or {}))


@router.delete("", response_model=ModelPermissionsDeleted)
async def delete_model_permissions(project_id: str, permissions: ModelPermissionsDep) -> ModelPermissionsDeleted:
    """Every served model again."""
    await permissions.set(project_id, None)
    return ModelPermissionsDeleted()
