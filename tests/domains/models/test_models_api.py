"""`GET /v1/models` and `GET /v1/models/{id}` through the official client, with batchd's engine
fields (engine state, lines in flight) that the dashboard's models page shows; the models are
the fake engine's (tests/support/fake_engine.py), whose `fake:hold` lines stay in flight."""

from __future__ import annotations

import openai
import pytest

from harness.poll import wait_until
from tests.support.batches import CHAT_MODEL, EMBED_MODEL, cancel_in_cleanup, chat_line, create, wait_for


def test_models_carry_engine_state_and_load(fake_client):
    models = {m.id: m for m in fake_client.models.list()}
    assert set(models) == {CHAT_MODEL, EMBED_MODEL}
    for model in models.values():
        extra = model.model_dump()
        assert extra["engine_state"] == "ready" and extra["loaded"] is True
        assert extra["lines_in_flight"] >= 0 and extra["lines_waiting"] >= 0 and extra["max_lines_in_flight"] >= 1
    one = fake_client.models.retrieve(CHAT_MODEL)
    assert (one.id, one.object, one.owned_by) == (CHAT_MODEL, "model", "batchd")


def test_lines_in_flight_are_counted_while_a_batch_runs(fake_server, fake_client):
    fake_server.engines.hold()
    batch = create(fake_client, [chat_line(f"m-{i}", "fake:hold") for i in range(40)])
    try:
        seen = wait_for(fake_client, batch.id, until=lambda b: _in_flight(fake_client) > 0, timeout=30)
        assert seen.status not in ("completed", "failed"), "the batch ended before any line was seen in flight"
    finally:
        cancel_in_cleanup(fake_client, batch.id)
        fake_server.engines.release()
    wait_until(lambda: _in_flight(fake_client) == 0, 10, "the slots released after the batch was cancelled")


def _in_flight(client) -> int:
    return client.models.retrieve(CHAT_MODEL).model_dump()["lines_in_flight"]


def test_unknown_model_is_404(fake_client):
    _assert_unknown_model_is_404(fake_client)


def test_unknown_model_is_404_without_models(client):
    _assert_unknown_model_is_404(client)


def _assert_unknown_model_is_404(client) -> None:
    with pytest.raises(openai.NotFoundError) as exc:
        client.models.retrieve("no-such-model")
    assert exc.value.body["code"] == "model_not_found"


def test_server_without_models_lists_none(client):
    assert client.models.list().data == []
