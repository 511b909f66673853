"""deploy/kubernetes: each overlay renders (kustomize), alone and with the optional components,
validates against the Kubernetes schemas and passes scripts/check_kubernetes.py (all three in
scripts/lint-kubernetes.sh, also in `make lint`); a broken overlay or a lost property fails that
lint; the checker catches each property it guards; and what the objects wire together is what
batchd reads: its real commands, /health and /health/live, the model config that batchd's own
loader accepts, the secrets' names, its upload limit. No cluster is needed."""

from __future__ import annotations

import copy
import importlib.util
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from app.core.config import Settings
from app.engine.config.catalog import resolve_model_specs
from app.engine.config.upstream import UpstreamSpec
from app.http.app import create_app

ROOT = Path(__file__).resolve().parents[2]
KUBERNETES = ROOT / "deploy/kubernetes"
OVERLAYS = sorted(p.name for p in (KUBERNETES / "overlays").iterdir())
COMPONENTS = sorted(p.name for p in (KUBERNETES / "components").iterdir())
BIN = Path(sys.executable).parent

pytestmark = pytest.mark.skipif(
    shutil.which("kubectl") is None and shutil.which("kustomize") is None, reason="needs kubectl or kustomize"
)

_spec = importlib.util.spec_from_file_location("check_kubernetes", ROOT / "scripts/check_kubernetes.py")
assert _spec is not None and _spec.loader is not None
checker = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(checker)


def lint(overlays: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["bash", str(ROOT / "scripts/lint-kubernetes.sh"), str(BIN), str(overlays)],
        capture_output=True,
        text=True,
        timeout=180,
    )


def render(directory: Path) -> dict[str, dict]:
    """The kustomization's objects by kind/name (generated names keep their hash)."""
    cmd = ["kubectl", "kustomize"] if shutil.which("kubectl") else ["kustomize", "build"]
    out = subprocess.run([*cmd, str(directory)], capture_output=True, text=True, check=True)
    return checker.load(out.stdout)


def render_with_components(overlay: str, tmp: Path) -> dict[str, dict]:
    """The overlay with every optional component, as an operator's overlay would list them."""
    tmp.mkdir(parents=True, exist_ok=True)
    kustomization = {
        "resources": [os.path.relpath(KUBERNETES / "overlays" / overlay, tmp)],
        "components": [os.path.relpath(KUBERNETES / "components" / c, tmp) for c in COMPONENTS],
    }
    (tmp / "kustomization.yaml").write_text(yaml.safe_dump(kustomization))
    return render(tmp)


def server(objects: dict[str, dict]) -> dict[str, Any]:
    (container,) = [c for c in pod(objects)["containers"] if c["name"] == "batchd"]
    return container


def pod(objects: dict[str, dict]) -> dict[str, Any]:
    return objects["Deployment/batchd"]["spec"]["template"]["spec"]


def test_every_overlay_renders_validates_and_passes_the_checks():
    assert OVERLAYS == ["gpu-engine", "gpu-nodes", "upstream-fleet"]
    assert COMPONENTS == [
        "grafana-dashboard",
        "httproute",
        "ingress",
        "keda",
        "networkpolicy",
        "prometheusrule",
        "servicemonitor",
    ]
    result = lint(KUBERNETES / "overlays")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "kubernetes: 6 renders of overlays (with and without components) and 2 inner ones" in result.stdout


def test_a_broken_overlay_fails_the_lint(tmp_path):
    shutil.copytree(KUBERNETES, tmp_path / "kubernetes")
    deployment = tmp_path / "kubernetes/base/deployment.yaml"
    deployment.write_text(deployment.read_text().replace("containerPort: 8000", "containerPortt: 8000"))
    result = lint(tmp_path / "kubernetes/overlays")
    assert result.returncode != 0
    assert "deployment/batchd" in result.stdout and "did not validate" in result.stdout


def test_an_optional_keys_secret_fails_the_lint(tmp_path):
    shutil.copytree(KUBERNETES, tmp_path / "kubernetes")
    deployment = tmp_path / "kubernetes/base/deployment.yaml"
    text = deployment.read_text()
    assert text.count("key: api-keys\n") == 1
    deployment.write_text(text.replace("key: api-keys\n", "key: api-keys\n                  optional: true\n"))
    result = lint(tmp_path / "kubernetes/overlays")
    assert result.returncode != 0
    assert "gpu-engine.yaml: Deployment/batchd: BATCHD_API_KEYS's Secret key is optional" in result.stdout


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_rendered_overlay_is_one_an_operator_would_apply(overlay, tmp_path):
    for objects in (render(KUBERNETES / "overlays" / overlay), render_with_components(overlay, tmp_path)):
        assert checker.problems(objects) == []
        spec, container = pod(objects), server(objects)
        # Probes: a startup window for an engine's load, liveness on the process, readiness on engines.
        assert container["livenessProbe"]["httpGet"]["path"] == "/health/live"
        assert container["readinessProbe"]["httpGet"]["path"] == "/health"
        startup = container["startupProbe"]
        if overlay.startswith("gpu-"):
            assert startup["httpGet"]["path"] == "/health"
            assert startup["periodSeconds"] * startup["failureThreshold"] == 1800
        else:  # no engine: up once the process answers, whether the fleet is up or not
            assert startup["httpGet"]["path"] == "/health/live"
        # Pod Security "restricted", as the images' user, read-only root.
        assert spec["securityContext"] == {
            "runAsNonRoot": True,
            "runAsUser": 1000,
            "runAsGroup": 1000,
            "fsGroup": 1000,
            "fsGroupChangePolicy": "OnRootMismatch",
            "seccompProfile": {"type": "RuntimeDefault"},
        }
        for each in [*spec["initContainers"], *spec["containers"]]:
            assert each["securityContext"] == {
                "allowPrivilegeEscalation": False,
                "readOnlyRootFilesystem": True,
                "capabilities": {"drop": ["ALL"]},
            }
        # The keys Secret is required; the ServiceAccount mounts no token.
        (keys,) = [e for e in container["env"] if e["name"] == "BATCHD_API_KEYS"]
        assert keys["valueFrom"]["secretKeyRef"] == {"name": "batchd", "key": "api-keys"}
        assert objects[f"ServiceAccount/{spec['serviceAccountName']}"]["automountServiceAccountToken"] is False
        assert spec["automountServiceAccountToken"] is False
        # Scraping, by annotation on the pods and the Service.
        for metadata in (
            objects["Deployment/batchd"]["spec"]["template"]["metadata"],
            objects["Service/batchd"]["metadata"],
        ):
            assert metadata["annotations"]["prometheus.io/port"] == "8000"
            assert metadata["annotations"]["prometheus.io/path"] == "/metrics"
        # Migrations in an init container, nothing for the next apply to collide with.
        assert [c["args"] for c in spec["initContainers"]] == [["db", "upgrade"]]
        assert not [key for key in objects if key.startswith("Job/")]


def test_the_gpu_overlay_rolls_without_a_spare_gpu_and_reads_its_models_volume():
    objects = render(KUBERNETES / "overlays/gpu-engine")
    deployment = objects["Deployment/batchd"]
    assert deployment["spec"]["strategy"]["rollingUpdate"] == {"maxSurge": 0, "maxUnavailable": 1}
    spec = pod(objects)
    assert server(objects)["resources"]["limits"] == {"nvidia.com/gpu": 1, "memory": "48Gi"}
    assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in spec["tolerations"]
    assert spec["nodeSelector"]
    (models,) = [v for v in spec["volumes"] if v["name"] == "models"]
    claim = objects[f"PersistentVolumeClaim/{models['persistentVolumeClaim']['claimName']}"]
    assert claim["spec"]["accessModes"] == ["ReadWriteMany"]


def test_fill_models_downloads_each_model_where_the_model_config_reads_it():
    fill = render(KUBERNETES / "overlays/gpu-engine/fill-models")
    assert checker.problems(fill, server=False) == []
    job = fill["Job/batchd-fill-models"]["spec"]["template"]["spec"]
    (download,) = job["containers"]
    env = {e["name"]: e.get("value") for e in download["env"]}
    gpu = render(KUBERNETES / "overlays/gpu-engine")
    assert job["volumes"][0]["persistentVolumeClaim"]["claimName"] == "batchd-models"
    assert fill["PersistentVolumeClaim/batchd-models"] == gpu["PersistentVolumeClaim/batchd-models"]
    # The command puts repository ORG/NAME at /models/NAME, the path models.yaml names.
    assert '--local-dir "/models/${repo#*/}"' in download["command"][-1]
    (config,) = [o for key, o in gpu.items() if key.startswith("ConfigMap/batchd-models-")]
    paths = [m["path"] for m in yaml.safe_load(config["data"]["models.yaml"])["models"].values()]
    assert paths == ["/models/" + repo.split("/", 1)[1] for repo in env["MODELS"].split()]


def _at(path: str) -> Callable[[dict], tuple[Any, Any]]:
    """The node holding the field at a dotted path below the Deployment (list items by index), and its key."""

    def find(objects: dict) -> tuple[Any, Any]:
        *steps, last = [int(s) if s.lstrip("-").isdigit() else s for s in path.split(".")]
        node = objects["Deployment/batchd"]
        for step in steps:
            node = node[step]
        return node, last

    return find


def _set(path: str, value: Any) -> Callable[[dict], None]:
    def mutate(objects: dict) -> None:
        node, key = _at(path)(objects)
        node[key] = value

    return mutate


def _drop(path: str) -> Callable[[dict], None]:
    def mutate(objects: dict) -> None:
        node, key = _at(path)(objects)
        del node[key]

    return mutate


def _pop_env(name: str) -> Callable[[dict], None]:
    def mutate(objects: dict) -> None:
        env = server(objects)["env"]
        env[:] = [e for e in env if e["name"] != name]

    return mutate


def _unset_setting(name: str) -> Callable[[dict], None]:
    def mutate(objects: dict) -> None:
        (settings,) = [o for key, o in objects.items() if key.startswith("ConfigMap/batchd-settings-")]
        settings["data"].pop(name)

    return mutate


def _add_migrate_job(objects: dict) -> None:
    """The fixed-name Job with a TTL the manifests had: the next apply collides with it."""
    template = copy.deepcopy(objects["Deployment/batchd"]["spec"]["template"])
    spec = {"ttlSecondsAfterFinished": 300, "template": template}
    objects["Job/batchd-migrate"] = {"kind": "Job", "metadata": {"name": "batchd-migrate"}, "spec": spec}


def _annotate(key: str, name: str, value: str) -> Callable[[dict], None]:
    return lambda objects: objects[key]["metadata"]["annotations"].__setitem__(name, value)


C = "spec.template.spec.containers.0"
P = "spec.template.spec"
LOST: dict[str, tuple[Callable[[dict], None], str]] = {
    "no capability drop": (_set(f"{C}.securityContext.capabilities", {}), "capabilities do not drop ALL"),
    "escalation": (
        _set(f"{C}.securityContext.allowPrivilegeEscalation", True),
        "allowPrivilegeEscalation is not false",
    ),
    "writable root": (_set(f"{C}.securityContext.readOnlyRootFilesystem", False), "root file system is writable"),
    "no seccomp": (_set(f"{P}.securityContext.seccompProfile", {"type": "Unconfined"}), "no seccompProfile"),
    "root": (_set(f"{P}.securityContext.runAsNonRoot", False), "runAsNonRoot is not true"),
    "host path": (_set(f"{P}.volumes.0", {"name": "models", "hostPath": {"path": "/m"}}), "hostPath is not allowed"),
    "cache on root": (
        _set(f"{C}.env.-1", {"name": "HF_HOME", "value": "/root/.cache"}),
        "HF_HOME=/root/.cache is not on",
    ),
    "liveness on readiness": (_set(f"{C}.livenessProbe.httpGet.path", "/health"), "liveness probe is /health,"),
    "no startup probe": (_drop(f"{C}.startupProbe"), "no startup probe"),
    "short startup": (_set(f"{C}.startupProbe.failureThreshold", 6), "the startup probe allows 60 s"),
    "readiness elsewhere": (_set(f"{C}.readinessProbe.httpGet.path", "/health/live"), "readiness probe is"),
    "no keys": (_pop_env("BATCHD_API_KEYS"), "BATCHD_API_KEYS does not come from a Secret"),
    "token": (_set(f"{P}.automountServiceAccountToken", True), "token is mounted"),
    "default account": (_set(f"{P}.serviceAccountName", "default"), "ServiceAccount default is not part"),
    "no scrape": (_set("spec.template.metadata.annotations", {}), "pods lack prometheus.io scrape annotations"),
    "surge": (_set("spec.strategy.rollingUpdate", {"maxSurge": 1, "maxUnavailable": 0}), "needs a spare GPU"),
    "no toleration": (_set(f"{P}.tolerations", []), "no toleration for the nvidia.com/gpu taint"),
    "no spread": (_set(f"{P}.topologySpreadConstraints", []), "replicas are not spread over nodes"),
    "no migration": (_set(f"{P}.initContainers", []), "no init container runs `batchd db upgrade`"),
    "migrate job": (_add_migrate_job, "Job/batchd-migrate is applied with"),
    "small body": (
        _annotate("Ingress/batchd", "nginx.ingress.kubernetes.io/proxy-body-size", "100m"),
        "proxy-body-size",
    ),
    "short timeout": (
        _annotate("Ingress/batchd", "nginx.ingress.kubernetes.io/proxy-read-timeout", "60"),
        "proxy-read-timeout",
    ),
    "proxy untrusted": (_unset_setting("BATCHD_FORWARDED_ALLOW_IPS"), "BATCHD_FORWARDED_ALLOW_IPS is not set"),
}


@pytest.fixture(scope="module")
def gpu_with_components(tmp_path_factory):
    return render_with_components("gpu-engine", tmp_path_factory.mktemp("components"))


@pytest.mark.parametrize("lost", LOST)
def test_the_checker_catches_each_property_lost(lost, gpu_with_components):
    objects = copy.deepcopy(gpu_with_components)
    mutate, expected = LOST[lost]
    mutate(objects)
    found = checker.problems(objects)
    assert [p for p in found if expected in p], found


def test_the_service_monitor_scrapes_the_service_and_the_checker_sees_it_miss(gpu_with_components):
    objects = copy.deepcopy(gpu_with_components)
    (endpoint,) = objects["ServiceMonitor/batchd"]["spec"]["endpoints"]
    assert (endpoint["port"], endpoint["path"]) == ("http", "/metrics")
    assert endpoint["authorization"]["credentials"] == {"name": "batchd", "key": "metrics-token"}
    endpoint["port"] = "metrics"
    assert checker.problems(objects) == ["ServiceMonitor/batchd: endpoint port metrics is not a port of the Service"]


def test_behind_the_ingress_batchd_trusts_the_forwarded_client_address(gpu_with_components):
    (settings,) = [o for key, o in gpu_with_components.items() if key.startswith("ConfigMap/batchd-settings-")]
    trusted = Settings(forwarded_allow_ips=settings["data"]["BATCHD_FORWARDED_ALLOW_IPS"])
    assert {"10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16"} <= set(trusted.parsed_forwarded_allow_ips() or [])
    assert "*" not in settings["data"]["BATCHD_FORWARDED_ALLOW_IPS"]  # a pod outside the ranges is no proxy


def test_the_ingress_lets_batchds_largest_upload_through(gpu_with_components):
    largest = Settings.model_fields["max_file_bytes"].default
    assert checker.largest_request_body({}) == largest == 512 * 1024 * 1024
    notes = gpu_with_components["Ingress/batchd"]["metadata"]["annotations"]
    assert largest < checker._nginx_size(notes["nginx.ingress.kubernetes.io/proxy-body-size"]) < largest + 16 * 1024**2
    # An operator who raises batchd's limit in the settings must raise the ingress's too.
    objects = copy.deepcopy(gpu_with_components)
    (settings,) = [o for key, o in objects.items() if key.startswith("ConfigMap/batchd-settings-")]
    settings["data"]["BATCHD_MAX_FILE_BYTES"] = str(2 * largest)
    assert checker.problems(objects) == [
        f"Ingress/batchd: proxy-body-size lets {520 * 1024**2} bytes through, batchd takes bodies of {2 * largest}"
    ]


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_the_objects_run_batchd_as_it_is_run(overlay, tmp_path):
    objects = render(KUBERNETES / "overlays" / overlay)
    spec, container = pod(objects), server(objects)
    assert container["args"][:1] == ["serve"] and "--config" in container["args"]
    assert container["lifecycle"]["preStop"]["exec"]["command"][0] == "sleep"
    assert spec["terminationGracePeriodSeconds"] > 30 + 5  # uvicorn's graceful 30 s after the preStop
    secrets = {
        e["name"]: e["valueFrom"]["secretKeyRef"]["key"]
        for e in container["env"]
        if "secretKeyRef" in e.get("valueFrom", {})
    }
    assert secrets["BATCHD_DATABASE_URL"] == "database-url" and secrets["BATCHD_SECRET_KEY"] == "secret-key"
    assert {"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"} <= set(secrets)
    (pdb,) = [o for key, o in objects.items() if key.startswith("PodDisruptionBudget/")]
    labels = objects["Deployment/batchd"]["spec"]["template"]["metadata"]["labels"]
    assert pdb["spec"]["selector"]["matchLabels"].items() <= labels.items()
    # The bucket and region are the overlay's placeholders, not the base's values.
    (settings,) = [o for key, o in objects.items() if key.startswith("ConfigMap/batchd-settings-")]
    assert settings["data"]["BATCHD_STORAGE_URL"] == "s3://CHANGE-ME-bucket/batchd"
    assert settings["data"]["AWS_REGION"] == "CHANGE-ME-region"
    # The ConfigMap's model config is one batchd's own loader accepts.
    (models,) = [o for key, o in objects.items() if key.startswith("ConfigMap/batchd-models-")]
    config = tmp_path / "models.yaml"
    config.write_text(models["data"]["models.yaml"])
    specs = resolve_model_specs([], config, data_dir=tmp_path)
    assert [s.name for s in specs] == ["qwen"]
    assert isinstance(specs[0], UpstreamSpec) == (overlay == "upstream-fleet")


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_path_the_manifests_probe_or_scrape_is_a_get_route_of_batchd(overlay, tmp_path):
    """The probes' and scrape's paths are routes batchd serves (a renamed route fails here, not
    in a cluster whose pods never turn ready)."""
    objects = render_with_components(overlay, tmp_path)
    container = server(objects)
    paths = {container[kind]["httpGet"]["path"] for kind in ("startupProbe", "livenessProbe", "readinessProbe")}
    paths.add(objects["Deployment/batchd"]["spec"]["template"]["metadata"]["annotations"]["prometheus.io/path"])
    (monitor,) = [o for key, o in objects.items() if key.startswith("ServiceMonitor/")]
    paths |= {endpoint["path"] for endpoint in monitor["spec"]["endpoints"]}
    assert {"/health", "/health/live", "/metrics"} <= paths
    routes = {route.path for route in create_app(Settings()).routes if "GET" in getattr(route, "methods", ())}
    assert paths <= routes, paths - routes


def test_the_new_components_wire_to_batchd_and_the_checker_sees_each_break(gpu_with_components):
    """HTTPRoute, NetworkPolicy and PrometheusRule (#56) pass as rendered; each break is named."""
    assert checker.problems(gpu_with_components) == []
    breaks: dict[str, tuple[Callable[[dict], None], str]] = {
        "route port": (
            lambda o: o["HTTPRoute/batchd"]["spec"]["rules"][0]["backendRefs"][0].update(port=9000),
            "HTTPRoute/batchd: backend batchd:9000 is not a port of a Service here",
        ),
        "route timeout": (
            lambda o: o["HTTPRoute/batchd"]["spec"]["rules"][0]["timeouts"].update(request="30s"),
            "HTTPRoute/batchd: its request timeout is under 600 s",
        ),
        "policy egress": (
            lambda o: o["NetworkPolicy/batchd"]["spec"]["egress"].pop(1),
            "NetworkPolicy/batchd: no egress to Postgres (port 5432)",
        ),
        "alert metric": (
            lambda o: o["PrometheusRule/batchd"]["spec"]["groups"][0]["rules"][1].update(expr="batchd_at_risk > 0"),
            "PrometheusRule/batchd: alert BatchdBatchesAtRisk reads batchd_at_risk, which batchd does not export",
        ),
        "memory limit": (
            lambda o: o["Deployment/batchd"]["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"].pop(
                "memory"
            ),
            "Deployment/batchd: container batchd has no memory limit",
        ),
        "data size": (
            lambda o: next(
                v for v in o["Deployment/batchd"]["spec"]["template"]["spec"]["volumes"] if v["name"] == "data"
            ).update(emptyDir={}),
            "Deployment/batchd: emptyDir data has no sizeLimit",
        ),
    }
    for name, (mutate, expected) in breaks.items():
        objects = copy.deepcopy(gpu_with_components)
        mutate(objects)
        found = checker.problems(objects)
        assert [p for p in found if p.startswith(expected)], (name, found)
    exported = {"batchd_engine_up", "batchd_batches_at_risk", "batchd_http_requests_total"}
    exprs = " ".join(r["expr"] for r in gpu_with_components["PrometheusRule/batchd"]["spec"]["groups"][0]["rules"])
    assert all(metric in exprs for metric in exported)


def test_keda_and_the_grafana_dashboard_wire_to_batchd_and_the_checker_sees_each_break(gpu_with_components):
    """The KEDA ScaledObject scales the server on its backlog, never to zero; the dashboard
    ConfigMap carries the sidecar's label and reads only batchd's metrics."""
    scaled = gpu_with_components["ScaledObject/batchd"]["spec"]
    assert scaled["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "Deployment", "name": "batchd"}
    assert "batchd_lines_waiting" in scaled["triggers"][0]["metadata"]["query"]
    dashboard = gpu_with_components["ConfigMap/batchd-grafana-dashboard"]
    assert dashboard["metadata"]["labels"]["grafana_dashboard"] == "1"
    panels = json.loads(dashboard["data"]["batchd.json"])["panels"]
    exprs = " ".join(t["expr"] for p in panels for t in p.get("targets", []))
    for metric in ("batchd_batches_at_risk", "batchd_engine_restarts_total", "batchd_engine_loads_total"):
        assert metric in exprs
    assert "batchd_single_request_seconds_bucket" in exprs
    breaks: dict[str, tuple[Callable[[dict], None], str]] = {
        "to zero": (
            lambda o: o["ScaledObject/batchd"]["spec"].update(minReplicaCount=0),
            "ScaledObject/batchd: minReplicaCount below 1",
        ),
        "target": (
            lambda o: o["ScaledObject/batchd"]["spec"]["scaleTargetRef"].update(name="batch"),
            "ScaledObject/batchd: scales Deployment/batch, not a Deployment here",
        ),
        "trigger metric": (
            lambda o: o["ScaledObject/batchd"]["spec"]["triggers"][0]["metadata"].update(query="sum(batchd_queue)"),
            "ScaledObject/batchd: trigger reads batchd_queue, which batchd does not export",
        ),
        "panel metric": (
            lambda o: o["ConfigMap/batchd-grafana-dashboard"]["data"].update(
                {"batchd.json": json.dumps({"panels": [{"title": "x", "targets": [{"expr": "batchd_gone"}]}]})}
            ),
            "ConfigMap/batchd-grafana-dashboard: batchd.json: panel 'x' reads batchd_gone",
        ),
    }
    for name, (mutate, expected) in breaks.items():
        objects = copy.deepcopy(gpu_with_components)
        mutate(objects)
        found = checker.problems(objects)
        assert [p for p in found if p.startswith(expected)], (name, found)


def test_the_gpu_nodes_example_patches_count_node_and_classes():
    """The documented GPU patches (count, node label, runtime and priority class) apply over the
    GPU overlay and leave its rollout and toleration."""
    objects = render(KUBERNETES / "overlays" / "gpu-nodes")
    spec, container = pod(objects), server(objects)
    assert container["resources"]["limits"]["nvidia.com/gpu"] == 2
    assert spec["nodeSelector"] == {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"}
    assert spec["runtimeClassName"] == "nvidia" and spec["priorityClassName"] == "batchd-gpu"
    assert objects["Deployment/batchd"]["spec"]["strategy"]["rollingUpdate"]["maxSurge"] == 0
    assert any(t["key"] == "nvidia.com/gpu" for t in spec["tolerations"])
