"""A webhook is delivered after a kill -9 between a batch's terminal status and the delivery:
two real `batchd serve` processes, the first killed (moved from tests/webhooks/test_delivery.py)."""

from __future__ import annotations

import pytest

from harness.poll import wait_until
from harness.server import ServerProcess
from tests.conftest import API_KEYS_ENV, WEBHOOK_TEST_ENV
from tests.support.webhook_receiver import WebhookReceiver
from tests.support.webhooks import failed_batch, project_client, remove_endpoints, settled_deliveries

# Real `batchd serve` processes, without models: not in make test-fast (tests/conftest.py).
pytestmark = pytest.mark.engine


def test_kill_between_terminal_status_and_delivery_still_delivers(tmp_path, database_factory):
    """SIGKILL after the sender claimed the event but before it sent anything; the restarted
    server re-sends it once the claim's lease runs out."""
    data_dir, database_url = tmp_path / "data", database_factory()
    env = {"BATCHD_API_KEYS": API_KEYS_ENV, **WEBHOOK_TEST_ENV, "BATCHD_WEBHOOK_TIMEOUT_SECONDS": "1"}
    first = ServerProcess(data_dir, database_url, env={**env, "BATCHD_TEST_FAULT": "webhook_sending"}).start()
    second = None
    try:
        with WebhookReceiver() as receiver:
            client = project_client(first)
            endpoint = client.webhooks.create(url=receiver.url, name="k", event_types=["batch.failed"])
            batch = failed_batch(client)
            marker = data_dir / "fault-webhook_sending"
            wait_until(marker.exists, 30, lambda: first.log()[-2000:], interval=0.05)
            first.kill()
            assert receiver.deliveries == []

            second = ServerProcess(data_dir, database_url, env=env).start()
            (delivery,) = receiver.wait_for(1, timeout=30)
            (event,) = receiver.events(endpoint.signing_secret)
            assert event.type == "batch.failed" and event.data.id == batch.id
            # Once: the first server's claim counted one attempt, the second server's the other.
            settled = wait_until(lambda: settled_deliveries(second, batch.id), what="the delivery recorded")
            assert settled == [(endpoint.id, "delivered", 2)]
            assert len(receiver.deliveries) == 1
            remove_endpoints(project_client(second))
    finally:
        first.kill()
        if second is not None:
            second.stop()
