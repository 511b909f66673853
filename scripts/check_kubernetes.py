"""What an operator's cluster asks of batchd's rendered manifests, beyond the API schemas that
kubernetes-validate checks: scripts/lint-kubernetes.sh runs it on every rendered overlay (and
tests/deploy/test_kubernetes.py on each one, and on broken copies).

Every pod template meets Pod Security "restricted", runs as the images' user with a read-only
root file system, and has every cache and temporary directory on a writable volume. The server
Deployment (`Deployment/batchd`) has the startup, liveness (`/health/live`) and readiness
(`/health`) probes, a required API-keys Secret, a ServiceAccount without a token, Prometheus
scrape annotations, migrations in an init container, replicas spread over nodes, a shared blob
store, and, on GPUs, a rollout that needs no spare GPU. A ServiceMonitor or Ingress, when a
component adds one, points at the Service, and the Ingress lets batchd's largest upload through;
a KEDA ScaledObject scales the server on a metric batchd exports and never to zero, and a Grafana
dashboard ConfigMap reads only metrics batchd exports.

Usage: python scripts/check_kubernetes.py [--no-server] RENDERED.yaml...  (one line per problem,
exit 1 if any; --no-server for renders without the server, such as fill-models).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
IMAGE_UID = 1000  # the user docker/Dockerfile and docker/Dockerfile.gpu run as
GPU = "nvidia.com/gpu"
# An engine loads for minutes (weights, compilation): the startup probe allows at least this.
ENGINE_START_SECONDS = 600
# The Ingress's timeouts let a large upload or download run at least this long.
INGRESS_TIMEOUT_SECONDS = 600
# Where vLLM, Hugging Face, torch and Triton write, set to a writable volume in the server.
CACHE_VARIABLES = (
    "HOME",
    "XDG_CACHE_HOME",
    "HF_HOME",
    "VLLM_CACHE_ROOT",
    "TORCHINDUCTOR_CACHE_DIR",
    "TRITON_CACHE_DIR",
    "TMPDIR",
)
REQUIRED_SECRETS = ("BATCHD_API_KEYS", "BATCHD_DATABASE_URL", "BATCHD_SECRET_KEY")
# Pod Security Standards, "restricted" (kubernetes.io/docs/concepts/security/pod-security-standards).
RESTRICTED_VOLUMES = {
    "configMap",
    "csi",
    "downwardAPI",
    "emptyDir",
    "ephemeral",
    "persistentVolumeClaim",
    "projected",
    "secret",
}
RESTRICTED_SECCOMP = {"RuntimeDefault", "Localhost"}
POD_TEMPLATE_PATHS = {
    "Deployment": ("spec", "template"),
    "StatefulSet": ("spec", "template"),
    "DaemonSet": ("spec", "template"),
    "ReplicaSet": ("spec", "template"),
    "Job": ("spec", "template"),
    "CronJob": ("spec", "jobTemplate", "spec", "template"),
}

NGINX_UNITS = {"": 1, "k": 1024, "m": 1024**2, "g": 1024**3}

Objects = dict[str, dict[str, Any]]


def problems(objects: Objects, *, server: bool = True) -> list[str]:
    """Everything wrong with one render, keyed `Kind/name` (generated names keep their hash)."""
    found: list[str] = []
    for key, template in _pod_templates(objects):
        found += [f"{key}: {p}" for p in pod_security(template["spec"])]
    deployment = objects.get("Deployment/batchd")
    if server and deployment is None:
        found.append("no Deployment/batchd (the server)")
    if deployment is not None:
        found += [f"Deployment/batchd: {p}" for p in server_problems(deployment, objects)]
    for key, obj in objects.items():
        if obj["kind"] == "ServiceMonitor":
            found += [f"{key}: {p}" for p in service_monitor_problems(obj, objects)]
        elif obj["kind"] == "Ingress":
            found += [f"{key}: {p}" for p in ingress_problems(obj, objects)]
        elif obj["kind"] == "HTTPRoute":
            found += [f"{key}: {p}" for p in http_route_problems(obj, objects)]
        elif obj["kind"] == "NetworkPolicy":
            found += [f"{key}: {p}" for p in network_policy_problems(obj, objects)]
        elif obj["kind"] == "PrometheusRule":
            found += [f"{key}: {p}" for p in prometheus_rule_problems(obj)]
        elif obj["kind"] == "ScaledObject":
            found += [f"{key}: {p}" for p in scaled_object_problems(obj, objects)]
        elif obj["kind"] == "ConfigMap" and obj["metadata"].get("labels", {}).get("grafana_dashboard"):
            found += [f"{key}: {p}" for p in grafana_dashboard_problems(obj)]
    return found


def load(text: str) -> Objects:
    return {f"{o['kind']}/{o['metadata']['name']}": o for o in yaml.safe_load_all(text) if o}


def _pod_templates(objects: Objects) -> Iterator[tuple[str, dict[str, Any]]]:
    for key, obj in objects.items():
        if obj["kind"] == "Pod":
            yield key, obj
        elif obj["kind"] in POD_TEMPLATE_PATHS:
            template = obj
            for step in POD_TEMPLATE_PATHS[obj["kind"]]:
                template = template[step]
            yield key, template


def _containers(pod: dict[str, Any]) -> list[dict[str, Any]]:
    return [*pod.get("initContainers", []), *pod.get("containers", []), *pod.get("ephemeralContainers", [])]


# --- Pod Security "restricted", and a read-only root with writable caches -------------------


def pod_security(pod: dict[str, Any]) -> list[str]:
    found = []
    pod_context = pod.get("securityContext", {})
    for field in ("hostNetwork", "hostPID", "hostIPC"):
        if pod.get(field):
            found.append(f"{field} is on")
    for volume in pod.get("volumes", []):
        kinds = set(volume) - {"name"}
        if not kinds <= RESTRICTED_VOLUMES:
            found.append(f"volume {volume['name']}: {', '.join(sorted(kinds))} is not allowed")
    if pod_context.get("runAsUser") != IMAGE_UID or pod_context.get("fsGroup") != IMAGE_UID:
        found.append(f"the pod's runAsUser and fsGroup are not the images' user {IMAGE_UID}")
    for container in _containers(pod):
        found += [f"container {container['name']}: {p}" for p in _container_security(container, pod_context)]
    return found


def _container_security(container: dict[str, Any], pod_context: dict[str, Any]) -> list[str]:
    found = []
    context = container.get("securityContext", {})

    def effective(field: str) -> Any:
        return context.get(field, pod_context.get(field))

    if effective("runAsNonRoot") is not True:
        found.append("runAsNonRoot is not true")
    if effective("runAsUser") == 0:
        found.append("runs as root (runAsUser 0)")
    if (effective("seccompProfile") or {}).get("type") not in RESTRICTED_SECCOMP:
        found.append("no seccompProfile RuntimeDefault")
    if context.get("privileged"):
        found.append("privileged")
    if context.get("allowPrivilegeEscalation") is not False:
        found.append("allowPrivilegeEscalation is not false")
    capabilities = context.get("capabilities", {})
    if "ALL" not in capabilities.get("drop", []):
        found.append("capabilities do not drop ALL")
    if set(capabilities.get("add", [])) - {"NET_BIND_SERVICE"}:
        found.append(f"capabilities add {capabilities['add']}")
    if context.get("procMount", "Default") != "Default":
        found.append("procMount is not Default")
    if any("hostPort" in port for port in container.get("ports", [])):
        found.append("a hostPort")
    if context.get("readOnlyRootFilesystem") is not True:
        found.append("the root file system is writable (readOnlyRootFilesystem)")
    writable = [m["mountPath"] for m in container.get("volumeMounts", []) if not m.get("readOnly")]
    if "/tmp" not in writable:
        found.append("/tmp is not a writable volume")
    for name, value in _plain_env(container).items():
        if (name in CACHE_VARIABLES or name.endswith("_CACHE_DIR")) and not _under(value, writable):
            found.append(f"{name}={value} is not on a writable volume")
    return found


def _plain_env(container: dict[str, Any]) -> dict[str, str]:
    return {e["name"]: e["value"] for e in container.get("env", []) if "value" in e}


def _under(path: str, mounts: list[str]) -> bool:
    return any(path == m or path.startswith(m.rstrip("/") + "/") for m in mounts)


# --- The server Deployment ---------------------------------------------------------------------


def server_problems(deployment: dict[str, Any], objects: Objects) -> list[str]:
    template = deployment["spec"]["template"]
    pod = template["spec"]
    server = _server(deployment)
    if server is None:
        return ["no container named batchd"]
    settings = _settings(server, objects)
    return [
        *_probes(server, runs_engine=_runs_engine(pod, objects)),
        *_cache_variables(server),
        *_required_secrets(server),
        *_service_account(pod, objects),
        *_scrape_annotations(template, server, objects),
        *_migrations(pod, objects),
        *_topology_spread(deployment),
        *_gpu_rollout(deployment),
        *_blob_store(settings),
        *_resources(pod),
    ]


def _resources(pod: dict[str, Any]) -> list[str]:
    """A memory limit and an ephemeral-storage request on every container, a sizeLimit on every
    emptyDir: a leak or a full scratch volume costs one replica, never the node."""
    found = []
    for container in [*pod.get("initContainers", []), *pod["containers"]]:
        resources = container.get("resources", {})
        if "memory" not in resources.get("limits", {}):
            found.append(f"container {container['name']} has no memory limit")
        if "ephemeral-storage" not in resources.get("requests", {}):
            found.append(f"container {container['name']} requests no ephemeral-storage")
    for volume in pod.get("volumes", []):
        if "emptyDir" in volume and not (volume["emptyDir"] or {}).get("sizeLimit"):
            found.append(f"emptyDir {volume['name']} has no sizeLimit")
    return found


def _server(deployment: dict[str, Any]) -> dict[str, Any] | None:
    return next((c for c in deployment["spec"]["template"]["spec"]["containers"] if c["name"] == "batchd"), None)


def _probes(server: dict[str, Any], *, runs_engine: bool) -> list[str]:
    found = []
    paths = {kind: _probe_path(server, kind) for kind in ("startupProbe", "livenessProbe", "readinessProbe")}
    if paths["livenessProbe"] != "/health/live":
        found.append(f"liveness probe is {paths['livenessProbe']}, not GET /health/live")
    if paths["readinessProbe"] != "/health":
        found.append(f"readiness probe is {paths['readinessProbe']}, not GET /health")
    startup = server.get("startupProbe")
    if startup is None:
        found.append("no startup probe (liveness would restart a replica whose engine is loading)")
    elif runs_engine and _probe_window(startup) < ENGINE_START_SECONDS:
        found.append(f"the startup probe allows {_probe_window(startup)} s, an engine loads for minutes")
    ports = {p.get("name") for p in server.get("ports", [])} | {p["containerPort"] for p in server.get("ports", [])}
    for kind in paths:
        port = server.get(kind, {}).get("httpGet", {}).get("port")
        if kind in server and port not in ports:
            found.append(f"{kind} port {port} is not a container port")
    return found


def _probe_path(container: dict[str, Any], kind: str) -> str | None:
    return container.get(kind, {}).get("httpGet", {}).get("path")


def _probe_window(probe: dict[str, Any]) -> int:
    return probe.get("initialDelaySeconds", 0) + probe.get("periodSeconds", 10) * probe.get("failureThreshold", 3)


def _runs_engine(pod: dict[str, Any], objects: Objects) -> bool:
    """True when the model config (the ConfigMap mounted for `--config`) has a local model."""
    for volume in pod.get("volumes", []):
        config = objects.get(f"ConfigMap/{volume.get('configMap', {}).get('name')}")
        if config and "models.yaml" in config.get("data", {}):
            models = (yaml.safe_load(config["data"]["models.yaml"]) or {}).get("models") or {}
            return any("upstream" not in spec for spec in models.values())
    return True


def _cache_variables(server: dict[str, Any]) -> list[str]:
    missing = [name for name in CACHE_VARIABLES if name not in _plain_env(server)]
    if not missing:
        return []
    return [f"{', '.join(missing)} not set (vLLM and Hugging Face would write to the read-only root)"]


def _required_secrets(server: dict[str, Any]) -> list[str]:
    refs = {
        e["name"]: e["valueFrom"]["secretKeyRef"]
        for e in server.get("env", [])
        if "secretKeyRef" in e.get("valueFrom", {})
    }
    found = []
    for name in REQUIRED_SECRETS:
        if name not in refs:
            found.append(f"{name} does not come from a Secret")
        elif refs[name].get("optional"):
            found.append(f"{name}'s Secret key is optional (a missing key must stop the pod, not open the API)")
    return found


def _service_account(pod: dict[str, Any], objects: Objects) -> list[str]:
    name = pod.get("serviceAccountName", "default")
    account = objects.get(f"ServiceAccount/{name}")
    if account is None:
        return [f"its ServiceAccount {name} is not part of the manifests"]
    if account.get("automountServiceAccountToken") is not False or pod.get("automountServiceAccountToken") is True:
        return [f"ServiceAccount {name}'s token is mounted (automountServiceAccountToken)"]
    return []


def _scrape_annotations(template: dict[str, Any], server: dict[str, Any], objects: Objects) -> list[str]:
    ports = {str(p["containerPort"]) for p in server.get("ports", [])}
    found = [] if _scrapes(template["metadata"], ports) else ["pods lack prometheus.io scrape annotations for /metrics"]
    services = _services_selecting(template["metadata"].get("labels", {}), objects)
    if not services:
        found.append("no Service selects its pods")
    for key, service in services.items():
        if not _scrapes(service["metadata"], ports):
            found.append(f"{key} lacks prometheus.io scrape annotations for /metrics")
    return found


def _scrapes(metadata: dict[str, Any], ports: set[str]) -> bool:
    notes = metadata.get("annotations", {})
    return (
        notes.get("prometheus.io/scrape") == "true"
        and notes.get("prometheus.io/path") == "/metrics"
        and notes.get("prometheus.io/port") in ports
    )


def _services_selecting(labels: dict[str, str], objects: Objects) -> Objects:
    return {
        key: obj
        for key, obj in objects.items()
        if obj["kind"] == "Service"
        and obj["spec"].get("selector")
        and obj["spec"]["selector"].items() <= labels.items()
    }


def _migrations(pod: dict[str, Any], objects: Objects) -> list[str]:
    found = []
    if not any(c.get("args") == ["db", "upgrade"] for c in pod.get("initContainers", [])):
        found.append("no init container runs `batchd db upgrade`")
    # A Job applied with the server collides with its own immutable template on the next apply.
    found += [f"{key} is applied with the server" for key, obj in objects.items() if obj["kind"] == "Job"]
    return found


def _topology_spread(deployment: dict[str, Any]) -> list[str]:
    if deployment["spec"].get("replicas", 1) < 2:
        return []
    labels = deployment["spec"]["template"]["metadata"].get("labels", {})
    for constraint in deployment["spec"]["template"]["spec"].get("topologySpreadConstraints", []):
        selector = constraint.get("labelSelector", {}).get("matchLabels", {})
        if constraint["topologyKey"] == "kubernetes.io/hostname" and selector and selector.items() <= labels.items():
            return []
    return ["replicas are not spread over nodes (topologySpreadConstraints on kubernetes.io/hostname)"]


def _gpu_rollout(deployment: dict[str, Any]) -> list[str]:
    pod = deployment["spec"]["template"]["spec"]
    if not any(GPU in c.get("resources", {}).get("limits", {}) for c in pod["containers"]):
        return []
    found = []
    strategy = deployment["spec"].get("strategy", {})
    rolling = strategy.get("rollingUpdate", {})
    surge, unavailable = (str(rolling.get(field, "25%")) for field in ("maxSurge", "maxUnavailable"))
    if strategy.get("type") != "Recreate" and (surge not in ("0", "0%") or unavailable in ("0", "0%")):
        found.append("its rollout needs a spare GPU (use Recreate, or maxSurge 0 with maxUnavailable 1)")
    if not any(t.get("key") == GPU for t in pod.get("tolerations", [])):
        found.append(f"no toleration for the {GPU} taint")
    return found


def _settings(server: dict[str, Any], objects: Objects) -> dict[str, str]:
    settings: dict[str, str] = {}
    for source in server.get("envFrom", []):
        config = objects.get(f"ConfigMap/{source.get('configMapRef', {}).get('name')}")
        settings |= (config or {}).get("data", {})
    return settings | _plain_env(server)


def _blob_store(settings: dict[str, str]) -> list[str]:
    found = []
    if not settings.get("BATCHD_STORAGE_URL", "").startswith("s3://"):
        found.append("BATCHD_STORAGE_URL is not an s3:// bucket (blobs on a pod's scratch volume are lost)")
    if not settings.get("AWS_REGION"):
        found.append("AWS_REGION is not set")
    return found


# --- Optional components -----------------------------------------------------------------------


def service_monitor_problems(monitor: dict[str, Any], objects: Objects) -> list[str]:
    selector = monitor["spec"].get("selector", {}).get("matchLabels", {})
    services = [
        o
        for o in objects.values()
        if o["kind"] == "Service" and selector and selector.items() <= o["metadata"].get("labels", {}).items()
    ]
    if not services:
        return ["selects no Service"]
    port_names = {p.get("name") for s in services for p in s["spec"]["ports"]}
    found = []
    for endpoint in monitor["spec"].get("endpoints", []):
        if endpoint.get("port") not in port_names:
            found.append(f"endpoint port {endpoint.get('port')} is not a port of the Service")
        if endpoint.get("path") != "/metrics":
            found.append(f"endpoint path {endpoint.get('path')} is not /metrics")
    return found or ([] if monitor["spec"].get("endpoints") else ["no endpoints"])


def ingress_problems(ingress: dict[str, Any], objects: Objects) -> list[str]:
    found = []
    for rule in ingress["spec"].get("rules", []):
        for path in rule.get("http", {}).get("paths", []):
            backend = path["backend"]["service"]
            service = objects.get(f"Service/{backend['name']}")
            port = backend["port"].get("name", backend["port"].get("number"))
            if service is None or port not in {p.get("name") for p in service["spec"]["ports"]} | {
                p["port"] for p in service["spec"]["ports"]
            }:
                found.append(f"backend {backend['name']}:{port} is not a port of a Service here")
    notes = ingress["metadata"].get("annotations", {})
    largest = largest_request_body(_settings_of(objects))
    body = _nginx_size(notes.get("nginx.ingress.kubernetes.io/proxy-body-size", "1m"))
    if body is not None and body < largest:
        found.append(f"proxy-body-size lets {body} bytes through, batchd takes bodies of {largest}")
    for timeout in ("proxy-read-timeout", "proxy-send-timeout"):
        if int(notes.get(f"nginx.ingress.kubernetes.io/{timeout}", "60")) < INGRESS_TIMEOUT_SECONDS:
            found.append(f"{timeout} is under {INGRESS_TIMEOUT_SECONDS} s (large uploads and downloads)")
    if not _settings_of(objects).get("BATCHD_FORWARDED_ALLOW_IPS"):
        found.append("BATCHD_FORWARDED_ALLOW_IPS is not set: every client would share the controller's address")
    return found


def http_route_problems(route: dict[str, Any], objects: Objects) -> list[str]:
    found = []
    for rule in route["spec"].get("rules", []):
        for backend in rule.get("backendRefs", []):
            service = objects.get(f"Service/{backend['name']}")
            if service is None or backend.get("port") not in {p["port"] for p in service["spec"]["ports"]}:
                found.append(f"backend {backend['name']}:{backend.get('port')} is not a port of a Service here")
        timeouts = rule.get("timeouts", {})
        if _seconds(timeouts.get("request", "0s")) < INGRESS_TIMEOUT_SECONDS:
            found.append(f"its request timeout is under {INGRESS_TIMEOUT_SECONDS} s (large uploads and downloads)")
    if not route["spec"].get("parentRefs"):
        found.append("no parentRefs (attached to no Gateway)")
    if not _settings_of(objects).get("BATCHD_FORWARDED_ALLOW_IPS"):
        found.append("BATCHD_FORWARDED_ALLOW_IPS is not set: every client would share the gateway's address")
    return found


def _seconds(duration: str) -> float:
    """A Gateway API duration (`3600s`, `1h`, `0s`: 0 is none, as long as any)."""
    units = {"h": 3600, "m": 60, "s": 1, "ms": 0.001}
    total = sum(float(n) * units[u] for n, u in re.findall(r"([0-9.]+)(ms|h|m|s)", duration))
    return float("inf") if total == 0 else total


def network_policy_problems(policy: dict[str, Any], objects: Objects) -> list[str]:
    selector = policy["spec"].get("podSelector", {}).get("matchLabels", {})
    deployment = objects.get("Deployment/batchd")
    found = []
    if deployment is not None and not selector.items() <= deployment["spec"]["template"]["metadata"]["labels"].items():
        found.append("selects no server pod")
    egress_ports = {p.get("port") for rule in policy["spec"].get("egress", []) for p in rule.get("ports", [])}
    for port, what in ((53, "DNS"), (5432, "Postgres"), (443, "S3")):
        if port not in egress_ports:
            found.append(f"no egress to {what} (port {port})")
    ingress_ports = {p.get("port") for rule in policy["spec"].get("ingress", []) for p in rule.get("ports", [])}
    if "http" not in ingress_ports and 8000 not in ingress_ports:
        found.append("no ingress to batchd's port")
    return found


def _unexported(expr: str) -> list[str]:
    """The batchd metric names in a PromQL expression that batchd does not export."""
    exported = set(re.findall(r'"(batchd_[a-z_]+)"', (ROOT / "app" / "core" / "metrics.py").read_text()))
    return [
        name
        for name in re.findall(r"\bbatchd_[a-z_]+", expr)
        if name not in exported and re.sub(r"_(total|bucket|sum|count)$", "", name) not in exported
    ]


def prometheus_rule_problems(rule: dict[str, Any]) -> list[str]:
    """Every batchd metric an alert reads is one batchd exports (a renamed metric never fires)."""
    found = []
    for group in rule["spec"].get("groups", []):
        for alert in group.get("rules", []):
            for name in _unexported(str(alert.get("expr", ""))):
                found.append(f"alert {alert.get('alert')} reads {name}, which batchd does not export")
    return found


def scaled_object_problems(scaled: dict[str, Any], objects: Objects) -> list[str]:
    """A KEDA ScaledObject scales the server on a metric batchd exports, and never to zero (with no
    replica nothing exports the backlog, so it would never scale up again)."""
    spec = scaled["spec"]
    found = []
    target = spec.get("scaleTargetRef", {})
    if target.get("kind", "Deployment") != "Deployment" or f"Deployment/{target.get('name')}" not in objects:
        found.append(f"scales {target.get('kind', 'Deployment')}/{target.get('name')}, not a Deployment here")
    if int(spec.get("minReplicaCount", 0)) < 1:
        found.append("minReplicaCount below 1: at zero replicas nothing exports the backlog it reads")
    triggers = spec.get("triggers", [])
    if not any(t.get("type") == "prometheus" for t in triggers):
        found.append("no prometheus trigger on batchd's metrics")
    for trigger in triggers:
        query = str(trigger.get("metadata", {}).get("query", ""))
        if trigger.get("type") == "prometheus" and "batchd_" not in query:
            found.append(f"trigger query {query!r} reads no batchd metric")
        for name in _unexported(query):
            found.append(f"trigger reads {name}, which batchd does not export")
    return found


def grafana_dashboard_problems(config_map: dict[str, Any]) -> list[str]:
    """A dashboard ConfigMap for Grafana's sidecar holds dashboards whose panels read only metrics
    batchd exports."""
    found = []
    data = config_map.get("data", {})
    if not any(name.endswith(".json") for name in data):
        found.append("no .json dashboard in its data")
    for name, text in data.items():
        try:
            dashboard = json.loads(text)
        except ValueError as e:
            found.append(f"{name} is not JSON: {e}")
            continue
        for panel in dashboard.get("panels", []):
            for target in panel.get("targets", []):
                for metric in _unexported(str(target.get("expr", ""))):
                    found.append(f"{name}: panel {panel.get('title')!r} reads {metric}, which batchd does not export")
    return found


def _settings_of(objects: Objects) -> dict[str, str]:
    server = _server(objects["Deployment/batchd"]) if "Deployment/batchd" in objects else None
    return _settings(server, objects) if server else {}


def largest_request_body(settings: dict[str, str]) -> int:
    """The largest body batchd accepts (a file upload, an upload part, JSON), its multipart
    framing aside: the settings' values where they set them, else batchd's defaults."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from app.core.config import Settings

    names = ("max_file_bytes", "max_batch_file_bytes", "max_upload_part_bytes", "max_json_body_bytes")
    return max(int(settings.get(f"BATCHD_{n.upper()}", Settings.model_fields[n].default)) for n in names)


def _nginx_size(value: str) -> int | None:
    """Bytes of an nginx size (`520m`, `1g`, `8k`, bytes); None for 0, no limit."""
    match = re.fullmatch(r"(\d+)([kKmMgG]?)", value.strip())
    if match is None:
        raise ValueError(f"not an nginx size: {value!r}")
    number = int(match[1])
    return None if number == 0 else number * NGINX_UNITS[match[2].lower()]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--no-server", action="store_true", help="renders without Deployment/batchd")
    parser.add_argument("renders", nargs="+", type=Path)
    args = parser.parse_args()
    failed = False
    for render in args.renders:
        for problem in problems(load(render.read_text()), server=not args.no_server):
            print(f"{render.name}: {problem}")
            failed = True
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
