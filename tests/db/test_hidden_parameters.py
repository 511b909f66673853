"""A failed statement's log names the statement, never its values (issue #54): the database
engines run with `hide_parameters`, so a webhook's signing secret bound to an INSERT that fails
does not reach the server's log."""

from __future__ import annotations

import logging

import openai
import pytest

from tests.conftest import API_KEYS_ENV, WEBHOOK_TEST_ENV
from tests.support import db

SQLITE_FAULT = [
    "CREATE TRIGGER refuse_hooks BEFORE INSERT ON webhook_endpoints BEGIN SELECT RAISE(ABORT, 'refused by the test'); END"
]
POSTGRES_FAULT = [
    "CREATE FUNCTION refuse_hooks() RETURNS trigger AS $$ BEGIN RAISE EXCEPTION 'refused by the test'; END $$ "
    "LANGUAGE plpgsql",
    "CREATE TRIGGER refuse_hooks BEFORE INSERT ON webhook_endpoints FOR EACH ROW EXECUTE FUNCTION refuse_hooks()",
]


def test_a_failed_insert_does_not_log_the_webhook_secret(start_app, backend, caplog):
    server = start_app({"BATCHD_API_KEYS": API_KEYS_ENV, **WEBHOOK_TEST_ENV})
    for statement in SQLITE_FAULT if server.database_url is None else POSTGRES_FAULT:
        db.execute(server, statement)
    client = server.client("key-a", max_retries=0)
    with caplog.at_level(logging.ERROR), pytest.raises(openai.InternalServerError):
        client.webhooks.create(url="http://127.0.0.1:9/hook", name="ops", event_types=["batch.completed"])
    logged = caplog.text
    assert "refused by the test" in logged and "INSERT INTO webhook_endpoints" in logged  # the error is logged
    assert "whsec_" not in logged  # ... without the secret it was inserting
    assert "hide_parameters" in logged
