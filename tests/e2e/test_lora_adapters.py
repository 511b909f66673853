"""LoRA adapters as models (issue #49): the session's model server serves the built-in
`batchd-tiny-lora` as `tl` on the `batchd-tiny-chat` engine (`--lora tl=batchd-tiny-lora`).
A batch may mix lines of the base and of its adapter; each line answers as it does in a batch of
its model alone, the adapter's answers differ from the base's, and the adapter's usage is booked
under its own name."""

from __future__ import annotations

import subprocess
import time
from collections import Counter, defaultdict

from harness.client import openai_client
from harness.server import BATCHD
from tests.support.batches import CHAT_MODEL, EMBED_MODEL, chat_line, create, results_by_custom_id, wait_for

ADAPTER = "tl"
PROMPTS = ["Hello! How are you today?", "The quick brown fox", "Write a short poem about the sea", "Numbers: 1 2 3"]


def _lines(model: str, prefix: str) -> list[dict]:
    return [chat_line(f"{prefix}-{i}", text, max_tokens=12, model=model) for i, text in enumerate(PROMPTS)]


def _run(client, lines: list[dict]) -> tuple[str, dict[str, dict]]:
    batch = wait_for(client, create(client, lines).id, timeout=300)
    assert batch.status == "completed" and batch.request_counts.completed == len(lines), batch
    output, errors = results_by_custom_id(client, batch)
    assert errors == {}
    return batch.id, {custom_id: record["response"]["body"] for custom_id, record in output.items()}


def _answer(body: dict) -> tuple[str, str, dict]:
    return body["model"], body["choices"][0]["message"]["content"], body["usage"]


def test_models_lists_the_adapter_with_its_base_as_parent(model_client):
    cards = {m.id: m for m in model_client.models.list().data}
    assert cards[ADAPTER].parent == CHAT_MODEL
    assert cards[ADAPTER].engine_state == "ready"
    assert cards[CHAT_MODEL].parent is None
    assert model_client.models.retrieve(ADAPTER).parent == CHAT_MODEL


def _admin_key(server) -> str:
    cmd = [str(BATCHD), "keys", "create", "--project", "ops", "--admin", "--data-dir", str(server.data_dir)]
    if server.database_url:
        cmd += ["--database-url", server.database_url]
    return subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=120).stdout.strip()


def test_mixed_batch_answers_as_base_only_and_adapter_only_batches(model_client, model_server):
    started = int(time.time())
    _, base = _run(model_client, _lines(CHAT_MODEL, "x"))
    _, adapted = _run(model_client, _lines(ADAPTER, "x"))
    # Interleaved: base, adapter, base, adapter...
    mixed_lines = [line for pair in zip(_lines(CHAT_MODEL, "b"), _lines(ADAPTER, "a"), strict=True) for line in pair]
    mixed_id, mixed = _run(model_client, mixed_lines)

    for i in range(len(PROMPTS)):
        assert _answer(mixed[f"b-{i}"]) == _answer(base[f"x-{i}"])
        assert _answer(mixed[f"a-{i}"]) == _answer(adapted[f"x-{i}"])
        assert mixed[f"a-{i}"]["model"] == ADAPTER and mixed[f"b-{i}"]["model"] == CHAT_MODEL
    # The adapter changes what the model says (greedy, so not by chance).
    assert [_answer(base[f"x-{i}"])[1] for i in range(len(PROMPTS))] != [
        _answer(adapted[f"x-{i}"])[1] for i in range(len(PROMPTS))
    ]
    assert sum(_answer(base[f"x-{i}"])[1] != _answer(adapted[f"x-{i}"])[1] for i in range(len(PROMPTS))) >= 3

    # Usage by served name, as the Usage API reports it: the adapter's lines under `tl`, the base's
    # under the base.
    admin = openai_client(model_server.base_url, _admin_key(model_server))
    page = admin.get(
        "/organization/usage/completions",
        cast_to=object,
        options={
            "params": {
                "start_time": started - 60,
                "end_time": int(time.time()) + 60,
                "bucket_width": "1m",
                "limit": 1440,
                "group_by": ["batch", "model"],
            }
        },
    )
    booked: dict[str, Counter] = defaultdict(Counter)
    for bucket in page["data"]:
        for r in bucket["results"]:
            if r["batch_id"] == mixed_id:
                booked[r["model"]].update(
                    requests=r["num_model_requests"], input=r["input_tokens"], output=r["output_tokens"]
                )

    def expected(prefix: str) -> Counter:
        usages = [mixed[f"{prefix}-{i}"]["usage"] for i in range(len(PROMPTS))]
        return Counter(
            requests=len(usages),
            input=sum(u["prompt_tokens"] for u in usages),
            output=sum(u["completion_tokens"] for u in usages),
        )

    assert booked == {CHAT_MODEL: expected("b"), ADAPTER: expected("a")}


def test_an_adapter_of_another_model_does_not_mix(model_client):
    """Only a base and its own adapters share a batch: the embedding model is not tl's base."""
    lines = [chat_line("a", model=ADAPTER), chat_line("e", model=EMBED_MODEL)]
    batch = wait_for(model_client, create(model_client, lines).id, timeout=120)
    assert batch.status == "failed"
    assert [e.code for e in batch.errors.data] == ["model_mismatch"]


def test_model_permissions_go_by_the_served_name(model_server):
    """A project denied `tl` may still use its base; a batch with a `tl` line is refused at that line."""
    admin = openai_client(model_server.base_url, "unused", admin_api_key=_admin_key(model_server)).admin.organization
    project = admin.projects.create(name="LoRA denied")
    key = admin.projects.service_accounts.create(project.id, name="runner").api_key
    assert key is not None
    admin.projects.model_permissions.update(project.id, mode="deny_list", model_ids=[ADAPTER])
    client = openai_client(model_server.base_url, key.value)

    refused = wait_for(client, create(client, [chat_line("b"), chat_line("a", model=ADAPTER)]).id, timeout=120)
    assert refused.status == "failed" and refused.errors is not None
    assert [(e.code, e.param, e.line) for e in refused.errors.data] == [("model_not_found", "body.model", 2)]
    assert wait_for(client, create(client, [chat_line("b", max_tokens=2)]).id, timeout=120).status == "completed"
