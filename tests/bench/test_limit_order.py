"""The limit runs lines in batchd's order, so a ratio to it does not credit batchd's ordering."""

from app.pipeline.ordering import REORDER_LINES, prompt_text
from bench.limit_runner import in_batchd_order


def _chat(text: str) -> dict:
    return {"messages": [{"role": "user", "content": text}]}


def test_each_block_of_reorder_lines_is_sorted_by_prompt_text_and_no_line_crosses_blocks():
    bodies = [_chat(f"doc {(i * 7919) % 1000:04d} q{i}") for i in range(REORDER_LINES + 500)]
    ordered = in_batchd_order(bodies)
    first, rest = ordered[:REORDER_LINES], ordered[REORDER_LINES:]
    assert first == sorted(bodies[:REORDER_LINES], key=prompt_text)
    assert rest == sorted(bodies[REORDER_LINES:], key=prompt_text)
    assert first != bodies[:REORDER_LINES]  # the input was not already in order


def test_embedding_inputs_are_ordered_by_their_text():
    assert in_batchd_order([{"input": "b"}, {"input": "a"}, {"input": "c"}]) == [
        {"input": "a"},
        {"input": "b"},
        {"input": "c"},
    ]
