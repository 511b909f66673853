"""Uploads API wire models, named exactly as OpenAI's (openai-python `types/upload.py`,
`types/uploads/upload_part.py`, `upload_create_params.py`, `upload_complete_params.py`)."""

from __future__ import annotations

import time
from typing import Annotated, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field

from app.core.config import Settings
from app.core.purposes import UPLOAD_PURPOSES
from app.core.statuses import UploadStatus
from app.db.models import File, Upload
from app.domains.files.schemas import FileObject
from app.schemas.common import MAX_EXPIRY_SECONDS, MIN_EXPIRY_SECONDS, LiteralOf, multipart_openapi


def _not_bool(value):
    # JSON true/false is not an integer (pydantic's lax mode would read it as 1/0).
    if isinstance(value, bool):
        raise ValueError("Input should be a valid integer")
    return value


Integer = Annotated[int, BeforeValidator(_not_bool)]


class UploadExpiresAfter(BaseModel):
    """Expiry of the File the upload becomes (the upload itself always expires after an hour)."""

    anchor: Literal["created_at"]
    seconds: Integer = Field(ge=MIN_EXPIRY_SECONDS, le=MAX_EXPIRY_SECONDS)


class UploadCreateRequest(BaseModel):
    model_config = ConfigDict(extra="allow")

    bytes: Integer = Field(ge=0)
    filename: str = Field(min_length=1, max_length=4096)
    mime_type: str = Field(min_length=1, max_length=256)
    purpose: str
    expires_after: UploadExpiresAfter | None = None


# The byte limits are settings (BATCHD_MAX_UPLOAD_BYTES; purpose=batch: BATCHD_MAX_BATCH_FILE_BYTES),
# so the service checks them; the document states the defaults.
_DEFAULT_MAX_BYTES = Settings.model_fields["max_upload_bytes"].default
_DEFAULT_MAX_BATCH_BYTES = Settings.model_fields["max_batch_file_bytes"].default


class UploadCreateParams(UploadCreateRequest):
    """The body of `POST /v1/uploads`. `filename` is any name: it is kept as metadata, reduced to
    a safe basename of at most 255 bytes; for `purpose=batch` that name must end in `.jsonl`."""

    # The service validates every body with this model after its own checks (which word the
    # common mistakes as OpenAI does), and /openapi.json states exactly its schema.
    model_config = ConfigDict(
        extra="allow",
        json_schema_extra={
            "if": {"properties": {"purpose": {"const": "batch"}}},
            "then": {"properties": {"bytes": {"maximum": _DEFAULT_MAX_BATCH_BYTES}}},
        },
    )

    bytes: Integer = Field(ge=0, json_schema_extra={"maximum": _DEFAULT_MAX_BYTES})
    purpose: Annotated[str, LiteralOf(UPLOAD_PURPOSES)]


class UploadCompleteRequest(BaseModel):
    """The body of `POST /v1/uploads/{upload_id}/complete`."""

    # The route validates the body with this model, and /openapi.json states exactly its schema.
    model_config = ConfigDict(extra="allow")

    part_ids: list[str] = Field(max_length=10_000)
    # null is as good as leaving it out.
    md5: str | None = Field(default=None, max_length=64)


class UploadObject(BaseModel):
    id: str
    object: Literal["upload"] = "upload"
    bytes: int
    created_at: int
    expires_at: int
    filename: str
    purpose: str
    status: Annotated[str, LiteralOf(UploadStatus)]
    file: FileObject | None = None

    @classmethod
    def from_row(cls, row: Upload, file: File | None = None) -> UploadObject:
        return cls(
            id=row.id,
            bytes=row.bytes,
            created_at=row.created_at,
            expires_at=row.expires_at,
            filename=row.filename,
            purpose=row.purpose,
            status=row.status_at(time.time()),
            file=FileObject.from_row(file) if file is not None else None,
        )


class UploadPartObject(BaseModel):
    id: str
    object: Literal["upload.part"] = "upload.part"
    created_at: int
    upload_id: str

    @classmethod
    def from_row(cls, row) -> UploadPartObject:
        return cls(id=row.id, created_at=row.created_at, upload_id=row.upload_id)


UPLOAD_PART_OPENAPI = multipart_openapi(["data"], {"data": {"type": "string", "format": "binary"}})
