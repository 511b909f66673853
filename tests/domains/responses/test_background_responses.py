"""Background Responses (`POST /v1/responses` with `background: true`) through the official
`openai` client, on the app in process with the fake engine (tests/support/fake_engine.py): each
is a one-line batch that only `/v1/responses` shows."""

from __future__ import annotations

import json
import time

import openai
import pytest

from app.core.metrics import REGISTRY
from harness.poll import wait_until
from tests.conftest import API_KEYS_ENV
from tests.support import db
from tests.support.app_server import AppServer
from tests.support.batches import CHAT_MODEL
from tests.support.fake_engine import FakeEngines
from tests.support.webhook_receiver import WebhookReceiver

ENDED = ("completed", "failed", "cancelled", "incomplete")
RESPONSE_EVENTS = ["response.completed", "response.failed", "response.cancelled", "response.incomplete"]


def _ended(client: openai.OpenAI, response_id: str):
    return wait_until(
        lambda: (r := client.responses.retrieve(response_id)).status in ENDED and r,
        timeout=30,
        what=f"response {response_id} to end",
        interval=0.1,
    )


def _events(server, response_id: str) -> list[str]:
    """The types of the webhook events recorded for the response."""
    return [t for (t,) in db.execute(server, "SELECT type FROM webhook_events WHERE batch_id = :id", id=response_id)]


def _batch_status(server, response_id: str) -> str:
    ((status,),) = db.execute(server, "SELECT status FROM batches WHERE id = :id", id=response_id)
    return status


def test_a_background_response_completes_with_output_and_usage(fake_client):
    created = fake_client.responses.create(model=CHAT_MODEL, input="hello there", background=True)
    assert created.id.startswith("resp_") and created.object == "response"
    assert (created.status, created.background, created.model, created.output) == ("queued", True, CHAT_MODEL, [])
    assert created.error is None and created.usage is None

    done = _ended(fake_client, created.id)
    assert (done.id, done.created_at, done.background, done.status) == (
        created.id,
        created.created_at,
        True,
        "completed",
    )
    assert done.output_text == "echo: hello there"
    assert done.usage is not None and done.usage.output_tokens == 2
    assert done.usage.input_tokens > 0 and done.usage.total_tokens == done.usage.input_tokens + 2
    assert done.error is None


def test_a_line_the_engine_fails_is_a_failed_response_with_its_error(fake_client):
    created = fake_client.responses.create(model=CHAT_MODEL, input="fake:fail", background=True)
    failed = _ended(fake_client, created.id)
    assert (failed.status, failed.output, failed.usage) == ("failed", [], None)
    assert failed.error is not None and failed.error.message == "The fake engine failed this line."


def test_an_unknown_model_is_a_failed_response_with_a_response_event_not_a_batch_one(fake_server, fake_client):
    created = fake_client.responses.create(model="no-such-model", input="hi", background=True)
    failed = _ended(fake_client, created.id)
    assert failed.status == "failed" and failed.error is not None and "no-such-model" in failed.error.message
    assert _events(fake_server, created.id) == ["response.failed"]


def test_another_project_gets_404_in_openais_envelope(fake_server, fake_client):
    created = fake_client.responses.create(model=CHAT_MODEL, input="mine", background=True)
    other = fake_server.client("key-b")
    for call in (other.responses.retrieve, other.responses.cancel, other.responses.delete):
        with pytest.raises(openai.NotFoundError) as caught:
            call(created.id)
        error = caught.value.response.json()["error"]
        assert (error["type"], error["param"]) == ("invalid_request_error", "response_id")
        assert error["message"] == f"No such response: {created.id}"
    assert _ended(fake_client, created.id).status == "completed"  # untouched by the other project


def test_cancel_while_running_stops_the_line(fake_server, fake_client):
    engines = fake_server.engines
    created = fake_client.responses.create(model=CHAT_MODEL, input="fake:stall", background=True)
    wait_until(
        lambda: fake_client.responses.retrieve(created.id).status == "in_progress" and engines.in_flight >= 1,
        what="the response's line to run",
    )
    cancelled = fake_client.responses.cancel(created.id)
    assert (cancelled.id, cancelled.status, cancelled.output) == (created.id, "cancelled", [])
    wait_until(lambda: _batch_status(fake_server, created.id) == "cancelled", what="the batch to end cancelled")
    assert engines.in_flight == 0
    again = fake_client.responses.cancel(created.id)  # cancelling twice returns the final response
    assert (again.status, fake_client.responses.retrieve(created.id).status) == ("cancelled", "cancelled")


def test_cancelling_a_completed_response_returns_it_as_it_is(fake_client):
    done = _ended(fake_client, fake_client.responses.create(model=CHAT_MODEL, input="quick", background=True).id)
    again = fake_client.responses.cancel(done.id)
    assert (again.status, again.output_text) == ("completed", "echo: quick")


def test_cancel_while_queued_never_runs_the_line(backend, tmp_path_factory, database_factory):
    """Queued on a replica without a worker (`--api-only`); a replica that runs lines, started
    after the cancel, ends it cancelled without running it."""
    data_dir, url = tmp_path_factory.mktemp("bg-queued"), database_factory()
    env = {"BATCHD_API_KEYS": API_KEYS_ENV}
    with AppServer(data_dir, url, env={**env, "BATCHD_API_ONLY": "true"}) as api:
        client = api.client("key-a")
        created = client.responses.create(model=CHAT_MODEL, input="never", background=True)
        assert client.responses.retrieve(created.id).status == "queued"
        assert client.responses.cancel(created.id).status == "cancelled"
        with pytest.raises(openai.ConflictError):  # not ended yet: no worker has stopped it
            client.responses.delete(created.id)
        engines = FakeEngines()
        with AppServer(data_dir, url, env=env, engines=engines) as worker:
            wait_until(lambda: _batch_status(worker, created.id) == "cancelled", what="the batch to end cancelled")
            assert worker.client("key-a").responses.retrieve(created.id).status == "cancelled"
        assert engines.executed == 0


def test_delete_then_404(fake_server, fake_client):
    done = _ended(fake_client, fake_client.responses.create(model=CHAT_MODEL, input="bye", background=True).id)
    (input_file_id,) = db.execute(fake_server, "SELECT input_file_id FROM batches WHERE id = :id", id=done.id)[0]
    assert fake_client.responses.delete(done.id) is None  # the client reads no body
    for call in (fake_client.responses.retrieve, fake_client.responses.cancel, fake_client.responses.delete):
        with pytest.raises(openai.NotFoundError):
            call(done.id)
    with pytest.raises(openai.NotFoundError):
        fake_client.files.retrieve(input_file_id)


def test_delete_answers_openais_deleted_object(fake_server, fake_client):
    done = _ended(fake_client, fake_client.responses.create(model=CHAT_MODEL, input="x", background=True).id)
    answer = fake_server.http.delete(f"/v1/responses/{done.id}", headers={"Authorization": "Bearer key-a"})
    assert (answer.status_code, answer.json()) == (200, {"id": done.id, "object": "response", "deleted": True})


@pytest.mark.parametrize("background", [False, None])
def test_a_response_that_is_not_background_is_a_400_that_says_where_online_traffic_goes(fake_client, background):
    extra = {} if background is None else {"background": background}
    with pytest.raises(openai.BadRequestError) as caught:
        fake_client.responses.create(model=CHAT_MODEL, input="hi", **extra)
    error = caught.value.response.json()["error"]
    assert (error["type"], error["param"]) == ("invalid_request_error", "background")
    assert "not an online server" in error["message"] and "vllm serve" in error["message"]
    assert 'service_tier: "flex"' in error["message"]


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"model": CHAT_MODEL, "background": True}, "input"),
        ({"model": CHAT_MODEL, "input": "hi", "background": True, "stream": 0}, "stream"),
        ({"model": CHAT_MODEL, "input": "hi", "background": True, "stream": True}, "stream"),
        ({"model": CHAT_MODEL, "input": "hi", "background": True, "max_output_tokens": "5"}, "max_output_tokens"),
    ],
)
def test_a_request_the_schema_refuses_is_a_400_and_stores_nothing(fake_server, body, param):
    before = db.execute(fake_server, "SELECT count(*) FROM batches")
    answer = fake_server.http.post("/v1/responses", json=body, headers={"Authorization": "Bearer key-a"})
    assert answer.status_code == 400, answer.text
    error = answer.json()["error"]
    assert (error["type"], error["param"]) == ("invalid_request_error", param)
    assert db.execute(fake_server, "SELECT count(*) FROM batches") == before


def test_background_responses_are_not_batches(fake_server, fake_client):
    created = fake_client.responses.create(model=CHAT_MODEL, input="hidden", background=True)
    _ended(fake_client, created.id)
    assert created.id not in [b.id for b in fake_client.batches.list(limit=100)]
    with pytest.raises(openai.NotFoundError):
        fake_client.batches.retrieve(created.id)
    with pytest.raises(openai.NotFoundError):
        fake_client.batches.cancel(created.id)


def test_a_response_is_due_its_deadline_and_expires_a_day_after_it_is_created(fake_server, fake_client):
    created = fake_client.responses.create(model=CHAT_MODEL, input="due", background=True)
    _ended(fake_client, created.id)
    ((api, window, created_at, due_at, expires_at),) = db.execute(
        fake_server,
        "SELECT api, completion_window, created_at, due_at, expires_at FROM batches WHERE id = :id",
        id=created.id,
    )
    assert (api, window, due_at - created_at, expires_at - created_at) == ("response", "60s", 60, 86_400)
    assert _events(fake_server, created.id) == ["response.completed"]  # no batch.* event


def test_a_response_past_its_lane_deadline_keeps_running_and_completes(start_app):
    """The lane's deadline orders the work; only the hard expiry ends a response."""
    server = start_app(
        {"BATCHD_API_KEYS": API_KEYS_ENV, "BATCHD_BACKGROUND_RESPONSE_DEADLINE_SECONDS": "1"}, engines=FakeEngines()
    )
    client = server.client("key-a")
    running = client.responses.create(model=CHAT_MODEL, input="fake:hold", background=True)
    wait_until(
        lambda: client.responses.retrieve(running.id).status == "in_progress" and server.engines.in_flight >= 1,
        what="the response's line to run",
    )
    ((due_at,),) = db.execute(server, "SELECT due_at FROM batches WHERE id = :id", id=running.id)
    # Past the lane deadline by more than the worker's expiry checks take (it used to end here).
    wait_until(lambda: time.time() > due_at + 3, timeout=10, what="the lane deadline to pass")
    assert client.responses.retrieve(running.id).status == "in_progress"
    assert _batch_status(server, running.id) == "in_progress"
    server.engines.release()
    done = _ended(client, running.id)
    assert (done.status, done.output_text) == ("completed", "echo: fake:hold")


def test_a_response_not_done_by_its_expiry_fails_as_expired(start_app):
    server = start_app(
        {
            "BATCHD_API_KEYS": API_KEYS_ENV,
            "BATCHD_BACKGROUND_RESPONSE_DEADLINE_SECONDS": "1",
            "BATCHD_BACKGROUND_RESPONSE_EXPIRY_SECONDS": "2",
        },
        engines=FakeEngines(),
    )
    client = server.client("key-a")
    created = client.responses.create(model=CHAT_MODEL, input="fake:stall", background=True)
    failed = _ended(client, created.id)
    assert (failed.status, failed.output) == ("failed", [])
    assert failed.error is not None and failed.error.code == "batch_expired"
    assert "background response expiry of 2 s" in failed.error.message
    assert server.engines.in_flight == 0
    assert _events(server, created.id) == ["response.failed"]


def test_response_webhooks_fire_with_openais_event_types(fake_server, fake_client):
    with WebhookReceiver() as receiver:
        endpoint = fake_client.webhooks.create(
            url=receiver.url, name="responses", event_types=[*RESPONSE_EVENTS, "batch.completed", "batch.failed"]
        )
        try:
            completed = fake_client.responses.create(model=CHAT_MODEL, input="hook", background=True)
            failed = fake_client.responses.create(model=CHAT_MODEL, input="fake:fail", background=True)
            incomplete = fake_client.responses.create(model=CHAT_MODEL, input="fake:incomplete", background=True)
            stalled = fake_client.responses.create(model=CHAT_MODEL, input="fake:stall", background=True)
            wait_until(
                lambda: fake_client.responses.retrieve(stalled.id).status == "in_progress",
                what="the stalled response to run",
            )
            fake_client.responses.cancel(stalled.id)
            assert _ended(fake_client, incomplete.id).status == "incomplete"
            receiver.wait_for(4, timeout=30)
            events = {event.data.id: event for event in receiver.events(endpoint.signing_secret)}
        finally:
            fake_client.webhooks.delete(endpoint.id)
    assert {response_id: event.type for response_id, event in events.items()} == {
        completed.id: "response.completed",
        failed.id: "response.failed",
        incomplete.id: "response.incomplete",
        stalled.id: "response.cancelled",
    }
    event = events[completed.id]
    assert event.object == "event" and event.id.startswith("evt_") and event.created_at > 0
    for delivery in receiver.deliveries:  # OpenAI's event payload, nothing more
        payload = json.loads(delivery.body)
        assert set(payload) == {"id", "object", "type", "created_at", "data"} and set(payload["data"]) == {"id"}


def test_an_ended_response_is_deleted_after_its_retention_period_and_a_running_one_is_kept(start_app):
    server = start_app(
        {
            "BATCHD_API_KEYS": API_KEYS_ENV,
            # Long enough that the test sees the response ended before it goes, on a busy host too.
            "BATCHD_BACKGROUND_RESPONSE_RETENTION_SECONDS": "4",
            "BATCHD_SWEEP_INTERVAL": "0.2",
        },
        engines=FakeEngines(),
    )
    client = server.client("key-a")
    running = client.responses.create(model=CHAT_MODEL, input="fake:hold", background=True)
    wait_until(lambda: client.responses.retrieve(running.id).status == "in_progress", what="the held line to run")
    ended = _ended(client, client.responses.create(model=CHAT_MODEL, input="short-lived", background=True).id)
    ((input_file_id, output_file_id),) = db.execute(
        server, "SELECT input_file_id, output_file_id FROM batches WHERE id = :id", id=ended.id
    )

    def gone() -> bool:
        try:
            client.responses.retrieve(ended.id)
        except openai.NotFoundError:
            return True
        return False

    wait_until(gone, timeout=30, what="the ended response to be deleted", interval=0.1)
    for file_id in (input_file_id, output_file_id):
        with pytest.raises(openai.NotFoundError):
            client.files.retrieve(file_id)
    # The running one, made before the ended one, is older than the retention period too: kept.
    assert client.responses.retrieve(running.id).status == "in_progress"
    server.engines.release()
    assert _ended(client, running.id).status == "completed"


def test_the_lane_metric_counts_each_ended_response(fake_client):
    """`batchd_single_request_seconds` (the app runs in this process: its registry is ours)."""
    labels = {"lane": "response", "ending": "completed"}

    def count() -> float:
        return REGISTRY.get_sample_value("batchd_single_request_seconds_count", labels) or 0.0

    before = count()
    done = _ended(fake_client, fake_client.responses.create(model=CHAT_MODEL, input="hi", background=True).id)
    assert done.status == "completed"
    wait_until(lambda: count() == before + 1, timeout=10, what="the response counted once in its lane")
    assert REGISTRY.get_sample_value("batchd_single_request_seconds_bucket", {**labels, "le": "+Inf"}) == count()


def test_background_creates_past_the_projects_cap_are_429s(start_app):
    """With the project's one create slot taken (held on the app's loop, as a slow create holds
    it), its next create is a 429 with Retry-After and queues nothing; another project's is served."""
    server = start_app(
        {"BATCHD_API_KEYS": API_KEYS_ENV, "BATCHD_BACKGROUND_RESPONSE_CREATE_MAX_CONCURRENT_PER_PROJECT": "1"},
        engines=FakeEngines(),
    )
    cap = server.runtime.caps.background_response_create

    async def take() -> None:
        cap.acquire("proj-a")

    async def give_back() -> None:
        cap.release("proj-a")

    client = server.client("key-a", max_retries=0)
    server.call(take)
    try:
        with pytest.raises(openai.RateLimitError) as caught:
            client.responses.create(model=CHAT_MODEL, input="hi", background=True)
        assert caught.value.response.headers["Retry-After"] == "1"
        assert "BATCHD_BACKGROUND_RESPONSE_CREATE_MAX_CONCURRENT_PER_PROJECT" in caught.value.message
        assert not db.execute(server, "SELECT id FROM batches WHERE project = 'proj-a'")
        other = server.client("key-b").responses.create(model=CHAT_MODEL, input="hi", background=True)
        assert other.status == "queued"
    finally:
        server.call(give_back)
    assert client.responses.create(model=CHAT_MODEL, input="hi", background=True).status == "queued"
