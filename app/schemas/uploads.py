"""Uploads API wire models, named exactly as OpenAI's (openai-python `types/upload.py`,
`types/uploads/upload_part.py`, `upload_create_params.py`, `upload_complete_params.py`)."""

from __future__ import annotations

import time
from typing import Annotated, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field

from app.core.purposes import UPLOAD_PURPOSES
from app.core.statuses import UploadStatus
from app.db.models import File, Upload
from app.schemas.common import LiteralOf, multipart_openapi
from app.schemas.files import FileObject

MIN_FILE_EXPIRY_SECONDS = 3600
MAX_FILE_EXPIRY_SECONDS = 2_592_000


def _not_bool(value):
    # JSON true/false is not an integer (pydantic's lax mode would read it as 1/0).
    if isinstance(value, bool):
        raise ValueError("Input should be a valid integer")
    return value


Integer = Annotated[int, BeforeValidator(_not_bool)]


class UploadExpiresAfter(BaseModel):
    """Expiry of the File the upload becomes (the upload itself always expires after an hour)."""

    anchor: Literal["created_at"]
    seconds: Integer = Field(ge=MIN_FILE_EXPIRY_SECONDS, le=MAX_FILE_EXPIRY_SECONDS)


class UploadCreateRequest(BaseModel):
    model_config = ConfigDict(extra="allow")

    bytes: Integer = Field(ge=0)
    filename: str = Field(min_length=1, max_length=4096)
    mime_type: str = Field(min_length=1, max_length=256)
    purpose: str
    expires_after: UploadExpiresAfter | None = None


class UploadCompleteRequest(BaseModel):
    model_config = ConfigDict(extra="allow")

    part_ids: list[str] = Field(max_length=10_000)
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


def _json_body(schema: dict) -> dict:
    return {"requestBody": {"required": True, "content": {"application/json": {"schema": schema}}}}


# The bodies as documented (/openapi.json): what the service accepts, stated exactly (the parsing
# models above are looser so the service can answer with OpenAI's own messages). Sizes are the
# defaults (BATCHD_MAX_UPLOAD_BYTES; purpose=batch: BATCHD_MAX_BATCH_FILE_BYTES).
UPLOAD_CREATE_OPENAPI = _json_body(
    {
        "type": "object",
        "required": ["bytes", "filename", "mime_type", "purpose"],
        "properties": {
            "bytes": {"type": "integer", "minimum": 0, "maximum": 8 * 1024**3},
            # Any name: it is kept as metadata, reduced to a safe basename of at most 255 bytes.
            "filename": {"type": "string", "minLength": 1, "maxLength": 4096},
            "mime_type": {"type": "string", "minLength": 1, "maxLength": 256},
            "purpose": {"type": "string", "enum": list(UPLOAD_PURPOSES)},
            "expires_after": {
                "type": ["object", "null"],
                "required": ["anchor", "seconds"],
                "properties": {
                    "anchor": {"type": "string", "enum": ["created_at"]},
                    "seconds": {
                        "type": "integer",
                        "minimum": MIN_FILE_EXPIRY_SECONDS,
                        "maximum": MAX_FILE_EXPIRY_SECONDS,
                    },
                },
            },
        },
        # Batch input: at most the batch-file limit, and (a 400 described in words, since it is
        # checked on the name as stored) a name ending in .jsonl.
        "if": {"properties": {"purpose": {"const": "batch"}}},
        "then": {"properties": {"bytes": {"maximum": 200 * 1024**2}}},
    }
)
UPLOAD_COMPLETE_OPENAPI = _json_body(
    {
        "type": "object",
        "required": ["part_ids"],
        "properties": {
            "part_ids": {"type": "array", "items": {"type": "string"}, "maxItems": 10_000},
            # null is as good as leaving it out (the parsing model above says so too).
            "md5": {"type": ["string", "null"], "maxLength": 64},
        },
    }
)
