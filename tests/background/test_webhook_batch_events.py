"""One event per ending (app/domains/webhooks/sender.py), on the fake engine: a completed, a
failed, a cancelled and an expired batch each produce exactly one delivery of their own type,
verified by the official client. The lines of the batches cancelled or expired stall
(tests/support/fake_engine.py), so they are still running when that happens."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import openai
import pytest

from app.background.sweeper import _batch_webhooks
from app.db.engine import Database
from harness.poll import wait_until
from tests.support import db
from tests.support.batches import chat_line, create, wait_for
from tests.support.webhook_receiver import WebhookReceiver
from tests.support.webhooks import clean_project, settled_deliveries

EVENTS = ["batch.completed", "batch.failed", "batch.cancelled", "batch.expired"]


@pytest.fixture
def fake_hooks_client(fake_server):
    with clean_project(fake_server) as client:
        yield client


def _stalling(prefix: str, n: int) -> list[dict]:
    return [chat_line(f"{prefix}-{i}", f"story {i} fake:stall") for i in range(n)]


def test_one_event_per_batch_ending(fake_hooks_client, fake_server):
    client = fake_hooks_client
    with WebhookReceiver() as receiver:
        endpoint = client.webhooks.create(url=receiver.url, name="all", event_types=EVENTS)
        batches = {
            "batch.completed": create(client, [chat_line("c-0"), chat_line("c-1")]),
            "batch.failed": create(client, [chat_line("f-0", model="no-such-model")]),
            "batch.cancelled": create(client, _stalling("x", 20)),
            "batch.expired": create(client, _stalling("e", 20), window="3s"),
        }
        client.batches.cancel(batches["batch.cancelled"].id)
        ended = {kind: wait_for(client, b.id, timeout=60).status for kind, b in batches.items()}
        assert ended == {kind: kind.removeprefix("batch.") for kind in EVENTS}

        receiver.wait_for(4)
        # And nothing more arrives: each ending's one delivery is recorded as made once.
        for batch in batches.values():
            settled = wait_until(lambda b=batch: settled_deliveries(fake_server, b.id), what=f"{batch.id} delivered")
            assert settled == [(endpoint.id, "delivered", 1)]
        events = receiver.events(endpoint.signing_secret)
        assert sorted((e.type, e.data.id) for e in events) == sorted((k, b.id) for k, b in batches.items())
        assert len({d.headers["webhook-id"] for d in receiver.deliveries}) == 4


def test_a_batch_webhook_receives_its_batch_ending_alone(fake_hooks_client, fake_server):
    """`webhook` on create: an endpoint for that batch alone, its secret in the create response
    only, one signed event, then removed; another batch of the project sends it nothing."""
    client = fake_hooks_client
    with WebhookReceiver() as receiver:
        hooked = create(
            client,
            [chat_line("w-0"), chat_line("w-1")],
            extra_body={"webhook": {"url": receiver.url, "events": ["batch.completed"]}},
        )
        other = create(client, [chat_line("o-0")])
        hook = hooked.model_extra["webhook"]
        assert (hook["url"], hook["events"]) == (receiver.url, ["batch.completed"])
        assert hook["secret"].startswith("whsec_")
        assert "webhook" not in client.batches.retrieve(hooked.id).model_extra
        assert list(client.webhooks.list()) == [], "a batch's endpoint is not one of the project's"
        assert wait_for(client, hooked.id).status == "completed"
        assert wait_for(client, other.id).status == "completed"
        receiver.wait_for(1)
        wait_until(
            lambda: not db.execute(fake_server, "SELECT id FROM webhook_endpoints WHERE id = :i", i=hook["id"]),
            what="the batch's endpoint removed once its event is delivered",
        )
        assert db.execute(fake_server, "SELECT COUNT(*) FROM webhook_events WHERE batch_id = :b", b=other.id)[0][0] == 1
        [event] = receiver.events(hook["secret"])
        assert (event.type, event.data.id) == ("batch.completed", hooked.id)
        assert len(receiver.deliveries) == 1


def test_a_batch_webhook_url_follows_the_outbound_rules(fake_hooks_client):
    client = fake_hooks_client
    file = client.files.create(file=("in.jsonl", b'{"custom_id":"a"}\n'), purpose="batch")
    try:
        client.batches.create(
            input_file_id=file.id,
            endpoint="/v1/chat/completions",
            completion_window="24h",
            extra_body={"webhook": {"url": "http://169.254.169.254/hook"}},
        )
    except openai.BadRequestError as exc:
        assert exc.param == "webhook.url"
    else:
        raise AssertionError("a link-local webhook URL was accepted")


def test_a_batch_webhook_with_nothing_to_receive_is_removed(fake_hooks_client, fake_server):
    """One not asking for its batch's ending goes when the batch ends; one whose batch is gone,
    at the next sweep."""
    client = fake_hooks_client
    with WebhookReceiver() as receiver:
        batch = create(
            client, [chat_line("n-0")], extra_body={"webhook": {"url": receiver.url, "events": ["batch.failed"]}}
        )
        endpoint_id = batch.model_extra["webhook"]["id"]
        assert wait_for(client, batch.id).status == "completed"
        assert db.execute(fake_server, "SELECT id FROM webhook_endpoints WHERE id = :i", i=endpoint_id) == []
        orphan = create(client, _stalling("n", 1), extra_body={"webhook": {"url": receiver.url}})
        orphan_id = orphan.model_extra["webhook"]["id"]
        db.execute(fake_server, "UPDATE webhook_endpoints SET batch_id = 'batch_gone' WHERE id = :i", i=orphan_id)

        async def sweep() -> None:
            database = Database(db.database_url(fake_server))
            try:
                await _batch_webhooks(database, None, SimpleNamespace(webhook_retry_horizon_seconds=3600))  # type: ignore[arg-type]
            finally:
                await database.dispose()

        asyncio.run(sweep())
        assert db.execute(fake_server, "SELECT id FROM webhook_endpoints WHERE id = :i", i=orphan_id) == []
        client.batches.cancel(orphan.id)
        assert wait_for(client, orphan.id).status == "cancelled"
        assert receiver.deliveries == []
