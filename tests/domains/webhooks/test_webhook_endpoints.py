"""Managing webhook endpoints through the official client's `client.webhooks.*` methods."""

from __future__ import annotations

import openai
import pytest

from harness.client import openai_client
from tests.support.webhook_receiver import WebhookReceiver

BATCH_EVENTS = ["batch.completed", "batch.failed", "batch.cancelled", "batch.expired"]
RESPONSE_EVENTS = ["response.completed", "response.failed", "response.cancelled", "response.incomplete"]


def test_create_retrieve_list_update_delete(hooks_client, receiver):
    created = hooks_client.webhooks.create(url=receiver.url, name="ops", event_types=["batch.completed"])
    assert created.object == "webhook_endpoint" and created.id.startswith("we_")
    assert created.signing_secret.startswith("whsec_")
    assert created.signing_secret_hint.endswith(created.signing_secret[-4:])
    assert (created.url, created.name, created.event_types) == (receiver.url, "ops", ["batch.completed"])
    assert created.status == "enabled"

    fetched = hooks_client.webhooks.retrieve(created.id)
    assert fetched.id == created.id and not hasattr(fetched, "signing_secret")
    assert "signing_secret" not in fetched.model_dump()

    second = hooks_client.webhooks.create(url=receiver.url, name="two", event_types=BATCH_EVENTS)
    listed = hooks_client.webhooks.list()
    assert [e.id for e in listed.data] == [second.id, created.id]  # newest first
    page = hooks_client.webhooks.list(limit=1)
    assert [e.id for e in page.data] == [second.id] and page.has_more
    assert [e.id for e in hooks_client.webhooks.list(limit=1, after=second.id).data] == [created.id]

    updated = hooks_client.webhooks.update(created.id, name="renamed", event_types=["batch.failed", "batch.expired"])
    assert (updated.name, updated.event_types) == ("renamed", ["batch.failed", "batch.expired"])
    assert updated.updated_at >= created.updated_at

    deleted = hooks_client.webhooks.delete(created.id)
    assert (deleted.id, deleted.deleted, deleted.object) == (created.id, True, "webhook_endpoint.deleted")
    with pytest.raises(openai.NotFoundError):
        hooks_client.webhooks.retrieve(created.id)


def test_endpoints_belong_to_their_project(hooks_client, hooks_server, receiver):
    created = hooks_client.webhooks.create(url=receiver.url, name="mine", event_types=["batch.failed"])
    other = hooks_server.client("key-b")
    with pytest.raises(openai.NotFoundError) as info:
        other.webhooks.retrieve(created.id)
    assert info.value.body["type"] == "invalid_request_error"
    assert created.id not in [e.id for e in other.webhooks.list()]
    with pytest.raises(openai.NotFoundError):
        other.webhooks.delete(created.id)


@pytest.mark.parametrize(
    "url, reason",
    [
        ("ftp://127.0.0.1/hook", "http or https"),
        ("http://127.0.0.2:9/hook", "refused by the outbound policy"),  # loopback; the list has 127.0.0.1 only
        ("http://10.1.2.3/hook", "refused by the outbound policy"),  # private
        ("http://169.254.169.254/latest/meta-data", "refused by the outbound policy"),  # link-local (cloud metadata)
        ("http://[::1]:9/hook", "refused by the outbound policy"),
        ("http://user:pw@127.0.0.1/hook", "credentials"),
        ("not a url", "http or https"),
    ],
)
def test_unsafe_urls_are_refused(hooks_client, url, reason):
    with pytest.raises(openai.BadRequestError) as info:
        hooks_client.webhooks.create(url=url, name="x", event_types=["batch.failed"])
    assert info.value.status_code == 400
    assert info.value.body["param"] == "url" and reason in info.value.body["message"]


def test_invalid_parameters_are_400s(hooks_client, receiver):
    with pytest.raises(openai.BadRequestError) as info:
        hooks_client.webhooks.create(url=receiver.url, name="x", event_types=["realtime.call.incoming"])
    assert info.value.body["param"] == "event_types"
    with pytest.raises(openai.BadRequestError) as info:
        hooks_client.webhooks.create(url=receiver.url, name="x", event_types=[])
    assert info.value.body["param"] == "event_types"
    with pytest.raises(openai.BadRequestError) as info:
        hooks_client.post(
            "/webhook_endpoints", body={"url": receiver.url, "event_types": ["batch.failed"]}, cast_to=object
        )
    assert info.value.body["code"] == "missing_required_parameter" and info.value.body["param"] == "name"


def test_rotate_secret_and_test_event(hooks_client):
    with WebhookReceiver() as receiver:
        created = hooks_client.webhooks.create(url=receiver.url, name="rot", event_types=["batch.completed"])
        rotated = hooks_client.webhooks.rotate_secret(created.id, keep_old_secret_active_for_24_hours=True)
        assert rotated.signing_secret != created.signing_secret
        result = hooks_client.webhooks.test(created.id, event_type="batch.completed")
        assert (result.object, result.status_code, result.success) == ("webhook_endpoint.test", 200, True)
        assert result.webhook_endpoint_id == created.id
        # While the old secret is kept, deliveries verify with either secret.
        for secret in (created.signing_secret, rotated.signing_secret):
            (event,) = receiver.events(secret)
            assert event.type == "batch.completed" and event.object == "event"

        hooks_client.webhooks.rotate_secret(created.id)
        newest = hooks_client.webhooks.rotate_secret(created.id)
        hooks_client.webhooks.test(created.id, event_type="batch.failed")
        last = receiver.deliveries[-1]
        verifier = openai_client("http://127.0.0.1:1/v1", "unused")
        verifier.webhooks.verify_signature(last.body, last.headers, secret=newest.signing_secret)
        with pytest.raises(openai.InvalidWebhookSignatureError):
            verifier.webhooks.verify_signature(last.body, last.headers, secret=rotated.signing_secret)


def test_event_types(hooks_client):
    listed = hooks_client.webhooks.event_types.list()
    assert listed.object == "list" and listed.data == BATCH_EVENTS + RESPONSE_EVENTS
