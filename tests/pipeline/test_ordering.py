"""Lines sharing a prompt prefix are run side by side, within a bounded buffer (a shard of a\nbatch with no prefix-ordered copy)."""

import asyncio

from app.pipeline.lines import InputLine
from app.pipeline.ordering import grouped_by_prefix
from app.pipeline.prefix_order import prefix_key, prompt_text


def _chat(line_no: int, document: str, question: str) -> InputLine:
    body = {"messages": [{"role": "system", "content": document}, {"role": "user", "content": question}]}
    return InputLine(line_no, f"c{line_no}", "/v1/chat/completions", body)


async def _collect(lines, **limits):
    async def source():
        for line in lines:
            yield line

    return [line async for line in grouped_by_prefix(source(), **limits)]


def test_lines_about_the_same_document_become_adjacent():
    lines = [_chat(i, f"document {i % 3}", f"question {i}") for i in range(12)]
    ordered = asyncio.run(_collect(lines))
    keys = [prefix_key(line.body) for line in ordered]
    assert keys == sorted(keys)
    documents = [line.body["messages"][0]["content"] for line in ordered]
    assert sum(1 for n, d in enumerate(documents) if n == 0 or documents[n - 1] != d) == 3
    assert sorted(line.line_no for line in ordered) == list(range(12))


def test_reordering_never_looks_past_the_buffer():
    lines = [_chat(i, f"document {i % 2}", "q") for i in range(8)]
    ordered = asyncio.run(_collect(lines, max_lines=4))
    assert {line.line_no for line in ordered[:4]} == {0, 1, 2, 3}
    assert {line.line_no for line in ordered[4:]} == {4, 5, 6, 7}


def test_lines_of_a_base_and_its_adapter_are_grouped_by_model_first():
    """A batch may mix a base model and its LoRA adapters: each model's lines run together."""
    lines = [_chat(i, f"document {i % 2}", f"question {i}") for i in range(8)]
    for line in lines:
        line.body["model"] = "tl" if line.line_no % 3 else "base"
    ordered = asyncio.run(_collect(lines))
    models = [line.body["model"] for line in ordered]
    assert models == sorted(models)
    for model in ("base", "tl"):
        keys = [prefix_key(line.body) for line in ordered if line.body["model"] == model]
        assert keys == sorted(keys)


def test_prompt_text_reads_every_endpoint_shape():
    assert prompt_text({"prompt": "abc"}) == "abc"
    assert prompt_text({"input": ["first", "second"]}) == "first"
    assert (
        prompt_text({"messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]}) == "user\x00hi\x00"
    )
    assert prompt_text({"query": "q"}) == ""
