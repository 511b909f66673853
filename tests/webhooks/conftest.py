"""Webhook fixtures: a server without models (every batch fails validation, so it ends with
`batch.failed` within a second) that may deliver to 127.0.0.1 and retries fast, and a client of
a project only these tests use, whose endpoints are removed after each test."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import openai
import pytest

from harness.client import openai_client
from harness.server import ServerProcess
from tests.conftest import API_KEYS_ENV, WEBHOOK_TEST_ENV
from tests.support import db
from tests.support.webhook_receiver import WebhookReceiver

HOOKS_KEY = "key-hooks"


@pytest.fixture(scope="session")
def hooks_server(start_server):
    return start_server(
        {"BATCHD_API_KEYS": API_KEYS_ENV, **WEBHOOK_TEST_ENV, "BATCHD_WEBHOOK_DISABLE_AFTER_SECONDS": "3"}
    )


def project_client(server) -> openai.OpenAI:
    return openai_client(server.base_url, HOOKS_KEY)


def settled_deliveries(server: ServerProcess, batch_id: str) -> list[tuple[str, str, int]]:
    """(endpoint, status, attempts) of every delivery of the batch's events, once none is
    pending any more (so nothing more will be sent), else []."""
    rows = db.execute(
        server,
        "SELECT d.endpoint_id, d.status, d.attempts FROM webhook_deliveries d"
        " JOIN webhook_events e ON e.id = d.event_id WHERE e.batch_id = :batch_id ORDER BY d.id",
        batch_id=batch_id,
    )
    return [] if any(status == "pending" for _, status, _ in rows) else rows


def remove_endpoints(client: openai.OpenAI) -> None:
    for endpoint in list(client.webhooks.list(limit=100)):
        client.webhooks.delete(endpoint.id)


@contextmanager
def clean_project(server) -> Iterator[openai.OpenAI]:
    """A client of the webhook tests' project, with no endpoints before or after."""
    client = project_client(server)
    remove_endpoints(client)
    try:
        yield client
    finally:
        remove_endpoints(client)


@pytest.fixture
def hooks_client(hooks_server):
    with clean_project(hooks_server) as client:
        yield client


@pytest.fixture
def receiver():
    with WebhookReceiver() as r:
        yield r
