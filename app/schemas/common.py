"""Wire shapes shared by every resource."""

from __future__ import annotations

from enum import StrEnum
from typing import Any, Generic, Literal, TypeVar

from pydantic import BaseModel, GetCoreSchemaHandler
from pydantic_core import CoreSchema, core_schema

from app.core.errors import ErrorResponse

T = TypeVar("T")


class ListPage(BaseModel, Generic[T]):
    object: Literal["list"] = "list"
    data: list[T]
    first_id: str | None
    last_id: str | None
    has_more: bool

    @classmethod
    def of(cls, items: list[T], has_more: bool) -> ListPage[T]:
        return cls(
            data=items,
            first_id=items[0].id if items else None,  # type: ignore[attr-defined]
            last_id=items[-1].id if items else None,  # type: ignore[attr-defined]
            has_more=has_more and bool(items),
        )


# FastAPI's `responses=`: extra documented statuses of a route.
Responses = dict[int | str, dict[str, Any]]

ERROR_RESPONSES: Responses = {
    status: {"model": ErrorResponse, "description": description}
    for status, description in {
        400: "Invalid request",
        401: "Missing or invalid API key",
        404: "Not found",
        503: "Temporarily unavailable (retry)",
    }.items()
}


def error_doc(description: str) -> dict[str, Any]:
    """A route's extra documented error status: OpenAI's envelope with its own description."""
    return {"model": ErrorResponse, "description": description}


def multipart_openapi(required: list[str], properties: dict) -> dict:
    """`openapi_extra` documenting a multipart body that a route parses by hand from the stream
    (so it never sits in memory) instead of declaring it as parameters."""
    schema = {"type": "object", "required": required, "properties": properties}
    return {"requestBody": {"required": True, "content": {"multipart/form-data": {"schema": schema}}}}


class LiteralOf:
    """Marks a str field that takes exactly the values of one of app/core/statuses.py's enums: it
    validates and is documented as the Literal of those values, an inline string enum as in
    OpenAI's spec. (A field typed with the enum itself would make FastAPI add a named schema.)"""

    def __init__(self, enum: type[StrEnum]) -> None:
        self.values = [member.value for member in enum]

    def __get_pydantic_core_schema__(self, source: type, handler: GetCoreSchemaHandler) -> CoreSchema:
        return core_schema.literal_schema(self.values)
