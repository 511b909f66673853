"""deploy/kubernetes: each overlay renders (kustomize) and validates against the Kubernetes
schemas (scripts/lint-kubernetes.sh, also in `make lint`), a broken overlay fails that lint, and
what the objects wire together is what batchd reads: its real commands, /health, the model
config that batchd's own loader accepts, the secrets' names."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from app.engine.config.catalog import resolve_model_specs
from app.engine.config.upstream import UpstreamSpec

ROOT = Path(__file__).resolve().parents[2]
KUBERNETES = ROOT / "deploy/kubernetes"
OVERLAYS = sorted(p.name for p in (KUBERNETES / "overlays").iterdir())
BIN = Path(sys.executable).parent

pytestmark = pytest.mark.skipif(
    shutil.which("kubectl") is None and shutil.which("kustomize") is None, reason="needs kubectl or kustomize"
)


def lint(overlays: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["bash", str(ROOT / "scripts/lint-kubernetes.sh"), str(BIN), str(overlays)],
        capture_output=True,
        text=True,
        timeout=120,
    )


def render(overlay: str) -> dict[str, dict]:
    """The overlay's objects by kind/name (generated names without their hash)."""
    cmd = ["kubectl", "kustomize"] if shutil.which("kubectl") else ["kustomize", "build"]
    out = subprocess.run([*cmd, str(KUBERNETES / "overlays" / overlay)], capture_output=True, text=True, check=True)
    return {f"{o['kind']}/{o['metadata']['name']}": o for o in yaml.safe_load_all(out.stdout)}


def test_every_overlay_renders_and_validates():
    assert OVERLAYS == ["gpu-engine", "upstream-fleet"]
    result = lint(KUBERNETES / "overlays")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "2 overlays render and validate" in result.stdout


def test_a_broken_overlay_fails_the_lint(tmp_path):
    shutil.copytree(KUBERNETES, tmp_path / "kubernetes")
    deployment = tmp_path / "kubernetes/base/deployment.yaml"
    deployment.write_text(deployment.read_text().replace("containerPort: 8000", "containerPortt: 8000"))
    result = lint(tmp_path / "kubernetes/overlays")
    assert result.returncode != 0
    assert "deployment/batchd" in result.stdout and "did not validate" in result.stdout


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_the_objects_run_batchd_as_it_is_run(overlay, tmp_path):
    objects = render(overlay)
    (deployment,) = [o for key, o in objects.items() if key == "Deployment/batchd"]
    (job,) = [o for key, o in objects.items() if key == "Job/batchd-migrate"]
    pod = deployment["spec"]["template"]["spec"]
    (server,) = pod["containers"]
    assert server["args"][:1] == ["serve"] and "--config" in server["args"]
    assert server["readinessProbe"]["httpGet"]["path"] == "/health"
    assert server["lifecycle"]["preStop"]["exec"]["command"][0] == "sleep"
    assert pod["terminationGracePeriodSeconds"] > 30 + 5  # uvicorn's graceful 30 s after the preStop
    assert job["spec"]["template"]["spec"]["containers"][0]["args"] == ["db", "upgrade"]
    secrets = {
        e["name"]: e["valueFrom"]["secretKeyRef"]["key"]
        for e in server["env"]
        if "secretKeyRef" in e.get("valueFrom", {})
    }
    assert secrets["BATCHD_DATABASE_URL"] == "database-url" and secrets["BATCHD_SECRET_KEY"] == "secret-key"
    assert {"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"} <= set(secrets)
    (pdb,) = [o for key, o in objects.items() if key.startswith("PodDisruptionBudget/")]
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert pdb["spec"]["selector"]["matchLabels"].items() <= labels.items()
    # The ConfigMap's model config is one batchd's own loader accepts.
    (models,) = [o for key, o in objects.items() if key.startswith("ConfigMap/batchd-models-")]
    config = tmp_path / "models.yaml"
    config.write_text(models["data"]["models.yaml"])
    specs = resolve_model_specs([], config, data_dir=tmp_path)
    assert [s.name for s in specs] == ["qwen"]
    assert isinstance(specs[0], UpstreamSpec) == (overlay == "upstream-fleet")
