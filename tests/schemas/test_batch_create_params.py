"""BatchCreateParams is the one contract of a batch create body: each refusal in OpenAI's words,
code and param, through the one error mapper (app/core/errors.py)."""

from __future__ import annotations

import pytest

from app.core.errors import InvalidRequest
from app.domains.batches.schemas import WINDOWS, BatchCreateParams
from app.schemas.common import validated

BODY = {"input_file_id": "file-1", "endpoint": "/v1/chat/completions", "completion_window": "24h"}
ENDPOINTS = (
    "'/v1/chat/completions', '/v1/completions', '/v1/embeddings', '/v1/score', '/v1/rerank', '/v1/responses', "
    "'/v1/audio/transcriptions', '/v1/audio/translations'"
)
EXPIRY = "Invalid 'output_expires_after.seconds': expected an integer between 3600 and 2592000, got {}."


def _refusal(**changes) -> tuple[str | None, str | None, str]:
    body = {key: value for key, value in {**BODY, **changes}.items() if value is not ...}
    with pytest.raises(InvalidRequest) as info:
        validated(BatchCreateParams, body, {WINDOWS: {"24h": 86400, "1h": 3600}})
    return info.value.param, info.value.code, info.value.message


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        (
            {"input_file_id": ...},
            ("input_file_id", "missing_required_parameter", "Missing required parameter: 'input_file_id'."),
        ),
        ({"endpoint": None}, ("endpoint", "missing_required_parameter", "Missing required parameter: 'endpoint'.")),
        (
            {"completion_window": ""},
            ("completion_window", "missing_required_parameter", "Missing required parameter: 'completion_window'."),
        ),
        (
            {"input_file_id": 5},
            ("input_file_id", "invalid_type", "Invalid type for 'input_file_id': expected a string."),
        ),
        (
            {"endpoint": "/v1/messages"},
            (
                "endpoint",
                "invalid_value",
                f"Invalid value for 'endpoint': '/v1/messages'. Supported values are: {ENDPOINTS}.",
            ),
        ),
        (
            {"completion_window": ["24h"]},
            (
                "completion_window",
                "invalid_value",
                "Invalid value for 'completion_window': '['24h']'. Supported values are: '24h', '1h'.",
            ),
        ),
        ({"metadata": []}, ("metadata", "invalid_type", "Invalid type for 'metadata': expected an object.")),
        (
            {"metadata": {f"k{i}": "v" for i in range(17)}},
            (
                "metadata",
                "object_above_max_properties",
                "Invalid 'metadata': too many properties. Expected an object with at most 16 properties, "
                "but got 17 instead.",
            ),
        ),
        (
            {"metadata": {"k" * 65: "v"}},
            ("metadata", "invalid_value", f"Invalid 'metadata': key '{'k' * 20}...' is longer than 64 characters."),
        ),
        ({"metadata": {"k": 1}}, ("metadata.k", "invalid_type", "Invalid type for 'metadata.k': expected a string.")),
        (
            {"metadata": {"k": "v" * 513}},
            (
                "metadata.k",
                "string_above_max_length",
                "Invalid 'metadata.k': string too long. Expected a string with maximum length 512, but got a string "
                "with length 513 instead.",
            ),
        ),
        (
            {"output_expires_after": {"anchor": "updated_at", "seconds": 3600}},
            (
                "output_expires_after.anchor",
                "invalid_value",
                "Invalid value for 'output_expires_after.anchor': 'updated_at'. Supported values are: 'created_at'.",
            ),
        ),
        (
            {"output_expires_after": {"anchor": "created_at", "seconds": 10}},
            ("output_expires_after.seconds", "invalid_value", EXPIRY.format(10)),
        ),
        (
            {"output_expires_after": {"anchor": "created_at", "seconds": 3600.5}},
            ("output_expires_after.seconds", "invalid_value", EXPIRY.format(3600.5)),
        ),
        (
            {"output_expires_after": {"anchor": "created_at", "seconds": True}},
            ("output_expires_after.seconds", "invalid_value", EXPIRY.format(True)),
        ),
    ],
)
def test_each_refusal_is_worded_as_openais(changes, expected):
    assert _refusal(**changes) == expected


def test_a_valid_body_comes_out_canonical():
    params = validated(
        BatchCreateParams,
        {**BODY, "endpoint": "/chat/completions", "output_expires_after": {"anchor": "created_at", "seconds": 7200.0}},
        {WINDOWS: {"24h": 86400}},
    )
    assert (params.endpoint, params.output_expires_after and params.output_expires_after.seconds) == (
        "/v1/chat/completions",
        7200,
    )
