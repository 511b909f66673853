"""Admin API keys (`/v1/organization/admin_api_keys`, `client.admin.organization.admin_api_keys.*`).
The first one comes from `BATCHD_ADMIN_KEYS` or `batchd keys create --admin`."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Query

from app.domains.organization.deps import ADMIN_RESPONSES, AdminDep, Cursor, JsonObject, Limit, OrgKeysDep
from app.domains.organization.org_keys import admin_key_object
from app.domains.organization.schemas import AdminKeyCreated, AdminKeyCreateParams, AdminKeyDeleted, AdminKeyObject
from app.schemas.common import ListPage, json_body, validated

router = APIRouter(
    prefix="/organization/admin_api_keys", tags=["admin"], responses=ADMIN_RESPONSES, dependencies=[AdminDep]
)


@router.post("", response_model=AdminKeyCreated, openapi_extra=json_body(AdminKeyCreateParams))
async def create_admin_key(keys: OrgKeysDep, body: JsonObject = None) -> AdminKeyCreated:
    """A new admin key (its value shown this once)."""
    return await keys.create_admin_key(validated(AdminKeyCreateParams, body or {}).name)


@router.get("", response_model=ListPage[AdminKeyObject])
async def list_admin_keys(
    keys: OrgKeysDep,
    after: Cursor = None,
    limit: Limit = 20,
    order: Annotated[Literal["asc", "desc"], Query()] = "asc",
) -> ListPage[AdminKeyObject]:
    return await keys.admin_keys(after, limit, newest_first=order == "desc")


@router.get("/{key_id}", response_model=AdminKeyObject)
async def retrieve_admin_key(key_id: str, keys: OrgKeysDep) -> AdminKeyObject:
    return admin_key_object(await keys.admin_key(key_id))


@router.delete("/{key_id}", response_model=AdminKeyDeleted)
async def delete_admin_key(key_id: str, keys: OrgKeysDep) -> AdminKeyDeleted:
    await keys.delete_admin_key(key_id)
    return AdminKeyDeleted(id=key_id)
