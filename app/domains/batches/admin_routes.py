"""The Administration API's pause and resume of every batch of a project
(`/v1/organization/projects/{id}/batches/pause|resume`): batches' rules, admin keys only."""

from __future__ import annotations

from fastapi import APIRouter

from app.api.deps import WakeDep
from app.domains.batches.deps import BatchServiceDep
from app.domains.organization.deps import ADMIN_RESPONSES, AdminDep, OrgProjectsDep
from app.domains.organization.schemas import ProjectBatchesPaused

router = APIRouter(prefix="/organization/projects", tags=["admin"], responses=ADMIN_RESPONSES, dependencies=[AdminDep])


@router.post("/{project_id}/batches/pause", response_model=ProjectBatchesPaused)
async def pause_project_batches(
    project_id: str, projects: OrgProjectsDep, batches: BatchServiceDep, wake_worker: WakeDep
) -> ProjectBatchesPaused:
    """batchd's: pause every running batch of the project (each as `POST /v1/batches/{id}/pause`)."""
    return await _pause_all(project_id, projects, batches, wake_worker, paused=True)


@router.post("/{project_id}/batches/resume", response_model=ProjectBatchesPaused)
async def resume_project_batches(
    project_id: str, projects: OrgProjectsDep, batches: BatchServiceDep, wake_worker: WakeDep
) -> ProjectBatchesPaused:
    """batchd's: resume every paused batch of the project."""
    return await _pause_all(project_id, projects, batches, wake_worker, paused=False)


async def _pause_all(
    project_id: str, projects: OrgProjectsDep, batches: BatchServiceDep, wake_worker: WakeDep, *, paused: bool
) -> ProjectBatchesPaused:
    # A project of the configured keys has batches but no row: either makes it known.
    if not await batches.has_batches(project_id):
        await projects.get(project_id)  # 404 when there is no such project
    changed = await batches.pause_project(project_id, paused=paused)
    if changed:
        wake_worker()
    return ProjectBatchesPaused(project_id=project_id, paused=paused, batches=changed)
