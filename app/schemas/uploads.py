"""Uploads API wire models, named exactly as OpenAI's (openai-python `types/upload.py`,
`types/uploads/upload_part.py`, `upload_create_params.py`, `upload_complete_params.py`)."""

from __future__ import annotations

import time
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from app.schemas.common import multipart_openapi
from app.schemas.files import FileObject

MIN_FILE_EXPIRY_SECONDS = 3600
MAX_FILE_EXPIRY_SECONDS = 2_592_000


class UploadExpiresAfter(BaseModel):
    """Expiry of the File the upload becomes (the upload itself always expires after an hour)."""

    anchor: Literal["created_at"]
    seconds: int = Field(ge=MIN_FILE_EXPIRY_SECONDS, le=MAX_FILE_EXPIRY_SECONDS)


class UploadCreateRequest(BaseModel):
    model_config = ConfigDict(extra="allow")

    bytes: int = Field(ge=0)
    filename: str = Field(min_length=1, max_length=4096)
    mime_type: str = Field(min_length=1, max_length=256)
    purpose: str
    expires_after: UploadExpiresAfter | None = None


class UploadCompleteRequest(BaseModel):
    model_config = ConfigDict(extra="allow")

    part_ids: list[str] = Field(max_length=10_000)
    md5: str | None = Field(default=None, max_length=64)


UploadStatus = Literal["pending", "completed", "cancelled", "expired"]


class UploadObject(BaseModel):
    id: str
    object: Literal["upload"] = "upload"
    bytes: int
    created_at: int
    expires_at: int
    filename: str
    purpose: str
    status: UploadStatus
    file: FileObject | None = None

    @classmethod
    def from_row(cls, row, file=None) -> "UploadObject":
        # A pending upload past its expiry is expired even before the sweep marks it.
        expired = row.status == "pending" and time.time() >= row.expires_at
        status = "expired" if expired else row.status
        return cls(
            id=row.id, bytes=row.bytes, created_at=row.created_at, expires_at=row.expires_at,
            filename=row.filename, purpose=row.purpose, status=status,
            file=FileObject.from_row(file) if file is not None else None,
        )


class UploadPartObject(BaseModel):
    id: str
    object: Literal["upload.part"] = "upload.part"
    created_at: int
    upload_id: str

    @classmethod
    def from_row(cls, row) -> "UploadPartObject":
        return cls(id=row.id, created_at=row.created_at, upload_id=row.upload_id)


UPLOAD_PART_OPENAPI = multipart_openapi(["data"], {"data": {"type": "string", "format": "binary"}})
