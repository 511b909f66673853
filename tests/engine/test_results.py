"""Token usage read from a line's response body (app/engine/results.py; no engine needed)."""

from __future__ import annotations

from app.engine.results import Usage


def test_usage_from_bodies():
    chat = {
        "usage": {
            "prompt_tokens": 7,
            "completion_tokens": 5,
            "total_tokens": 12,
            "prompt_tokens_details": {"cached_tokens": 3},
        }
    }
    responses = {
        "usage": {
            "input_tokens": 4,
            "output_tokens": 6,
            "input_tokens_details": {"cached_tokens": 1},
            "output_tokens_details": {"reasoning_tokens": 2},
        }
    }
    embeddings = {"usage": {"prompt_tokens": 9, "total_tokens": 9, "completion_tokens": 0}}

    assert Usage.from_body("/v1/chat/completions", chat) == Usage(7, 5, 3, 0)
    assert Usage.from_body("/v1/responses", responses) == Usage(4, 6, 1, 2)
    assert Usage.from_body("/v1/embeddings", embeddings) == Usage(9, 0, 0, 0)
    assert Usage.from_body("/v1/rerank", {"usage": {"prompt_tokens": 2}}).total_tokens == 2
    # Speech to text reports seconds of audio (vLLM's `{"type": "duration", "seconds": n}`).
    audio = {"text": "hi", "usage": {"type": "duration", "seconds": 12}}
    assert Usage.from_body("/v1/audio/transcriptions", audio) == Usage(seconds=12)
    assert Usage.from_body("/v1/audio/translations", audio).seconds == 12
    assert Usage.from_body("/v1/completions", {}) == Usage()
