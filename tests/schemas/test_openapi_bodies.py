"""The document's JSON request bodies are the pydantic models the services validate them with
(app/schemas/common.py `json_body` / `validated`), so schema and validator cannot drift."""

from __future__ import annotations

import pytest
from fastapi.routing import APIRoute

from app.domains.batches.schemas import BatchCreateParams
from app.domains.message_batches.schemas import MessageBatchCreateParams
from app.domains.responses.schemas import ResponseCreateParams
from app.http.app import create_app
from app.schemas.common import BODY_MODEL, BODY_MODELS

# Bodies parsed by hand from the request stream (never held in memory), so no model validates
# them as a whole: their schema is written out in app/schemas/ (multipart_openapi).
STREAMED_MULTIPART = {("post", "/v1/files"), ("post", "/v1/uploads/{upload_id}/parts")}
# Streamed bodies that also take JSON, read by the route itself: an import by reference.
ALSO_JSON = {("post", "/v1/files")}
REF = "#/components/schemas/"


@pytest.fixture(scope="module")
def app():
    return create_app()


@pytest.fixture(scope="module")
def document(app):
    return app.openapi()


def _body_schema(model) -> tuple[dict, dict]:
    schema = model.model_json_schema(ref_template=REF + "{model}")
    return schema, schema.pop("$defs", {})


def test_every_json_body_is_the_schema_of_the_model_that_validates_it(app, document):
    routes = {
        (method.lower(), route.path_format): route
        for route in app.routes
        if isinstance(route, APIRoute)
        for method in route.methods
    }
    components = document["components"]["schemas"]
    json_bodies = 0
    for path, operations in document["paths"].items():
        for method, operation in operations.items():
            body = operation.get("requestBody")
            if body is None:
                continue
            assert BODY_MODEL not in operation  # the internal marker never reaches the document
            if (method, path) in STREAMED_MULTIPART:
                also = ["application/json"] if (method, path) in ALSO_JSON else []
                assert list(body["content"]) == ["multipart/form-data", *also], path
                continue
            assert list(body["content"]) == ["application/json"], (method, path)
            name = routes[(method, path)].openapi_extra[BODY_MODEL]
            reference = {"$ref": REF + name}
            expected = reference if body["required"] else {"anyOf": [reference, {"type": "null"}]}
            assert body["content"]["application/json"]["schema"] == expected, (method, path)
            schema, nested = _body_schema(BODY_MODELS[name])
            assert components[name] == schema, name
            for nested_name, nested_schema in nested.items():
                assert components[nested_name] == nested_schema, nested_name
            json_bodies += 1
    assert json_bodies >= 2


@pytest.mark.parametrize(
    ("path", "model"),
    [
        ("/v1/batches", BatchCreateParams),
        ("/v1/messages/batches", MessageBatchCreateParams),
        ("/v1/responses", ResponseCreateParams),
    ],
)
def test_create_bodies_state_their_models_rules(document, path, model):
    schema = document["components"]["schemas"][model.__name__]
    assert document["paths"][path]["post"]["requestBody"]["required"] is True
    assert set(schema["required"]) == {name for name, field in model.model_fields.items() if field.is_required()}


def test_the_batch_body_states_bounds_and_enums():
    schema, nested = _body_schema(BatchCreateParams)
    properties = schema["properties"]
    assert "/v1/chat/completions" in properties["endpoint"]["enum"]
    assert "/v1/messages" not in properties["endpoint"]["enum"]
    assert properties["completion_window"]["enum"][0] == "24h"
    metadata = properties["metadata"]["anyOf"][0]
    assert (metadata["maxProperties"], metadata["propertyNames"], metadata["additionalProperties"]["maxLength"]) == (
        16,
        {"maxLength": 64},
        512,
    )
    assert nested["OutputExpiresAfter"]["properties"]["seconds"] | {"title": None} == {
        "type": "integer",
        "minimum": 3600,
        "maximum": 2_592_000,
        "title": None,
    }


@pytest.mark.parametrize("path", ["/v1/responses", "/v1/responses/{response_id}/cancel"])
def test_the_response_posts_take_an_idempotency_key(document, path):
    operation = document["paths"][path]["post"]
    assert [p["name"] for p in operation["parameters"] if p["in"] == "header"] == ["Idempotency-Key"]
    assert operation["responses"]["409"]["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/ErrorResponse"
    }


def test_background_responses_are_documented_as_openais_objects(document):
    paths = document["paths"]
    assert set(paths["/v1/responses/{response_id}"]) == {"get", "delete"}
    response = paths["/v1/responses/{response_id}"]["get"]["responses"]["200"]["content"]["application/json"]
    assert response["schema"] == {"$ref": "#/components/schemas/ResponseObject"}
    status = document["components"]["schemas"]["ResponseObject"]["properties"]["status"]
    assert status["enum"] == ["queued", "in_progress", "completed", "failed", "cancelled", "incomplete"]
    links = paths["/v1/responses"]["post"]["responses"]["200"]["links"]
    assert {link["operationRef"].rsplit("~1", 1)[-1] for link in links.values()} >= {"{response_id}/get"}
