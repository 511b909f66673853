"""Pause and resume (batchd's, `POST /v1/batches/{id}/pause` and `/resume`, through the official
client's raw `post`): a paused batch of several shards stays `in_progress` with `paused_at`, lets
its lines in flight finish and starts no other; resumed, it completes every line exactly once.
An admin pauses and resumes every running batch of a project at once; pausing a batch not in
progress is a 400 in OpenAI's envelope, an unknown one a 404."""

from __future__ import annotations

import json
import time

import anthropic
import openai
import pytest

from harness.poll import wait_until
from tests.conftest import API_KEYS_ENV
from tests.support.app_server import AppServer
from tests.support.batches import chat_line, create, wait_for
from tests.support.fake_engine import FakeEngines

ADMIN_KEY = "admin-pause"
LINES = 40
# How long a paused batch is watched for a line starting: several of the worker's 1 s polls.
QUIET_SECONDS = 3.0


@pytest.fixture(scope="module")
def paused_app(start_app) -> tuple[AppServer, FakeEngines]:
    """The fake engine with 5-line shards: a 40-line batch is eight shards."""
    engines = FakeEngines()
    env = {"BATCHD_API_KEYS": API_KEYS_ENV, "BATCHD_ADMIN_KEYS": ADMIN_KEY, "BATCHD_SHARD_LINES": "5"}
    return start_app(env, engines=engines), engines


def _post(client: openai.OpenAI, path: str) -> dict:
    return client.post(path, cast_to=object, body={})


def _held_batch(client: openai.OpenAI, engines: FakeEngines, tag: str):
    """A running batch whose lines wait in the engine (`fake:hold`) until released."""
    engines.hold()
    batch = create(client, [chat_line(f"{tag}-{i}", f"fake:hold {i}") for i in range(LINES)])
    wait_until(lambda: engines.in_flight > 0, timeout=20, what="lines in flight")
    return batch


def _frozen_while_paused(client: openai.OpenAI, engines: FakeEngines, batch_id: str) -> int:
    """Release the engine; once the lines in flight are recorded, no other line starts."""
    engines.release()

    def settled():
        counts = client.batches.retrieve(batch_id).request_counts
        return engines.in_flight == 0 and counts.completed == engines.executed - before

    before = 0
    wait_until(settled, timeout=20, what="the lines in flight recorded")
    started = engines.executed
    deadline = time.monotonic() + QUIET_SECONDS
    while time.monotonic() < deadline:  # a window in which nothing may happen
        assert engines.executed == started and engines.in_flight == 0, "a line started while paused"
        time.sleep(0.1)
    paused = client.batches.retrieve(batch_id)
    assert paused.status == "in_progress" and paused.model_extra["paused_at"] is not None
    assert paused.request_counts.completed == started < LINES
    return started


def _output_ids(client: openai.OpenAI, file_id: str) -> list[str]:
    return [json.loads(line)["custom_id"] for line in client.files.content(file_id).text.splitlines()]


def test_pause_mid_run_freezes_it_and_resume_completes_each_line_once(paused_app):
    server, engines = paused_app
    engines.executed = 0
    client = server.client("key-a")
    batch = _held_batch(client, engines, "pr")
    paused = _post(client, f"/batches/{batch.id}/pause")
    assert paused["status"] == "in_progress" and isinstance(paused["paused_at"], int)
    assert _post(client, f"/batches/{batch.id}/pause")["paused_at"] == paused["paused_at"]  # again: as it is
    _frozen_while_paused(client, engines, batch.id)

    resumed = _post(client, f"/batches/{batch.id}/resume")
    assert resumed["status"] == "in_progress" and "paused_at" not in resumed
    done = wait_for(client, batch.id, timeout=60)
    assert done.status == "completed" and done.request_counts.completed == LINES
    assert "paused_at" not in (done.model_extra or {})
    assert sorted(_output_ids(client, done.output_file_id)) == sorted(f"pr-{i}" for i in range(LINES))
    assert engines.executed == LINES  # each line ran exactly once


def test_an_admin_pauses_and_resumes_every_batch_of_a_project(paused_app):
    server, engines = paused_app
    engines.executed = 0
    client = server.client("key-a")
    admin = server.client(ADMIN_KEY)
    batch = _held_batch(client, engines, "adm")
    answer = _post(admin, "/organization/projects/proj-a/batches/pause")
    assert answer == {"object": "organization.project.batches", "project_id": "proj-a", "paused": True, "batches": 1}
    _frozen_while_paused(client, engines, batch.id)
    # An admin key pauses or resumes one batch of any project too.
    assert "paused_at" in _post(admin, f"/batches/{batch.id}/pause?project=proj-a")
    assert _post(admin, "/organization/projects/proj-a/batches/resume")["batches"] == 1
    done = wait_for(client, batch.id, timeout=60)
    assert done.status == "completed" and done.request_counts.completed == LINES == engines.executed
    with pytest.raises(openai.PermissionDeniedError):  # a project's key is no admin
        _post(client, "/organization/projects/proj-a/batches/pause")
    with pytest.raises(openai.NotFoundError):
        _post(admin, "/organization/projects/proj-nope/batches/pause")


def test_pausing_a_batch_not_in_progress_is_a_400_and_an_unknown_one_a_404(paused_app):
    server, engines = paused_app
    engines.release()
    client = server.client("key-a")
    batch = create(client, [chat_line("quick")])
    assert wait_for(client, batch.id, timeout=30).status == "completed"
    for action in ("pause", "resume"):
        with pytest.raises(openai.BadRequestError) as refused:
            _post(client, f"/batches/{batch.id}/{action}")
        assert refused.value.body["code"] == "batch_not_in_progress"
        assert refused.value.body["message"] == f"Cannot {action} a batch with status 'completed'."
        with pytest.raises(openai.NotFoundError):
            _post(client, f"/batches/batch_nope/{action}")
    with pytest.raises(openai.NotFoundError):  # another project's batch is unknown to this key
        _post(server.client("key-b"), f"/batches/{batch.id}/pause")


def test_a_message_batch_pauses_and_resumes(paused_app):
    """The Anthropic surface: `/v1/messages/batches/{id}/pause|resume` through the official
    client's raw `post`."""
    server, engines = paused_app
    engines.executed = 0
    engines.hold()
    client = server.anthropic("key-msgbatch")
    requests = [
        {
            "custom_id": f"mb-{i}",
            "params": {
                "model": "batchd-tiny-chat",
                "max_tokens": 4,
                "messages": [{"role": "user", "content": f"fake:hold {i}"}],
            },
        }
        for i in range(LINES)
    ]
    batch = client.messages.batches.create(requests=requests)
    wait_until(lambda: engines.in_flight > 0, timeout=20, what="requests in flight")
    paused = client.post(f"/v1/messages/batches/{batch.id}/pause", cast_to=object, body={})
    assert paused["processing_status"] == "in_progress" and paused["paused_at"].endswith("Z")
    engines.release()
    wait_until(lambda: engines.in_flight == 0, timeout=20, what="the requests in flight finished")
    started = engines.executed
    deadline = time.monotonic() + QUIET_SECONDS
    while time.monotonic() < deadline:
        assert engines.executed == started and engines.in_flight == 0, "a request started while paused"
        time.sleep(0.1)
    assert started < LINES
    resumed = client.post(f"/v1/messages/batches/{batch.id}/resume", cast_to=object, body={})
    assert "paused_at" not in resumed
    ended = wait_until(
        lambda: (b := client.messages.batches.retrieve(batch.id)).processing_status == "ended" and b,
        timeout=60,
        what="the batch ended",
    )
    assert ended.request_counts.succeeded == LINES == engines.executed
    with pytest.raises(anthropic.BadRequestError) as refused:  # an ended batch: Anthropic's envelope
        client.post(f"/v1/messages/batches/{batch.id}/pause", cast_to=object, body={})
    assert refused.value.body["error"]["type"] == "invalid_request_error"
