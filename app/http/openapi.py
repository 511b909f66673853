"""OpenAPI document that matches what the server really sends: validation errors are 400s in
OpenAI's envelope, never FastAPI's 422 `HTTPValidationError`."""

from __future__ import annotations

import json
import re

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi
from fastapi.routing import APIRoute
from pydantic import BaseModel

from app.core.errors import ErrorResponse
from app.schemas.common import BODY_MODEL, BODY_MODELS

ENVELOPE_REF = {"$ref": "#/components/schemas/ErrorResponse"}


def install_openapi(app: FastAPI) -> None:
    def openapi() -> dict:
        if app.openapi_schema:
            return app.openapi_schema
        schema = get_openapi(title=app.title, version=app.version, description=app.description, routes=app.routes)
        components = schema.setdefault("components", {}).setdefault("schemas", {})
        for name in ("HTTPValidationError", "ValidationError"):
            components.pop(name, None)
        _add_component(components, ErrorResponse)
        _documented_bodies_replace_generated(app, schema)
        _drop_unreferenced(components, schema)
        _add_links(schema)
        for path in schema.get("paths", {}).values():
            for operation in path.values():
                responses = operation.get("responses", {})
                if responses.pop("422", None) is not None:
                    responses.setdefault(
                        "400",
                        {"description": "Invalid request", "content": {"application/json": {"schema": ENVELOPE_REF}}},
                    )
                _document_unsupported_media_type(operation)
            if "post" in path:
                _document_idempotency_key(path["post"])
        app.openapi_schema = schema
        return schema

    app.openapi = openapi  # type: ignore[method-assign]  # FastAPI's documented override


def _document_unsupported_media_type(operation: dict) -> None:
    """A JSON body of another Content-Type is a 415 (app/http/body_limit.py), in the envelope of
    the operation's other errors (Anthropic's on its routes)."""
    if "application/json" not in operation.get("requestBody", {}).get("content", {}):
        return
    responses = operation.setdefault("responses", {})
    envelope = responses.get("400", {}).get("content") or {"application/json": {"schema": ENVELOPE_REF}}
    responses.setdefault("415", {"description": "The body is not JSON (Content-Type)", "content": envelope})


IDEMPOTENCY_KEY = {
    "name": "Idempotency-Key",
    "in": "header",
    "required": False,
    "description": "A repeat of this request with the same key (by the same API key, for 24 hours) returns "
    "the first response of a create (a response with a secret: the object as a retrieve shows it) and does "
    "nothing again (app/http/idempotency_store.py, docs/security.md).",
    # Printable ASCII, no space at either end (HTTP would strip it).
    "schema": {"type": "string", "minLength": 1, "maxLength": 255, "pattern": "^[!-~]([ -~]*[!-~])?$"},
}


def _document_idempotency_key(operation: dict) -> None:
    """Every POST takes an Idempotency-Key (app/http/idempotency.py): its 409 when reused for
    another request, in the envelope of the operation's other errors."""
    operation.setdefault("parameters", []).append(IDEMPOTENCY_KEY)
    responses = operation.setdefault("responses", {})
    envelope = responses.get("400", {}).get("content") or {"application/json": {"schema": ENVELOPE_REF}}
    responses.setdefault("409", {"description": "Idempotency-Key reused for another request", "content": envelope})


def _add_component(components: dict, model: type[BaseModel]) -> None:
    """`model`'s own JSON schema (validation mode) as a named component, its nested models beside
    it. They replace FastAPI's rendering of the same models, if any (for a body FastAPI validates
    too, it renders them with small differences, e.g. a `default` of `null` left out)."""
    own = model.model_json_schema(ref_template="#/components/schemas/{model}")
    components.update({**own.pop("$defs", {}), model.__name__: own})


def _documented_bodies_replace_generated(app: FastAPI, schema: dict) -> None:
    """A route that documents its request body in `openapi_extra` (read loosely so the service
    answers with OpenAI's messages) gets exactly that body: FastAPI would merge it into the
    loose model's schema, documenting both. A JSON body's schema is the model that validates it
    (app/schemas/common.py `json_body`)."""
    components = schema["components"]["schemas"]
    for route in app.routes:
        if not isinstance(route, APIRoute):
            continue
        body = (route.openapi_extra or {}).get("requestBody")
        if body is None:
            continue
        model_name = (route.openapi_extra or {}).get(BODY_MODEL)
        if model_name is not None:
            _add_component(components, BODY_MODELS[model_name])
        for method in route.methods:
            operation = schema.get("paths", {}).get(route.path_format, {}).get(method.lower())
            if operation is not None:
                operation["requestBody"] = body
                operation.pop(BODY_MODEL, None)


_REF = re.compile(r'"\$ref": "#/components/schemas/([^"]+)"')


def _drop_unreferenced(components: dict, schema: dict) -> None:
    """Components no longer referenced (the loose parsing models of replaced bodies) go."""
    while True:
        used = set(_REF.findall(json.dumps(schema)))
        unused = [name for name in components if name not in used]
        if not unused:
            return
        for name in unused:
            del components[name]


# OpenAPI links: which operations take what another one's 200 returns, so a client (or a stateful
# fuzzer) can walk create -> retrieve -> use -> delete. Source (method, path) -> targets (method,
# path, value of the target's one path parameter or, for a body, the body with expressions).
_ID = "$response.body#/id"
_FILE_ID = "$response.body#/file/id"
_BATCH_FROM = {"input_file_id": _ID, "endpoint": "/v1/chat/completions", "completion_window": "24h"}
_LINKS: dict[tuple[str, str], list[tuple[str, str, str | dict]]] = {
    ("post", "/v1/files"): [
        ("get", "/v1/files/{file_id}", _ID),
        ("get", "/v1/files/{file_id}/content", _ID),
        ("delete", "/v1/files/{file_id}", _ID),
        # A purpose=batch file is a batch's input file (and a quote's).
        ("post", "/v1/batches", _BATCH_FROM),
        ("post", "/v1/batches/estimate", _BATCH_FROM),
    ],
    ("post", "/v1/uploads"): [
        ("post", "/v1/uploads/{upload_id}/parts", _ID),
        ("post", "/v1/uploads/{upload_id}/complete", _ID),
        ("post", "/v1/uploads/{upload_id}/cancel", _ID),
    ],
    ("post", "/v1/uploads/{upload_id}/parts"): [
        ("post", "/v1/uploads/{upload_id}/complete", "$response.body#/upload_id"),
        ("post", "/v1/uploads/{upload_id}/cancel", "$response.body#/upload_id"),
    ],
    ("post", "/v1/uploads/{upload_id}/complete"): [
        ("get", "/v1/files/{file_id}", _FILE_ID),
        ("get", "/v1/files/{file_id}/content", _FILE_ID),
        ("delete", "/v1/files/{file_id}", _FILE_ID),
        # A completed purpose=batch upload is a batch's input file (and a quote's).
        ("post", "/v1/batches", {**_BATCH_FROM, "input_file_id": _FILE_ID}),
        ("post", "/v1/batches/estimate", {**_BATCH_FROM, "input_file_id": _FILE_ID}),
    ],
    ("post", "/v1/batches"): [
        ("get", "/v1/batches/{batch_id}", _ID),
        ("post", "/v1/batches/{batch_id}/cancel", _ID),
        ("post", "/v1/batches/{batch_id}/pause", _ID),
        ("post", "/v1/batches/{batch_id}/resume", _ID),
        ("get", "/v1/files/{file_id}", "$response.body#/input_file_id"),
        # Delete and retry answer once the batch has ended, which one without a served model soon has.
        ("delete", "/v1/batches/{batch_id}", _ID),
        ("post", "/v1/batches/{batch_id}/retry", _ID),
        ("get", "/v1/batches/{batch_id}/results", _ID),
    ],
    ("post", "/v1/batches/{batch_id}/pause"): [("post", "/v1/batches/{batch_id}/resume", _ID)],
    ("post", "/v1/batches/{batch_id}/cancel"): [
        ("get", "/v1/batches/{batch_id}", _ID),
        ("delete", "/v1/batches/{batch_id}", _ID),
        ("post", "/v1/batches/{batch_id}/retry", _ID),
        ("get", "/v1/batches/{batch_id}/results", _ID),
    ],
    ("post", "/v1/batches/{batch_id}/retry"): [
        ("get", "/v1/batches/{batch_id}", _ID),
        ("get", "/v1/batches/{batch_id}/results", _ID),
    ],
    ("post", "/v1/messages/batches"): [
        ("get", "/v1/messages/batches/{message_batch_id}", _ID),
        ("post", "/v1/messages/batches/{message_batch_id}/cancel", _ID),
        ("post", "/v1/messages/batches/{message_batch_id}/pause", _ID),
        ("post", "/v1/messages/batches/{message_batch_id}/resume", _ID),
        ("get", "/v1/messages/batches/{message_batch_id}/results", _ID),
        ("delete", "/v1/messages/batches/{message_batch_id}", _ID),
    ],
    ("post", "/v1/messages/batches/{message_batch_id}/pause"): [
        ("post", "/v1/messages/batches/{message_batch_id}/resume", _ID)
    ],
    # Results and delete answer once the batch has ended, which a cancelled one soon has.
    ("post", "/v1/messages/batches/{message_batch_id}/cancel"): [
        ("get", "/v1/messages/batches/{message_batch_id}", _ID),
        ("get", "/v1/messages/batches/{message_batch_id}/results", _ID),
        ("delete", "/v1/messages/batches/{message_batch_id}", _ID),
    ],
    ("post", "/v1/responses"): [
        ("get", "/v1/responses/{response_id}", _ID),
        ("post", "/v1/responses/{response_id}/cancel", _ID),
        ("delete", "/v1/responses/{response_id}", _ID),
    ],
    ("post", "/v1/responses/{response_id}/cancel"): [
        ("get", "/v1/responses/{response_id}", _ID),
        ("delete", "/v1/responses/{response_id}", _ID),
    ],
    ("get", "/v1/models"): [("get", "/v1/models/{model_id}", "$response.body#/data/0/id")],
    ("post", "/v1/webhook_endpoints"): [
        ("get", "/v1/webhook_endpoints/{endpoint_id}", _ID),
        ("post", "/v1/webhook_endpoints/{endpoint_id}", _ID),
        ("post", "/v1/webhook_endpoints/{endpoint_id}/rotate_secret", _ID),
        ("post", "/v1/webhook_endpoints/{endpoint_id}/test", _ID),
        ("delete", "/v1/webhook_endpoints/{endpoint_id}", _ID),
    ],
    # An endpoint read, changed or given a new secret can be sent a test event.
    **{
        source: [("post", "/v1/webhook_endpoints/{endpoint_id}/test", _ID)]
        for source in (
            ("get", "/v1/webhook_endpoints/{endpoint_id}"),
            ("post", "/v1/webhook_endpoints/{endpoint_id}"),
            ("post", "/v1/webhook_endpoints/{endpoint_id}/rotate_secret"),
        )
    },
}


_PATH_PARAMETER = re.compile(r"\{(\w+)\}")


def _operation_ref(method: str, path: str) -> str:
    return "#/paths/" + path.replace("~", "~0").replace("/", "~1") + "/" + method


def _add_links(schema: dict) -> None:
    paths = schema.get("paths", {})
    for (method, path), targets in _LINKS.items():
        links = paths[path][method]["responses"]["200"].setdefault("links", {})
        for target_method, target_path, value in targets:
            link: dict = {"operationRef": _operation_ref(target_method, target_path)}
            if isinstance(value, dict):
                link["requestBody"] = value
            else:
                link["parameters"] = {_PATH_PARAMETER.search(target_path).group(1): value}  # type: ignore[union-attr]
            links[paths[target_path][target_method]["operationId"]] = link
