"""For the webhook tests (fixtures `hooks_server`, `hooks_client`, `receiver` in tests/conftest.py):
a client of a project only these tests use, whose endpoints are removed after each test, and
the settled deliveries of a batch's events."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import openai

from tests.support import db
from tests.support.batches import chat_line, create, wait_for

HOOKS_KEY = "key-hooks"


def project_client(server) -> openai.OpenAI:
    return server.client(HOOKS_KEY)


def settled_deliveries(server, batch_id: str) -> list[tuple[str, str, int]]:
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


def failed_batch(client: openai.OpenAI):
    """A batch of an app without models: it fails validation (so ends with `batch.failed`)."""
    batch = create(client, [chat_line("a"), chat_line("b")])
    done = wait_for(client, batch.id, timeout=60)
    assert done.status == "failed" and done.errors.data[0].code == "model_not_found"
    return done
