"""The documented estimate of a line's prompt tokens (a token per 4 bytes of prompt text, token-id
prompts by their length), used where no tokenizer can count them."""

from __future__ import annotations

from app.engine.prompt_tokens import estimate, prompt_parts


def test_chat_counts_the_text_of_every_message_part():
    body = {
        "model": "m",
        "messages": [
            {"role": "system", "content": "x" * 8},
            {"role": "user", "content": [{"type": "text", "text": "y" * 5}, {"type": "image_url", "image_url": {}}]},
        ],
    }
    assert prompt_parts("/v1/chat/completions", body) == (["x" * 8, "y" * 5], 0)
    assert estimate("/v1/chat/completions", body) == 4  # 13 bytes, rounded up


def test_token_ids_count_as_they_are_and_text_by_utf8_bytes():
    assert estimate("/v1/completions", {"prompt": [1, 2, 3]}) == 3
    assert estimate("/v1/embeddings", {"input": [[1, 2], [3]]}) == 3
    assert estimate("/v1/embeddings", {"input": ["é" * 4]}) == 2  # 8 bytes
    assert estimate("/v1/rerank", {"query": "abcd", "documents": ["abcd", {"text": "abcd"}]}) == 3
    assert estimate("/v1/chat/completions", {"messages": "not a list"}) == 3
