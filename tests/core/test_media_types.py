"""app/core/media_types.py's is_json says JSON for every Content-Type FastAPI parses as JSON
(fastapi/routing.py reads the value with email.message: maintype `application`, subtype `json`
or `*+json`): whatever FastAPI parses, the input-hygiene guard and the body limit see as JSON."""

from __future__ import annotations

import email.message

import pytest

from app.core.media_types import is_json

VALUES = [
    "application/json",
    "Application/JSON",
    "APPLICATION/JSON; charset=utf-8",
    " application/json ;charset=utf-8",
    "application/json;",
    "application/x+json",
    "application/vnd.api+JSON",
    "application/problem+json; q=1",
    "application/+json",
    "application/json\t; a=b",
    "application/a/b+json",
    "application/json, text/plain",
    "application / json",
    "application/jsonl",
    "application/json-seq",
    "text/json",
    "text/plain",
    "multipart/form-data; boundary=x",
    "json",
    "",
    ";application/json",
]


def _fastapi_parses_as_json(value: str) -> bool:
    message = email.message.Message()
    message["content-type"] = value
    subtype = message.get_content_subtype()
    return message.get_content_maintype() == "application" and (subtype == "json" or subtype.endswith("+json"))


@pytest.mark.parametrize("value", VALUES)
def test_every_content_type_fastapi_parses_as_json_is_json(value):
    if _fastapi_parses_as_json(value):
        assert is_json(value)


def test_the_spellings_that_are_and_are_not_json():
    assert [v for v in VALUES if is_json(v)] == VALUES[:11]
