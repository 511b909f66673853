"""The limits domain's admin services, one per request."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends

from app.api.deps import SessionDep
from app.domains.limits.model_permissions import ModelPermissions
from app.domains.limits.rate_limits import RateLimits
from app.domains.organization.deps import CallerDep


async def get_rate_limits(session: SessionDep, caller: CallerDep) -> RateLimits:
    return RateLimits(session, caller)


RateLimitsDep = Annotated[RateLimits, Depends(get_rate_limits)]


async def get_model_permissions(session: SessionDep, caller: CallerDep) -> ModelPermissions:
    return ModelPermissions(session, caller)


ModelPermissionsDep = Annotated[ModelPermissions, Depends(get_model_permissions)]
