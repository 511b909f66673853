"""A file made through the Uploads API is ordinary batch input: a batch on it runs on the
built-in models and every line comes back."""

from __future__ import annotations

from tests.support.batches import chat_line, embedding_line, jsonl, results_by_custom_id, wait_for


def test_chunked_upload_is_usable_as_batch_input(model_client):
    lines = [chat_line(f"chat-{i}", f"Say {i}") for i in range(6)] + [embedding_line(f"emb-{i}") for i in range(6)]
    data = jsonl(lines)
    # Parts cut through the middle of lines: completion must join them byte for byte.
    upload = model_client.uploads.upload_file_chunked(
        file=data,
        filename="mixed.jsonl",
        bytes=len(data),
        mime_type="text/jsonl",
        purpose="batch",
        part_size=len(data) // 4 + 1,
    )
    assert upload.status == "completed"

    for endpoint, prefix in (("/v1/chat/completions", "chat-"), ("/v1/embeddings", "emb-")):
        only = jsonl([line for line in lines if line["custom_id"].startswith(prefix)])
        part_upload = model_client.uploads.upload_file_chunked(
            file=only,
            filename=f"{prefix}input.jsonl",
            bytes=len(only),
            mime_type="text/jsonl",
            purpose="batch",
            part_size=len(only) // 3 + 1,
        )
        batch = model_client.batches.create(
            input_file_id=part_upload.file.id, endpoint=endpoint, completion_window="24h"
        )
        done = wait_for(model_client, batch.id)
        assert done.status == "completed", done.errors
        output, errors = results_by_custom_id(model_client, done)
        assert set(output) == {f"{prefix}{i}" for i in range(6)} and errors == {}
        assert all(line["response"]["status_code"] == 200 for line in output.values())
    assert model_client.files.content(upload.file.id).content == data
