"""OpenAPI document that matches what the server really sends: validation errors are 400s in
OpenAI's envelope, never FastAPI's 422 `HTTPValidationError`."""

from __future__ import annotations

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi
from fastapi.routing import APIRoute

from app.core.errors import ErrorResponse

ENVELOPE_REF = {"$ref": "#/components/schemas/ErrorResponse"}


def install_openapi(app: FastAPI) -> None:
    def openapi() -> dict:
        if app.openapi_schema:
            return app.openapi_schema
        schema = get_openapi(title=app.title, version=app.version, description=app.description, routes=app.routes)
        components = schema.setdefault("components", {}).setdefault("schemas", {})
        for name in ("HTTPValidationError", "ValidationError"):
            components.pop(name, None)
        components.setdefault(
            "ErrorResponse", ErrorResponse.model_json_schema(ref_template="#/components/schemas/{model}")
        )
        for defs_name, defs in components["ErrorResponse"].pop("$defs", {}).items():
            components.setdefault(defs_name, defs)
        _documented_bodies_replace_generated(app, schema)
        for path in schema.get("paths", {}).values():
            for operation in path.values():
                responses = operation.get("responses", {})
                if responses.pop("422", None) is not None:
                    responses.setdefault(
                        "400",
                        {"description": "Invalid request", "content": {"application/json": {"schema": ENVELOPE_REF}}},
                    )
        app.openapi_schema = schema
        return schema

    app.openapi = openapi  # type: ignore[method-assign]  # FastAPI's documented override


def _documented_bodies_replace_generated(app: FastAPI, schema: dict) -> None:
    """A route that documents its request body in `openapi_extra` (parsed loosely so the service
    answers with OpenAI's messages) gets exactly that body: FastAPI would merge it into the
    loose model's schema, documenting both."""
    for route in app.routes:
        if not isinstance(route, APIRoute):
            continue
        body = (route.openapi_extra or {}).get("requestBody")
        if body is None:
            continue
        for method in route.methods:
            operation = schema.get("paths", {}).get(route.path_format, {}).get(method.lower())
            if operation is not None:
                operation["requestBody"] = body
