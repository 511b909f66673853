"""The endpoints batchd salts (app/pipeline/cache_salt.py) are those whose vLLM request types take
`cache_salt`: a line of any other (audio) would be refused for the field."""

from __future__ import annotations

import typing

from app.engine.local.requests import REQUEST_TYPES
from app.pipeline.cache_salt import SALTED_ENDPOINTS


def _members(request_type: typing.Any) -> list[typing.Any]:
    if typing.get_origin(request_type) is typing.Annotated:
        request_type = typing.get_args(request_type)[0]
    return list(typing.get_args(request_type)) or [request_type]


def test_salted_endpoints_are_the_vllm_requests_with_a_cache_salt():
    takes_salt = {
        endpoint
        for endpoint, request_type in REQUEST_TYPES.items()
        if all("cache_salt" in member.model_fields for member in _members(request_type))
    }
    assert takes_salt == SALTED_ENDPOINTS
