"""Files API wire models, named exactly as OpenAI's (openai-python `types/file_object.py`)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from app.core.purposes import UPLOAD_PURPOSES
from app.schemas.common import MAX_EXPIRY_SECONDS, MIN_EXPIRY_SECONDS, multipart_openapi


class FileObject(BaseModel):
    id: str
    object: Literal["file"] = "file"
    bytes: int
    created_at: int
    filename: str
    purpose: str
    status: Literal["uploaded", "processed", "error"]
    expires_at: int | None
    status_details: str | None = None
    # batchd's: the file's project, in an admin's list that names `project` (else left out).
    project: str | None = Field(default=None, exclude_if=lambda value: value is None)
    # batchd's: where an imported file came from, `{"url": ...}` without the URL's query string
    # (left out for uploads).
    source: dict[str, str] | None = Field(default=None, exclude_if=lambda value: value is None)

    @classmethod
    def from_row(cls, row, *, show_project: bool = False) -> FileObject:
        return cls(
            project=row.project if show_project else None,
            id=row.id,
            bytes=row.bytes,
            created_at=row.created_at,
            filename=row.filename,
            purpose=row.purpose,
            status=row.status,
            expires_at=row.expires_at,
            source={"url": row.source_url} if row.source_url else None,
        )


class FileDeleted(BaseModel):
    id: str
    object: Literal["file"] = "file"
    deleted: bool


FILE_UPLOAD_OPENAPI = multipart_openapi(
    ["file", "purpose"],
    {
        "file": {"type": "string", "format": "binary"},
        "purpose": {"type": "string", "enum": list(UPLOAD_PURPOSES)},
        "expires_after[anchor]": {"type": "string", "enum": ["created_at"]},
        "expires_after[seconds]": {"type": "integer", "minimum": MIN_EXPIRY_SECONDS, "maximum": MAX_EXPIRY_SECONDS},
    },
    # The file part's filename becomes the File's name; a purpose=batch file's must end in .jsonl.
    encoding={
        "file": {
            "headers": {
                "Content-Disposition": {
                    "description": "`filename` is the File's name; for `purpose=batch` it must end in `.jsonl`.",
                    "schema": {"type": "string"},
                    "example": 'form-data; name="file"; filename="batch.jsonl"',
                }
            }
        }
    },
)
# Files by reference: the same route takes a JSON body naming the file's http(s) URL.
FILE_UPLOAD_OPENAPI["requestBody"]["content"]["application/json"] = {
    "schema": {
        "type": "object",
        "required": ["purpose", "url"],
        "properties": {
            "purpose": {"type": "string", "enum": list(UPLOAD_PURPOSES)},
            "url": {
                "type": "string",
                "format": "uri",
                "description": "An http(s) URL (e.g. a presigned GET) fetched through the outbound policy.",
            },
        },
        "additionalProperties": False,
    }
}
