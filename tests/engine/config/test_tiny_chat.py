"""batchd-tiny-chat is built deterministically, atomically and only once."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from app.engine.config.tiny_chat import build_tiny_chat_model

# Builds the tiny model (torch: ~10 s of CPU to import), no vLLM: not in make test-fast.
pytestmark = pytest.mark.engine


def _digests(folder: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir())}


def test_build_is_deterministic(tmp_path):
    first = build_tiny_chat_model(tmp_path / "a" / "batchd-tiny-chat")
    second = build_tiny_chat_model(tmp_path / "b" / "batchd-tiny-chat")

    assert {"config.json", "model.safetensors", "tokenizer.json"} <= set(_digests(first))
    assert _digests(first) == _digests(second)
    # Nothing but the model is left beside it (the temp build dir was renamed).
    assert [p.name for p in first.parent.iterdir()] == ["batchd-tiny-chat"]


def test_build_is_idempotent(tmp_path):
    dest = build_tiny_chat_model(tmp_path / "batchd-tiny-chat")
    weights = dest / "model.safetensors"
    before = weights.stat().st_mtime_ns

    assert build_tiny_chat_model(dest) == dest
    assert weights.stat().st_mtime_ns == before


def test_tokenizer_and_config(tmp_path):
    from transformers import AutoConfig, AutoTokenizer

    dest = build_tiny_chat_model(tmp_path / "batchd-tiny-chat")
    tokenizer = AutoTokenizer.from_pretrained(dest)
    config = AutoConfig.from_pretrained(dest)

    assert (tokenizer.bos_token, tokenizer.eos_token, tokenizer.pad_token) == (
        "<|bos|>",
        "<|eos|>",
        "<|pad|>",
    )
    assert 400 <= len(tokenizer) <= 512 == config.vocab_size
    assert (config.hidden_size, config.num_hidden_layers, config.head_dim) == (128, 2, 64)
    assert (config.num_attention_heads, config.num_key_value_heads) == (2, 1)
    assert config.max_position_embeddings >= 2048

    prompt = tokenizer.apply_chat_template(
        [{"role": "user", "content": "Hello there"}], tokenize=False, add_generation_prompt=True
    )
    assert prompt == "<|bos|><|user|>Hello there<|eos|><|assistant|>"
    assert tokenizer.decode(tokenizer("Hello there")["input_ids"], skip_special_tokens=True) == ("Hello there")
