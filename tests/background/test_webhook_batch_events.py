"""One event per ending (app/background/webhook_sender.py), on the fake engine: a completed, a
failed, a cancelled and an expired batch each produce exactly one delivery of their own type,
verified by the official client. The lines of the batches cancelled or expired stall
(tests/support/fake_engine.py), so they are still running when that happens."""

from __future__ import annotations

import pytest

from harness.poll import wait_until
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
