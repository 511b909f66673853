"""Schemathesis as a user runs it (`schemathesis run URL/openapi.json --checks all`) against a real
`batchd serve`, on SQLite and on Postgres: every check, every phase (examples, coverage,
fuzzing, stateful along the document's links). Any failure fails the test. The repository's
schemathesis.toml names the few 400s no schema can state. Failing examples it found are kept as
plain tests in test_fuzz_regressions.py."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import httpx
import pytest

REPO = Path(__file__).resolve().parents[2]
# Bounded so each run takes well under a minute here; bench/results/schemathesis-*.md records
# the longer runs (40+ examples per operation, two seeds, with and without models).
EXAMPLES_PER_OPERATION = 20
KEY = "key-fuzz"
# The documented example receiver host: allowed, so the stateful phase can create endpoints.
ENV = {"BATCHD_API_KEYS": f"{KEY}=proj-fuzz", "BATCHD_WEBHOOK_ALLOW_HOSTS": "example.com"}


@pytest.fixture(scope="module")
def fuzz_server(start_server):
    return start_server(ENV)


def _root(server) -> str:
    return server.base_url.removesuffix("/v1")


@pytest.mark.parametrize("backend", ["sqlite", "postgres"], indirect=True)
def test_schemathesis_finds_no_failure_with_every_check_and_phase(fuzz_server, tmp_path):
    command = [
        str(Path(sys.executable).with_name("schemathesis")),
        "--config-file",
        str(REPO / "schemathesis.toml"),
        "--no-color",
        "run",
        f"{_root(fuzz_server)}/openapi.json",
        "-H",
        f"Authorization: Bearer {KEY}",
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
    ]
    run = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout[-20_000:] + run.stderr[-5_000:]
    summary = run.stdout.strip().splitlines()[-1]
    assert "passed" in summary or "warning" in summary, summary
    assert "failure" not in summary and "error" not in summary, summary


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
    for path in ("/v1/files", "/v1/batches", "/v1/webhook_endpoints"):
        assert paths[path]["post"]["responses"]["200"]["links"], path
    for operation in ("parts", "complete", "cancel"):
        conflict = paths[f"/v1/uploads/{{upload_id}}/{operation}"]["post"]["responses"]["409"]
        assert conflict["content"]["application/json"]["schema"] == {"$ref": "#/components/schemas/ErrorResponse"}
