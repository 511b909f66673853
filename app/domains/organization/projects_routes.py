"""The Administration API's projects and their service accounts and API keys
(`/v1/organization/projects/...`, as `client.admin.organization.projects.*` calls them)."""

from __future__ import annotations

from fastapi import APIRouter

from app.api.deps import WakeDep
from app.domains.organization.deps import (
    ADMIN_RESPONSES,
    AdminDep,
    Cursor,
    JsonObject,
    Limit,
    OrgKeysDep,
    OrgProjectsDep,
)
from app.domains.organization.org_keys import service_account_object
from app.domains.organization.org_projects import project_object
from app.domains.organization.schemas import (
    ProjectApiKeyDeleted,
    ProjectApiKeyObject,
    ProjectCreateParams,
    ProjectObject,
    ProjectUpdateParams,
    ServiceAccountCreated,
    ServiceAccountCreateParams,
    ServiceAccountDeleted,
    ServiceAccountObject,
)
from app.schemas.common import ListPage, json_body, validated

router = APIRouter(prefix="/organization/projects", tags=["admin"], responses=ADMIN_RESPONSES, dependencies=[AdminDep])


@router.post("", response_model=ProjectObject, openapi_extra=json_body(ProjectCreateParams))
async def create_project(projects: OrgProjectsDep, body: JsonObject = None) -> ProjectObject:
    """A new project (`proj_...`); give it keys with a service account."""
    return project_object(await projects.create(validated(ProjectCreateParams, body or {})))


@router.get("", response_model=ListPage[ProjectObject])
async def list_projects(
    projects: OrgProjectsDep, after: Cursor = None, limit: Limit = 20, include_archived: bool = False
) -> ListPage[ProjectObject]:
    return await projects.page(include_archived=include_archived, after=after, limit=limit)


@router.get("/{project_id}", response_model=ProjectObject)
async def retrieve_project(project_id: str, projects: OrgProjectsDep) -> ProjectObject:
    return project_object(await projects.get(project_id))


@router.post(
    "/{project_id}", response_model=ProjectObject, openapi_extra=json_body(ProjectUpdateParams, required=False)
)
async def update_project(project_id: str, projects: OrgProjectsDep, body: JsonObject = None) -> ProjectObject:
    """Rename an active project, or set its retention period (`retention_days`, batchd's)."""
    return project_object(await projects.update(project_id, validated(ProjectUpdateParams, body or {})))


@router.post("/{project_id}/archive", response_model=ProjectObject)
async def archive_project(project_id: str, projects: OrgProjectsDep, wake_worker: WakeDep) -> ProjectObject:
    """Its keys stop working at once; its queued and running batches are cancelled."""
    row, cancelled = await projects.archive(project_id)
    if cancelled:
        wake_worker()
    return project_object(row)


@router.post(
    "/{project_id}/service_accounts",
    response_model=ServiceAccountCreated,
    openapi_extra=json_body(ServiceAccountCreateParams),
)
async def create_service_account(project_id: str, keys: OrgKeysDep, body: JsonObject = None) -> ServiceAccountCreated:
    """A service account with one new project API key (its value shown this once)."""
    return await keys.create_service_account(project_id, validated(ServiceAccountCreateParams, body or {}).name)


@router.get("/{project_id}/service_accounts", response_model=ListPage[ServiceAccountObject])
async def list_service_accounts(
    project_id: str, keys: OrgKeysDep, after: Cursor = None, limit: Limit = 20
) -> ListPage[ServiceAccountObject]:
    return await keys.service_accounts(project_id, after, limit)


@router.get("/{project_id}/service_accounts/{service_account_id}", response_model=ServiceAccountObject)
async def retrieve_service_account(project_id: str, service_account_id: str, keys: OrgKeysDep) -> ServiceAccountObject:
    return service_account_object(await keys.service_account(project_id, service_account_id))


@router.delete("/{project_id}/service_accounts/{service_account_id}", response_model=ServiceAccountDeleted)
async def delete_service_account(project_id: str, service_account_id: str, keys: OrgKeysDep) -> ServiceAccountDeleted:
    """Revokes its key."""
    await keys.delete_service_account(project_id, service_account_id)
    return ServiceAccountDeleted(id=service_account_id)


@router.get("/{project_id}/api_keys", response_model=ListPage[ProjectApiKeyObject])
async def list_project_keys(
    project_id: str, keys: OrgKeysDep, after: Cursor = None, limit: Limit = 20
) -> ListPage[ProjectApiKeyObject]:
    return await keys.project_keys(project_id, after, limit)


@router.get("/{project_id}/api_keys/{api_key_id}", response_model=ProjectApiKeyObject)
async def retrieve_project_key(project_id: str, api_key_id: str, keys: OrgKeysDep) -> ProjectApiKeyObject:
    return await keys.project_key(project_id, api_key_id)


@router.delete("/{project_id}/api_keys/{api_key_id}", response_model=ProjectApiKeyDeleted)
async def delete_project_key(project_id: str, api_key_id: str, keys: OrgKeysDep) -> ProjectApiKeyDeleted:
    """Revokes the key (as `batchd keys revoke`), from the next request on every replica."""
    await keys.delete_project_key(project_id, api_key_id)
    return ProjectApiKeyDeleted(id=api_key_id)
