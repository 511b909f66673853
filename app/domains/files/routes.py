"""Files API routes (OpenAI `/v1/files`)."""

from __future__ import annotations

from typing import Annotated, Literal
from urllib.parse import quote

from fastapi import APIRouter, Query, Request
from fastapi.responses import StreamingResponse

from app.core.errors import InvalidRequest
from app.domains.files.deps import FileServiceDep
from app.domains.files.schemas import FILE_UPLOAD_OPENAPI, FileDeleted, FileObject
from app.domains.organization.deps import CallerDep, ListScopeDep, ProjectDep
from app.schemas.common import ERROR_RESPONSES, ListPage, error_doc

router = APIRouter(prefix="/files", tags=["files"], responses=ERROR_RESPONSES)


@router.post(
    "",
    response_model=FileObject,
    openapi_extra=FILE_UPLOAD_OPENAPI,
    responses={
        # A rule on the file part's filename, which no schema can state (schemathesis.toml says so).
        400: error_doc("Invalid request, or a `purpose=batch` file whose name does not end in `.jsonl`"),
        413: error_doc("File too large"),
        429: error_doc("The project's storage limit is reached"),
    },
)
async def create_file(request: Request, project: ProjectDep, files: FileServiceDep) -> FileObject:
    """Upload a file (multipart: `file`, `purpose`, optional `expires_after[anchor|seconds]`)."""
    if request.headers.get("content-type", "").split(";")[0].strip().lower() == "application/json":
        try:
            body = await request.json()
        except ValueError:
            raise InvalidRequest("The JSON body could not be parsed.") from None
        if not isinstance(body, dict):
            raise InvalidRequest("The JSON body must be an object with 'purpose' and 'url'.")
        return FileObject.from_row(await files.import_url(project, body))
    length = request.headers.get("content-length")
    file = await files.upload(
        project,
        request.stream(),
        request.headers.get("content-type", ""),
        int(length) if length and length.isdigit() else None,
    )
    return FileObject.from_row(file)


@router.get("", response_model=ListPage[FileObject])
async def list_files(
    scope: ListScopeDep,
    files: FileServiceDep,
    purpose: str | None = None,
    limit: Annotated[int, Query(ge=1, le=10_000)] = 10_000,
    order: Literal["asc", "desc"] = "desc",
    after: str | None = None,
) -> ListPage[FileObject]:
    """List the project's files, newest first by default. An admin key may list another
    project's files, or every project's (`project=*`); each then says its `project`."""
    page = await files.list(scope.project, purpose=purpose, limit=limit, order=order, after=after)
    return ListPage.of([FileObject.from_row(f, show_project=scope.by_admin) for f in page.items], page.has_more)


@router.get("/{file_id}", response_model=FileObject)
async def retrieve_file(file_id: str, caller: CallerDep, files: FileServiceDep) -> FileObject:
    """The project's file; an admin key reads every project's files."""
    return FileObject.from_row(await files.readable(caller, file_id))


@router.delete("/{file_id}", response_model=FileDeleted)
async def delete_file(file_id: str, project: ProjectDep, files: FileServiceDep) -> FileDeleted:
    file = await files.delete(project, file_id)
    return FileDeleted(id=file.id, deleted=True)


def content_disposition(filename: str) -> str:
    """`attachment` with the name quoted the way Starlette's FileResponse does it (RFC 6266)."""
    quoted = quote(filename)
    if quoted != filename:
        return f"attachment; filename*=utf-8''{quoted}"
    return f'attachment; filename="{filename}"'


@router.get(
    "/{file_id}/content",
    response_class=StreamingResponse,
    responses={200: {"content": {"application/octet-stream": {}}, "description": "The raw bytes"}},
)
async def retrieve_file_content(file_id: str, caller: CallerDep, files: FileServiceDep) -> StreamingResponse:
    """The file's exact bytes, streamed from the blob store (an admin key reads every project's)."""
    file = await files.readable(caller, file_id)
    return StreamingResponse(
        files.content(file),
        media_type="application/octet-stream",
        headers={"content-disposition": content_disposition(file.filename), "content-length": str(file.bytes)},
    )
