"""How batchd spells the endpoints a line may name (app/core/endpoints.py)."""

from __future__ import annotations

import pytest

from app.core.endpoints import normalize_endpoint


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("/v1/chat/completions", "/v1/chat/completions"),
        ("/chat/completions", "/v1/chat/completions"),
        ("/v1/embeddings/", "/v1/embeddings"),
        ("/embeddings?api-version=2024-10-21", "/v1/embeddings"),
        ("/score", "/v1/score"),
        ("/rerank", "/v1/rerank"),
        ("/v1/responses", "/v1/responses"),
        ("/v1/completions", "/v1/completions"),
        ("/v1/messages", "/v1/messages"),
        ("/v1/moderations", None),
        ("/v2/rerank", None),
        ("", None),
        (None, None),
    ],
)
def test_normalize_endpoint(url, expected):
    assert normalize_endpoint(url) == expected
