"""Keys through the Administration API: a project's service accounts (each created with one key,
the way OpenAI hands out project keys by API), the project's API keys, and admin API keys.

One stored key is one service account: `svc_acct_<n>` owns `key_<n>`. Deleting either revokes
the key, which holds from the next request on every replica (keys are looked up, not cached).
Keys made by `batchd keys create` appear here too."""

from __future__ import annotations

import time

from sqlalchemy.ext.asyncio import AsyncSession

from app.core.config import DEFAULT_PROJECT
from app.core.errors import InvalidRequest, NotFound
from app.db.models import ApiKey
from app.domains.organization.api_keys_repository import ApiKeyRepository
from app.domains.organization.audit_log import record
from app.domains.organization.auth import Caller, add_key, parse_stored_key_id, stored_key_id
from app.domains.organization.open_mode import refuse_minting
from app.domains.organization.org_projects import OrganizationProjects
from app.domains.organization.schemas import (
    AdminKeyCreated,
    AdminKeyObject,
    KeyOwner,
    KeyOwnerServiceAccount,
    ProjectApiKeyObject,
    ServiceAccountCreated,
    ServiceAccountKey,
    ServiceAccountObject,
)
from app.schemas.common import ListPage

SERVICE_ACCOUNT_PREFIX = "svc_acct_"
CLI_KEY_NAME = "batchd keys create"  # the name of keys made without one


def service_account_id(row_id: int) -> str:
    return f"{SERVICE_ACCOUNT_PREFIX}{row_id}"


def _row_id(wire_id: str, prefix: str) -> int | None:
    return parse_stored_key_id("key_" + wire_id.removeprefix(prefix)) if wire_id.startswith(prefix) else None


def _redacted(row: ApiKey) -> str:
    return f"{row.prefix}***"


def service_account_object(row: ApiKey) -> ServiceAccountObject:
    return ServiceAccountObject(id=service_account_id(row.id), name=row.name or CLI_KEY_NAME, created_at=row.created_at)


def project_key_object(row: ApiKey, project_active: bool = True) -> ProjectApiKeyObject:
    owner = KeyOwnerServiceAccount(
        id=service_account_id(row.id), name=row.name or CLI_KEY_NAME, created_at=row.created_at
    )
    return ProjectApiKeyObject(
        id=stored_key_id(row.id),
        name=row.name or CLI_KEY_NAME,
        redacted_value=_redacted(row),
        created_at=row.created_at,
        owner=KeyOwner(service_account=owner),
        owner_project_access="active" if project_active else "inactive",
    )


def admin_key_object(row: ApiKey) -> AdminKeyObject:
    return AdminKeyObject(
        id=stored_key_id(row.id), name=row.name, redacted_value=_redacted(row), created_at=row.created_at
    )


def _cursor(after: str | None, prefix: str) -> int | None:
    if after is None:
        return None
    row_id = _row_id(after, prefix)
    if row_id is None:
        raise InvalidRequest(f"Invalid 'after': '{after}' is not an id this list returns.", param="after")
    return row_id


class OrganizationKeys:
    def __init__(self, session: AsyncSession, caller: Caller, secret: bytes) -> None:
        self.session = session
        self.caller = caller
        self.secret = secret
        self.repo = ApiKeyRepository(session)
        self.projects = OrganizationProjects(session, caller)

    # -- a project's service accounts and keys ---------------------------------------------------

    async def _project_key(self, project_id: str, wire_id: str, prefix: str, what: str) -> ApiKey:
        await self.projects.get(project_id)
        row_id = _row_id(wire_id, prefix)
        row = await self.repo.get(row_id) if row_id is not None else None
        if row is None or row.is_admin or row.project != project_id or row.revoked_at is not None:
            raise NotFound(f"No {what} found with id '{wire_id}' in project '{project_id}'.", code="not_found")
        return row

    def _may_mint(self) -> None:
        if self.caller.open_mode:
            raise refuse_minting()

    async def create_service_account(self, project_id: str, name: str) -> ServiceAccountCreated:
        self._may_mint()
        project = await self.projects.get_active(project_id)
        row, key = await add_key(self.session, self.secret, project.name, name=name)
        account = service_account_id(row.id)
        await record(
            self.session,
            self.caller.key_id,
            "service_account.created",
            account,
            project.name,
            {"data": {"role": "member"}},
        )
        await record(
            self.session,
            self.caller.key_id,
            "api_key.created",
            stored_key_id(row.id),
            project.name,
            {"data": {"scopes": []}},
        )
        return ServiceAccountCreated(
            id=account,
            name=name,
            created_at=row.created_at,
            api_key=ServiceAccountKey(id=stored_key_id(row.id), name=name, value=key, created_at=row.created_at),
        )

    async def service_accounts(self, project_id: str, after: str | None, limit: int) -> ListPage[ServiceAccountObject]:
        await self.projects.get(project_id)
        rows, more = await self.repo.page(
            admin=False, project=project_id, after=_cursor(after, SERVICE_ACCOUNT_PREFIX), limit=limit
        )
        return ListPage.of([service_account_object(r) for r in rows], more)

    async def service_account(self, project_id: str, account_id: str) -> ApiKey:
        return await self._project_key(project_id, account_id, SERVICE_ACCOUNT_PREFIX, "service account")

    async def delete_service_account(self, project_id: str, account_id: str) -> None:
        row = await self.service_account(project_id, account_id)
        await self.repo.revoke(row.id, int(time.time()))
        await record(self.session, self.caller.key_id, "service_account.deleted", account_id, project_id)

    async def project_keys(self, project_id: str, after: str | None, limit: int) -> ListPage[ProjectApiKeyObject]:
        project = await self.projects.get(project_id)
        rows, more = await self.repo.page(admin=False, project=project_id, after=_cursor(after, "key_"), limit=limit)
        return ListPage.of([project_key_object(r, project.archived_at is None) for r in rows], more)

    async def project_key(self, project_id: str, key_id: str) -> ProjectApiKeyObject:
        project = await self.projects.get(project_id)
        row = await self._project_key(project_id, key_id, "key_", "API key")
        return project_key_object(row, project.archived_at is None)

    async def delete_project_key(self, project_id: str, key_id: str) -> None:
        row = await self._project_key(project_id, key_id, "key_", "API key")
        await self.repo.revoke(row.id, int(time.time()))
        await record(self.session, self.caller.key_id, "api_key.deleted", key_id, project_id)

    # -- admin keys ------------------------------------------------------------------------------

    async def create_admin_key(self, name: str) -> AdminKeyCreated:
        self._may_mint()
        row, key = await add_key(self.session, self.secret, DEFAULT_PROJECT, admin=True, name=name)
        await record(
            self.session,
            self.caller.key_id,
            "api_key.created",
            stored_key_id(row.id),
            None,
            {"data": {"scopes": ["admin"]}},
        )
        return AdminKeyCreated(**admin_key_object(row).model_dump(), value=key)

    async def admin_keys(self, after: str | None, limit: int, newest_first: bool) -> ListPage[AdminKeyObject]:
        rows, more = await self.repo.page(
            admin=True, project=None, after=_cursor(after, "key_"), limit=limit, newest_first=newest_first
        )
        return ListPage.of([admin_key_object(r) for r in rows], more)

    async def admin_key(self, key_id: str) -> ApiKey:
        row_id = parse_stored_key_id(key_id)
        row = await self.repo.get(row_id) if row_id is not None else None
        if row is None or not row.is_admin or row.revoked_at is not None:
            raise NotFound(f"No admin API key found with id '{key_id}'.", param="key_id", code="not_found")
        return row

    async def delete_admin_key(self, key_id: str) -> None:
        row = await self.admin_key(key_id)
        await self.repo.revoke(row.id, int(time.time()))
        await record(self.session, self.caller.key_id, "api_key.deleted", key_id, None)
