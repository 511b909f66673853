"""create_app's engines seam (app/http/app.py): engines handed to it are the ones the app serves
and runs batches on, in place of those its settings name; without, the settings decide."""

from __future__ import annotations

from tests.support.app_server import AppServer
from tests.support.batches import CHAT_MODEL, chat_line, create, wait_for
from tests.support.fake_engine import FakeEngines


def test_given_engines_serve_and_run_the_batches(tmp_path):
    engines = FakeEngines(served=(CHAT_MODEL,))
    with AppServer(tmp_path, engines=engines) as app:
        health = app.http.get("/health")
        assert health.status_code == 200 and health.json()["status"] == "ok"
        client = app.client("any")
        assert [m.id for m in client.models.list()] == [CHAT_MODEL]
        done = wait_for(client, create(client, [chat_line("a"), chat_line("b")]).id, timeout=30)
        assert (done.status, done.request_counts.completed) == ("completed", 2)
    assert engines.executed == 2 and engines.in_flight == 0


def test_without_engines_the_settings_decide(tmp_path):
    with AppServer(tmp_path) as app:  # --no-models
        client = app.client("any")
        assert client.models.list().data == []
        done = wait_for(client, create(client, [chat_line("a")]).id, timeout=30)
        assert done.status == "failed" and done.errors.data[0].code == "model_not_found"
