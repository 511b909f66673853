"""Delivery of batch events (app/domains/webhooks/sender.py) by an app without models, where every batch fails validation and
so ends with `batch.failed`: signatures the official client verifies, retries with one
webhook-id, disabling a failing endpoint (delivery after a kill -9: tests/e2e/test_webhook_after_kill.py)."""

from __future__ import annotations

from itertools import pairwise

import openai
import pytest

from harness.poll import wait_until
from tests.conftest import WEBHOOK_TEST_ENV
from tests.support import db
from tests.support.webhook_receiver import WebhookReceiver
from tests.support.webhooks import failed_batch, settled_deliveries


def test_failed_batch_is_delivered_once_and_verifies(hooks_client, hooks_server):
    with WebhookReceiver() as receiver:
        endpoint = hooks_client.webhooks.create(url=receiver.url, name="f", event_types=["batch.failed"])
        other = hooks_client.webhooks.create(url=receiver.url, name="c", event_types=["batch.completed"])
        batch = failed_batch(hooks_client)
        receiver.wait_for(1)
        # Nothing else is owed: one delivery, made once; the completed-only endpoint is not told.
        settled = wait_until(lambda: settled_deliveries(hooks_server, batch.id), what="the delivery recorded")
        assert settled == [(endpoint.id, "delivered", 1)]
        assert len(receiver.deliveries) == 1
        (event,) = receiver.events(endpoint.signing_secret)
        assert event.type == "batch.failed" and event.data.id == batch.id and event.object == "event"
        assert event.id.startswith("evt_") and abs(event.created_at - batch.failed_at) <= 1
        assert receiver.deliveries[0].headers["webhook-id"] == event.id
        with pytest.raises(openai.InvalidWebhookSignatureError):
            receiver.events(other.signing_secret)


def test_receiver_failing_twice_gets_the_same_webhook_id_three_times(hooks_client, hooks_server):
    with WebhookReceiver(statuses=[500, 500, 200]) as receiver:
        endpoint = hooks_client.webhooks.create(url=receiver.url, name="r", event_types=["batch.failed"])
        batch = failed_batch(hooks_client)
        deliveries = receiver.wait_for(3, timeout=30)
        # And no fourth after the 200: the delivery is recorded as done after three attempts.
        settled = wait_until(lambda: settled_deliveries(hooks_server, batch.id), what="the delivery recorded")
        assert settled == [(endpoint.id, "delivered", 3)]
        assert [d.answered for d in receiver.deliveries] == [500, 500, 200]
        assert len({d.headers["webhook-id"] for d in deliveries}) == 1
        assert len({d.body for d in deliveries}) == 1
        events = receiver.events(endpoint.signing_secret)
        assert {e.data.id for e in events} == {batch.id}
        # Backoff: the second retry waited longer than the first. Each retry comes at least its
        # delay after the failure: the base (0.5 s here), doubled per attempt; a constant delay
        # would bring the third attempt about 0.5 s after the second.
        stamps = [int(d.headers["webhook-timestamp"]) for d in deliveries]
        assert stamps == sorted(stamps)
        base = float(WEBHOOK_TEST_ENV["BATCHD_WEBHOOK_RETRY_BASE_SECONDS"])
        gaps = [later.received_at - earlier.received_at for earlier, later in pairwise(deliveries)]
        assert gaps[0] >= base and gaps[1] >= 2 * base and gaps[1] > gaps[0], gaps
        assert hooks_client.webhooks.retrieve(endpoint.id).status == "enabled"


def test_endpoint_failing_for_long_is_disabled_and_can_be_enabled_again(hooks_client, hooks_server):
    with WebhookReceiver(statuses=[503] * 1000) as receiver:
        endpoint = hooks_client.webhooks.create(url=receiver.url, name="d", event_types=["batch.failed"])
        failed_batch(hooks_client)
        wait_until(
            lambda: hooks_client.webhooks.retrieve(endpoint.id).status == "disabled",
            30,
            "the failing endpoint disabled",
            interval=0.2,
        )
        current = hooks_client.webhooks.retrieve(endpoint.id)
        assert current.disabled_reason and [e.status for e in hooks_client.webhooks.list()] == ["disabled"]
        attempts = len(receiver.deliveries)
        pending = "SELECT attempts FROM webhook_deliveries WHERE endpoint_id = :e AND status = 'pending'"
        (before,) = db.execute(hooks_server, pending, e=endpoint.id)
        # A disabled endpoint gets nothing: its delivery is made due at once, then another
        # endpoint's delivery, due later, arrives; the sender, which takes due deliveries oldest
        # first, went past the disabled one without sending it.
        db.execute(
            hooks_server, "UPDATE webhook_deliveries SET next_attempt_at = 0 WHERE endpoint_id = :e", e=endpoint.id
        )
        with WebhookReceiver() as sentinel:
            hooks_client.webhooks.create(url=sentinel.url, name="s", event_types=["batch.failed"])
            failed_batch(hooks_client)
            sentinel.wait_for(1, timeout=30)
        assert len(receiver.deliveries) == attempts
        assert db.execute(hooks_server, pending, e=endpoint.id) == [before]

        receiver.statuses.clear()
        enabled = hooks_client.webhooks.update(endpoint.id, extra_body={"status": "enabled"})
        assert enabled.status == "enabled" and enabled.disabled_reason is None
        receiver.wait_for(attempts + 1)
        assert receiver.deliveries[-1].answered == 200
