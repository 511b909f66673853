"""Input-file validation: asynchronous, all-or-nothing, one error per offending line with its
code, 1-based line and param; on the fake engine (its body check refuses `messages` that is not
a list; the real engine's schema check: tests/e2e/test_engine_body_check.py)."""

from __future__ import annotations

import json

import pytest

from tests.support.batches import CHAT_MODEL, EMBED_MODEL, chat_line, create, embedding_line, jsonl, wait_for


def _with(line: dict, **changes) -> dict:
    line = json.loads(json.dumps(line))
    for dotted, value in changes.items():
        target, *path = line, *dotted.split("__")
        for key in path[:-1]:
            target = target[key]
        if value is ...:
            del target[path[-1]]
        else:
            target[path[-1]] = value
    return line


CASES = {
    "invalid_json_line": (jsonl([chat_line("a")]) + b"{not json\n", "invalid_json_line", 2, None),
    "missing_method": (jsonl([_with(chat_line("a"), method=...)]), "missing_required_parameter", 1, "method"),
    "missing_custom_id": (
        jsonl([chat_line("a"), _with(chat_line("b"), custom_id=...)]),
        "missing_required_parameter",
        2,
        "custom_id",
    ),
    "missing_model": (jsonl([_with(chat_line("a"), body__model=...)]), "missing_required_parameter", 1, "body.model"),
    "duplicate_custom_id": (
        jsonl([chat_line("a"), chat_line("b"), chat_line("a")]),
        "duplicate_custom_id",
        3,
        "custom_id",
    ),
    "url_mismatch": (jsonl([chat_line("a"), _with(chat_line("b"), url="/v1/embeddings")]), "url_mismatch", 2, "url"),
    "model_mismatch": (
        jsonl([chat_line("a"), _with(chat_line("b"), body__model=EMBED_MODEL)]),
        "model_mismatch",
        2,
        "body.model",
    ),
    "model_not_found": (jsonl([_with(chat_line("a"), body__model="gpt-4o")]), "model_not_found", 1, "body.model"),
    "streaming_unsupported": (
        jsonl([chat_line("a"), chat_line("b", stream=True)]),
        "streaming_unsupported",
        2,
        "body.stream",
    ),
    "invalid_request": (
        jsonl([chat_line("a"), _with(chat_line("b"), body__messages="not a list")]),
        "invalid_request",
        2,
        "body.messages",
    ),
    "empty_file": (b"\n\n", "empty_file", None, None),
    "too_many_tasks": (jsonl([chat_line(f"l{i}") for i in range(3001)]), "too_many_tasks", 3001, None),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_validation_error(fake_client, case):
    data, code, line, param = CASES[case]
    batch = create(fake_client, data)
    assert batch.status == "validating"
    done = wait_for(fake_client, batch.id, timeout=60)
    assert done.status == "failed" and done.failed_at is not None
    assert done.errors.object == "list"
    first = done.errors.data[0]
    assert (first.code, first.line, first.param) == (code, line, param), first
    assert first.message
    # All or nothing: no line ran, no files.
    assert done.output_file_id is None and done.error_file_id is None
    assert done.request_counts.completed == 0 and done.in_progress_at is None


def test_chat_lines_on_an_embedding_model_are_rejected(fake_client):
    lines = [_with(chat_line("a"), body__model=EMBED_MODEL)]
    done = wait_for(fake_client, create(fake_client, lines).id, timeout=60)
    assert done.status == "failed"
    error = done.errors.data[0]
    assert (error.code, error.line, error.param) == ("unsupported_endpoint", 1, "url")


def test_every_bad_line_is_reported(fake_client):
    lines = [
        chat_line("ok"),
        _with(chat_line("x"), method="GET"),
        chat_line("ok"),
        _with(embedding_line("e"), body__model=CHAT_MODEL),
    ]
    done = wait_for(fake_client, create(fake_client, lines).id, timeout=60)
    assert [(e.code, e.line) for e in done.errors.data] == [
        ("invalid_request", 2),
        ("duplicate_custom_id", 3),
        ("url_mismatch", 4),
    ]
