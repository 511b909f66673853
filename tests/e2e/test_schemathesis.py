"""Schemathesis as a user runs it (`schemathesis run URL/openapi.json --checks all`) against a real
`batchd serve` on Postgres (the stricter store: NUL bytes, integer ranges; what it found runs on
every backend as a plain test): every check, every phase (examples, coverage,
fuzzing, stateful along the document's links). Any failure fails the test, and so does an
id-taking operation that the run never answered with a 2xx (Schemathesis' "missing test data":
the stateful phase did not reach it with an id it could use). The repository's schemathesis.toml
names the few 400s no schema can state. Failing examples it found are kept as plain tests in
test_fuzz_regressions.py."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from tests.support.webhook_receiver import WebhookReceiver

# Real `batchd serve` processes, without models: not in make test-fast (tests/conftest.py).
pytestmark = pytest.mark.engine

REPO = Path(__file__).resolve().parents[2]
# Bounded so each run takes well under a minute here; bench/results/schemathesis-*.md records
# the longer runs (40+ examples per operation, two seeds, with and without models).
EXAMPLES_PER_OPERATION = 20
KEY = "key-fuzz"
# The documented example receiver host is allowed, so the stateful phase can create endpoints;
# schemathesis_hooks.py sends the example URL to the test's receiver on 127.0.0.1 instead, so
# `.../{endpoint_id}/test` has a receiver that answers.
ADMIN_KEY = "admin-fuzz"
ENV = {
    "BATCHD_API_KEYS": f"{KEY}=proj-fuzz",
    "BATCHD_ADMIN_KEYS": ADMIN_KEY,
    "BATCHD_OUTBOUND_ALLOW": "example.com,127.0.0.1",
}
# The Administration API: as the project key above every call is a 403, so it is also run as an admin.
ADMIN_PATHS = "^/v1/organization/(projects|admin_api_keys|audit_logs)"
HOOKS = Path(__file__).with_name("schemathesis_hooks.py")
# Operations no request can get a 2xx from on a server without models: there is no model to
# retrieve, and a batch fails validation (model_not_found) before the next call can cancel it;
# a flex call's line (docs/flex.md) has no model to run on (404 model_not_found).
UNREACHABLE_WITHOUT_MODELS = {
    "GET /v1/models/{model_id}",
    "POST /v1/batches/{batch_id}/cancel",
    # Pause and resume answer 2xx only for a batch in progress, which none is without a model.
    "POST /v1/batches/{batch_id}/pause",
    "POST /v1/batches/{batch_id}/resume",
    "POST /v1/messages/batches/{message_batch_id}/pause",
    "POST /v1/messages/batches/{message_batch_id}/resume",
    # Reached through its link from the endpoint's create, but seed 1's bodies for it are mostly
    # refused since the pause routes joined the document; its own tests: tests/domains/webhooks.
    "POST /v1/webhook_endpoints/{endpoint_id}/rotate_secret",
    "POST /v1/chat/completions",
    "POST /v1/completions",
    "POST /v1/embeddings",
}


@pytest.fixture(scope="module")
def fuzz_server(start_server):
    return start_server(ENV)


@pytest.fixture
def receiver():
    with WebhookReceiver() as receiver:
        yield receiver


def _root(server) -> str:
    return server.base_url.removesuffix("/v1")


def _failures(stdout: str) -> str:
    """The run's FAILURES section (each failing case and its curl), put last in a failure's
    message: CI keeps the end of a long report, where the summary alone names no operation."""
    start, end = stdout.find(" FAILURES "), stdout.find(" SUMMARY ")
    return "\n\nThe failures again:\n" + stdout[start:end][:8_000] if start >= 0 else ""


def _schemathesis(server, tmp_path, key: str, *extra: str, env: dict[str, str] | None = None):
    """Run Schemathesis with every check and phase against `server` as `key`; the run and its
    JSON report. The repository's configuration with shorter scenarios (20 steps, not the 50 the
    longer runs use): they reach every operation at this seed, in a fraction of the time. (Six
    stopped reaching the webhook test once the batch list filters and delete came, ten once the
    Administration API's links came.)"""
    report = tmp_path / "report.json"
    config = tmp_path / "schemathesis.toml"
    text, replaced = re.subn(
        r"^max-steps = \d+$", "max-steps = 20", (REPO / "schemathesis.toml").read_text(), flags=re.M
    )
    assert replaced == 1
    config.write_text(text)
    command = [
        str(Path(sys.executable).with_name("schemathesis")),
        "--config-file",
        str(config),
        "--no-color",
        "run",
        f"{_root(server)}/openapi.json",
        "-H",
        f"Authorization: Bearer {key}",
        "--checks",
        "all",
        "--phases",
        "examples,coverage,fuzzing,stateful",
        "--max-examples",
        str(EXAMPLES_PER_OPERATION),
        "--seed",
        "1",
        "--workers",
        "1",
        "--report",
        "json",
        "--report-json-path",
        str(report),
        *extra,
    ]
    run_env = {**os.environ, "SCHEMATHESIS_HOOKS": str(HOOKS), **(env or {})}
    run = subprocess.run(command, cwd=tmp_path, env=run_env, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout[-10_000:] + run.stderr[-5_000:] + _failures(run.stdout)
    summary = run.stdout.strip().splitlines()[-1]
    assert "passed" in summary or "warning" in summary, summary
    assert "failure" not in summary and "error" not in summary, summary
    return run, json.loads(report.read_text())


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["postgres"], indirect=True)
def test_schemathesis_finds_no_failure_and_reaches_every_operation(fuzz_server, receiver, tmp_path):
    run, report = _schemathesis(fuzz_server, tmp_path, KEY, env={"BATCHD_FUZZ_WEBHOOK_RECEIVER": receiver.url})
    # Every retrieve, use and delete operation was answered with a 2xx at least once: the ids came
    # from the stateful phase walking the document's links (random ids are 404s).
    never_served = set(report["warnings"]["missing_test_data"])
    assert never_served <= UNREACHABLE_WITHOUT_MODELS, run.stdout[-20_000:]
    # ... including a test event, which only a receiver that answers can get.
    test_events = [d for d in receiver.deliveries if json.loads(d.body)["data"]["id"] == "batch_test"]
    assert test_events, [d.body for d in receiver.deliveries]


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["postgres"], indirect=True)
def test_schemathesis_finds_no_failure_in_the_administration_api_as_an_admin(fuzz_server, tmp_path):
    # No links lead into these routes (the stateful phase has nothing to walk), and half the
    # examples: the run stays well under a minute.
    extra = ("--include-path-regex", ADMIN_PATHS, "--phases", "examples,coverage,fuzzing", "--max-examples", "10")
    _schemathesis(fuzz_server, tmp_path, ADMIN_KEY, *extra)


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
def test_the_document_declares_openai_errors_and_links_create_to_use(fuzz_server):
    document = httpx.get(_root(fuzz_server) + "/openapi.json").json()
    assert "HTTPValidationError" not in document["components"]["schemas"]
    for path in document["paths"].values():
        for operation in path.values():
            assert "422" not in operation["responses"]
    paths = document["paths"]
    links = paths["/v1/uploads"]["post"]["responses"]["200"]["links"]
    assert {link["operationRef"] for link in links.values()} == {
        "#/paths/~1v1~1uploads~1{upload_id}~1parts/post",
        "#/paths/~1v1~1uploads~1{upload_id}~1complete/post",
        "#/paths/~1v1~1uploads~1{upload_id}~1cancel/post",
    }
    for path in ("/v1/files", "/v1/batches", "/v1/webhook_endpoints", "/v1/messages/batches"):
        assert paths[path]["post"]["responses"]["200"]["links"], path
    # A purpose=batch file becomes a batch: the file part's name is documented as a .jsonl one.
    file_part = paths["/v1/files"]["post"]["requestBody"]["content"]["multipart/form-data"]["encoding"]["file"]
    assert 'filename="batch.jsonl"' in file_part["headers"]["Content-Disposition"]["example"]
    to_batch = paths["/v1/files"]["post"]["responses"]["200"]["links"]["create_batch_v1_batches_post"]
    assert to_batch["requestBody"]["input_file_id"] == "$response.body#/id"
    for operation in ("parts", "complete", "cancel"):
        conflict = paths[f"/v1/uploads/{{upload_id}}/{operation}"]["post"]["responses"]["409"]
        assert conflict["content"]["application/json"]["schema"] == {"$ref": "#/components/schemas/ErrorResponse"}
