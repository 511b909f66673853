"""Wire shapes shared by every resource."""

from __future__ import annotations

from collections.abc import Iterable
from enum import StrEnum
from typing import Annotated, Any, Generic, Literal, TypeVar

from pydantic import BaseModel, BeforeValidator, Field, GetCoreSchemaHandler, ValidationError
from pydantic_core import CoreSchema, PydanticCustomError, core_schema

from app.core.errors import INVALID_VALUE, ErrorResponse, invalid_request_from

# OpenAI's bounds of an expiry in seconds (a file's or an upload's `expires_after`, a batch's
# `output_expires_after`): an hour to 30 days. A batch's input and output files default to the most.
MIN_EXPIRY_SECONDS = 3600
MAX_EXPIRY_SECONDS = 30 * 24 * 3600


def invalid_value(detail: str, **context: Any) -> PydanticCustomError:
    """A request model's own refusal, worded "Invalid '<param>': <detail>." (app/core/errors.py)."""
    return PydanticCustomError(INVALID_VALUE, detail, context or None)


def not_one_of(supported: Iterable[str]) -> PydanticCustomError:
    """A request model's refusal of a value outside `supported`, in OpenAI's words (InvalidValue's)."""
    return PydanticCustomError(INVALID_VALUE, "not a supported value", {"supported": list(supported)})


def _expiry_seconds(value: Any) -> Any:
    if isinstance(value, float) and value.is_integer():
        value = int(value)  # 3600.0 is an integer to JSON Schema (and to OpenAI's parser)
    if not isinstance(value, int) or isinstance(value, bool) or not MIN_EXPIRY_SECONDS <= value <= MAX_EXPIRY_SECONDS:
        raise invalid_value(
            "expected an integer between {minimum} and {maximum}, got {got}",
            minimum=MIN_EXPIRY_SECONDS,
            maximum=MAX_EXPIRY_SECONDS,
            got=repr(value),
        )
    return value


# An expiry's `seconds`, checked once: a whole number of seconds (true is none) within the bounds.
ExpirySeconds = Annotated[
    int,
    BeforeValidator(_expiry_seconds),
    Field(json_schema_extra={"minimum": MIN_EXPIRY_SECONDS, "maximum": MAX_EXPIRY_SECONDS}),
]

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


def multipart_openapi(required: list[str], properties: dict, encoding: dict | None = None) -> dict:
    """`openapi_extra` documenting a multipart body that a route parses by hand from the stream
    (so it never sits in memory) instead of declaring it as parameters."""
    content: dict[str, Any] = {"schema": {"type": "object", "required": required, "properties": properties}}
    if encoding:
        content["encoding"] = encoding
    return {"requestBody": {"required": True, "content": {"multipart/form-data": content}}}


# The key of `openapi_extra` that names a JSON body's model (one of BODY_MODELS); app/http/openapi.py
# takes it out of the document and adds that model's schema to the document's components.
BODY_MODEL = "x-batchd-body-model"
BODY_MODELS: dict[str, type[BaseModel]] = {}

M = TypeVar("M", bound=BaseModel)


def json_body(model: type[BaseModel], *, required: bool = True) -> dict[str, Any]:
    """`openapi_extra` of a route whose JSON body is read loosely (so the service can first answer
    with OpenAI's own messages) and then validated by `model` (`validated`): the document states
    exactly that model's schema, so the two cannot drift."""
    if BODY_MODELS.setdefault(model.__name__, model) is not model:
        raise RuntimeError(f"two body models named {model.__name__}")
    schema: dict[str, Any] = {"$ref": f"#/components/schemas/{model.__name__}"}
    if not required:  # a JSON null is read as no body
        schema = {"anyOf": [schema, {"type": "null"}]}
    body = {"required": required, "content": {"application/json": {"schema": schema}}}
    return {"requestBody": body, BODY_MODEL: model.__name__}


def validated(model: type[M], data: Any, context: dict[str, Any] | None = None) -> M:
    """`data` validated by `model` (its validators may read `context`); a 400 in OpenAI's words
    (the first error) if it is not valid."""
    try:
        return model.model_validate(data, context=context)
    except ValidationError as exc:
        raise invalid_request_from(exc.errors()) from None


class LiteralOf:
    """Marks a str field that takes exactly the values of one of app/core/statuses.py's enums (or
    of a set of strings): it validates and is documented as the Literal of those values, an inline
    string enum as in OpenAI's spec. (A field typed with the enum itself would make FastAPI add a
    named schema.)"""

    def __init__(self, values: type[StrEnum] | Iterable[str]) -> None:
        self.values = [getattr(value, "value", value) for value in values]

    def __get_pydantic_core_schema__(self, source: type, handler: GetCoreSchemaHandler) -> CoreSchema:
        return core_schema.literal_schema(self.values)
