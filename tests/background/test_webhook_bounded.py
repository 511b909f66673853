"""Every webhook attempt is bounded (app/domains/webhooks/delivery.py): a receiver answering a
gzip bomb costs the server no more than a few KiB (the reply is asked for as is and never
inflated), a receiver trickling its reply is cut at BATCHD_WEBHOOK_TIMEOUT_SECONDS, connect to
last byte, and while it trickles another project's `batch.completed` is delivered (each attempt
is a task of its own: the sender never waits for the slowest before claiming more)."""

from __future__ import annotations

import time
import tracemalloc

import openai
import pytest

from harness.poll import wait_until
from tests.conftest import API_KEYS_ENV, WEBHOOK_TEST_ENV
from tests.support import db
from tests.support.batches import chat_line, create, wait_for
from tests.support.fake_engine import FakeEngines
from tests.support.hostile_receivers import HostileReceiver, gzip_bomb
from tests.support.webhook_receiver import WebhookReceiver
from tests.support.webhooks import remove_endpoints

# The attempt deadline where nothing else must happen while an attempt is held (each test waits it out).
TIMEOUT_S = 4.0
# Room for a slow hour where another project's batch must end and be told while the trickling
# attempt is still held: beside the engine session CI saw that take 10 s.
BUSY_TIMEOUT_S = 15.0
MB = 1_000_000


def _bounded(start_app, timeout: float):
    return start_app(
        {"BATCHD_API_KEYS": API_KEYS_ENV, **WEBHOOK_TEST_ENV, "BATCHD_WEBHOOK_TIMEOUT_SECONDS": str(timeout)},
        engines=FakeEngines(),
    )


@pytest.fixture(scope="module")
def bounded_server(start_app):
    return _bounded(start_app, TIMEOUT_S)


@pytest.fixture(scope="module")
def busy_bounded_server(start_app):
    return _bounded(start_app, BUSY_TIMEOUT_S)


def _two_projects(server):
    """Clients of two projects, with no endpoints before or after."""
    both = server.client("key-a"), server.client("key-b")
    for client in both:
        remove_endpoints(client)
    yield both
    for client in both:
        remove_endpoints(client)


@pytest.fixture
def clients(bounded_server):
    yield from _two_projects(bounded_server)


@pytest.fixture
def busy_clients(busy_bounded_server):
    yield from _two_projects(busy_bounded_server)


def test_a_gzip_bomb_answering_the_test_event_costs_no_memory(clients):
    client, _ = clients
    gzip_bomb()  # built before measuring: the receiver's own bytes are not the server's
    with HostileReceiver("bomb") as bomb:
        endpoint = client.webhooks.create(url=bomb.url, name="bomb", event_types=["batch.completed"])
        tracemalloc.start()
        try:
            before, _ = tracemalloc.get_traced_memory()
            started = time.monotonic()
            result = client.webhooks.test(endpoint.id, event_type="batch.completed")
            took = time.monotonic() - started
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    # The API process (this one: the app runs in process) allocated far less than 50 MB for it;
    # inflating the reply would take 1,074 MB.
    assert peak - before < 50 * MB, f"{(peak - before) / MB:.0f} MB"
    assert result.status_code == 200 and result.success
    assert took < TIMEOUT_S
    assert b"accept-encoding: identity" in bomb.requests[0].lower()


def test_a_trickling_receiver_of_the_test_event_is_cut_at_the_deadline(clients):
    client, _ = clients
    with HostileReceiver("trickle", interval=0.2) as slow:
        endpoint = client.webhooks.create(url=slow.url, name="slow", event_types=["batch.completed"])
        started = time.monotonic()
        with pytest.raises(openai.BadRequestError) as info:
            # The client's own timeout only keeps a regression from hanging the test.
            client.with_options(timeout=TIMEOUT_S + 10, max_retries=0).webhooks.test(
                endpoint.id, event_type="batch.completed"
            )
        took = time.monotonic() - started
    assert info.value.body["code"] == "webhook_unreachable" and "timed out" in info.value.body["message"]
    assert TIMEOUT_S - 0.5 <= took < TIMEOUT_S + 4


def test_a_trickling_receiver_never_delays_another_projects_delivery(busy_clients, busy_bounded_server):
    slow_client, other_client = busy_clients
    with HostileReceiver("trickle", interval=0.2) as slow, WebhookReceiver() as receiver:
        slow_endpoint = slow_client.webhooks.create(url=slow.url, name="slow", event_types=["batch.completed"])
        endpoint = other_client.webhooks.create(url=receiver.url, name="fine", event_types=["batch.completed"])
        slow_batch = create(slow_client, [chat_line("s-0")])
        assert wait_for(slow_client, slow_batch.id, timeout=30).status == "completed"
        wait_until(lambda: slow.arrived, 10, "the slow receiver's delivery under way", interval=0.05)

        # Its attempt now trickles; another project's batch ends meanwhile and is told at once.
        batch = create(other_client, [chat_line("o-0")])
        assert wait_for(other_client, batch.id, timeout=30).status == "completed"
        (delivery,) = receiver.wait_for(1, timeout=BUSY_TIMEOUT_S)
        assert slow.held_at(delivery.received_at), (slow.arrived, slow.hung_up, delivery.received_at)
        (event,) = receiver.events(endpoint.signing_secret)
        assert (event.type, event.data.id) == ("batch.completed", batch.id)

        # The trickling attempt is cut at its deadline and recorded as failed (to be retried).
        wait_until(lambda: slow.hung_up, BUSY_TIMEOUT_S + 5, "the slow attempt cut", interval=0.05)
        held = slow.hung_up[0] - slow.arrived[0]
        assert BUSY_TIMEOUT_S - 0.5 <= held < BUSY_TIMEOUT_S + 4, held
        (row,) = wait_until(
            lambda: db.execute(
                busy_bounded_server,
                "SELECT last_error FROM webhook_deliveries WHERE endpoint_id = :e AND last_error IS NOT NULL",
                e=slow_endpoint.id,
            ),
            10,
            "the cut attempt recorded",
        )
        assert "timed out" in row[0]
