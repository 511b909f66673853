"""Uploads API routes (OpenAI `/v1/uploads`): create, add a part, complete, cancel."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Body, Request

from app.domains.files.deps import UploadServiceDep
from app.domains.files.uploads_schemas import (
    UPLOAD_PART_OPENAPI,
    UploadCompleteRequest,
    UploadCreateParams,
    UploadCreateRequest,
    UploadObject,
    UploadPartObject,
)
from app.domains.organization.deps import ProjectDep
from app.schemas.common import ERROR_RESPONSES, Responses, error_doc, json_body

router = APIRouter(prefix="/uploads", tags=["uploads"], responses=ERROR_RESPONSES)

_STORAGE_FULL: Responses = {507: error_doc("No storage space left; nothing was stored")}
_QUOTA: Responses = {429: error_doc("The project's storage limit is reached")}
_NOT_PENDING: Responses = {409: error_doc("The upload is no longer pending: completed, cancelled or expired")}


@router.post(
    "",
    response_model=UploadObject,
    openapi_extra=json_body(UploadCreateParams),
    responses={
        400: error_doc("Invalid request, or a `purpose=batch` upload whose filename does not end in `.jsonl`"),
        413: error_doc("Request body too large"),
        **_QUOTA,
    },
)
async def create_upload(
    project: ProjectDep, uploads: UploadServiceDep, body: Annotated[UploadCreateRequest | None, Body()] = None
) -> UploadObject:
    """Start an upload of `bytes` bytes; it takes parts for an hour."""
    return UploadObject.from_row(await uploads.create(project, body))


@router.post(
    "/{upload_id}/parts",
    response_model=UploadPartObject,
    openapi_extra=UPLOAD_PART_OPENAPI,
    responses={413: error_doc("Part too large"), **_NOT_PENDING, **_STORAGE_FULL},
)
async def add_upload_part(
    upload_id: str, request: Request, project: ProjectDep, uploads: UploadServiceDep
) -> UploadPartObject:
    """Add one part (multipart field `data`, at most 64 MB), streamed to the blob store."""
    length = request.headers.get("content-length")
    part = await uploads.add_part(
        project,
        upload_id,
        request.stream(),
        request.headers.get("content-type", ""),
        int(length) if length and length.isdigit() else None,
    )
    return UploadPartObject.from_row(part)


@router.post(
    "/{upload_id}/complete",
    response_model=UploadObject,
    openapi_extra=json_body(UploadCompleteRequest),
    responses={
        400: error_doc("Invalid request, or `part_ids` are not this upload's parts totalling its `bytes`"),
        413: error_doc("Request body too large"),
        **_NOT_PENDING,
        **_QUOTA,
        **_STORAGE_FULL,
    },
)
async def complete_upload(
    upload_id: str,
    project: ProjectDep,
    uploads: UploadServiceDep,
    body: Annotated[UploadCompleteRequest | None, Body()] = None,
) -> UploadObject:
    """Concatenate the listed parts, in order, into a File; returns the upload with its `file`."""
    upload, file = await uploads.complete(project, upload_id, body)
    return UploadObject.from_row(upload, file)


@router.post("/{upload_id}/cancel", response_model=UploadObject, responses=_NOT_PENDING)
async def cancel_upload(upload_id: str, project: ProjectDep, uploads: UploadServiceDep) -> UploadObject:
    """Cancel a pending upload; its parts are removed."""
    return UploadObject.from_row(await uploads.cancel(project, upload_id))
