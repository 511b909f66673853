"""Failed auth never refuses a good key (issue #54). Behind an ingress every tenant arrives from
the controller's address: a stranger's flood of made-up keys from it must not stop a good key
from it, and one client's typo'd key must not throttle its neighbours' keys. Bad keys are
throttled by address and by the key's prefix (app/domains/organization/auth_throttle.py); a
key that verifies is served whatever either has done. Through the official clients, in process,
on SQLite and Postgres (stored keys are read from the database)."""

from __future__ import annotations

import openai
import pytest
from starlette.testclient import TestClient

from harness.client import openai_client
from tests.support.app_server import ORIGIN, AppServer

GOOD, NEIGHBOUR = "bd-alice" + "a" * 32, "bd-bobby" + "b" * 32
KEYS_ENV = f"{GOOD}=proj-alice,{NEIGHBOUR}=proj-bob"


def from_address(app: AppServer, host: str) -> TestClient:
    """A client of the running app whose requests come from `host`."""
    client = TestClient(app.app, base_url=ORIGIN, client=(host, 40000), raise_server_exceptions=False)
    client.portal = app.http.portal  # the running app's event loop (its database pools live there)
    return client


def test_a_flood_of_bad_keys_from_an_address_does_not_stop_a_good_key_from_it(start_app):
    # The default allowance (100), refilling slowly enough that none comes back during the test.
    app = start_app({"BATCHD_API_KEYS": KEYS_ENV, "BATCHD_AUTH_FAILURE_WINDOW_SECONDS": "3600"})
    statuses = [
        app.http.get("/v1/batches", headers=app.as_key(f"sk-made-up-{n:04d}-{'x' * 20}")).status_code
        for n in range(150)
    ]
    assert statuses == [401] * 100 + [429] * 50
    # The same address, a valid key: served, by OpenAI's client and Anthropic's.
    assert app.client(GOOD).batches.list().data == []
    assert app.anthropic(NEIGHBOUR).messages.batches.list().data == []
    # Bad keys from it are still refused 429, named as such.
    with pytest.raises(openai.RateLimitError) as refused:
        app.client("sk-made-up-again").batches.list()
    assert refused.value.code == "rate_limit_exceeded" and "invalid API key" in refused.value.message
    assert int(refused.value.response.headers["retry-after"]) >= 1
    assert app.client(GOOD).batches.list().data == []  # and a good key still is not


def test_a_typod_key_throttles_its_own_prefix_not_a_neighbours_keys(start_app):
    app = start_app(
        {"BATCHD_API_KEYS": KEYS_ENV, "BATCHD_AUTH_FAILURE_BURST": "3", "BATCHD_AUTH_FAILURE_WINDOW_SECONDS": "3600"}
    )
    typo = GOOD[:-1] + "X"  # alice's key, its last character mistyped
    # Alice retries her typo from a different address each time (a fleet of workers): her key's
    # prefix runs out of failures even though no address does.
    answers = []
    for n in range(4):
        with pytest.raises((openai.AuthenticationError, openai.RateLimitError)) as refused:
            openai_client(f"{ORIGIN}/v1", typo, http_client=from_address(app, f"127.0.1.{n}")).batches.list()
        answers.append(refused.value.status_code)
    assert answers == [401, 401, 401, 429]
    neighbour_host = from_address(app, "127.0.1.9")
    # Bob's own typo (another prefix) is a plain 401, and his good key is served.
    with pytest.raises(openai.AuthenticationError):
        openai_client(f"{ORIGIN}/v1", NEIGHBOUR[:-1] + "Y", http_client=neighbour_host).batches.list()
    assert openai_client(f"{ORIGIN}/v1", NEIGHBOUR, http_client=neighbour_host).batches.list().data == []
    # Alice's good key shares the spent prefix and is served too; her typo stays refused.
    assert openai_client(f"{ORIGIN}/v1", GOOD, http_client=from_address(app, "127.0.1.0")).batches.list().data == []
    with pytest.raises(openai.RateLimitError):
        openai_client(f"{ORIGIN}/v1", typo, http_client=neighbour_host).batches.list()
