#!/usr/bin/env bash
# Lint of deploy/kubernetes for `make lint`, with no cluster. Every overlay is rendered by
# kustomize (`kubectl kustomize`, or a standalone `kustomize build`): alone, with every optional
# component (../components), and the kustomizations inside it (fill-models). Each render is
# checked against the Kubernetes API schemas by kubernetes-validate (a dev extra), strictly (an
# unknown or misspelt field fails too), and against what a cluster asks of batchd beyond them by
# scripts/check_kubernetes.py (probes, Pod Security "restricted", the keys Secret, ...).
# Usage: scripts/lint-kubernetes.sh VENV_BIN [OVERLAYS_DIR]
set -euo pipefail

BIN=${1:?usage: $0 VENV_BIN [OVERLAYS_DIR]}
cd "$(dirname "$0")/.."
OVERLAYS=$(realpath "${2:-deploy/kubernetes/overlays}")
COMPONENTS=$(realpath "$OVERLAYS/../components")

if command -v kubectl >/dev/null; then
    render() { kubectl kustomize "$1"; }
elif command -v kustomize >/dev/null; then
    render() { kustomize build "$1"; }
else
    echo "lint-kubernetes: needs kubectl (1.27 or newer: kustomize v5 inside) or kustomize on PATH" >&2
    exit 1
fi

rendered=$(mktemp -d)
trap 'rm -rf "$rendered"' EXIT
# kustomize takes no absolute paths in a kustomization: the overlay and components relative to it.
# with_components OVERLAY NAME [COMPONENT]: the overlay with every component, or with COMPONENT only.
with_components() {
    local dir=$rendered/$2-components${3:+-$(basename "$3")}
    local chosen=("$COMPONENTS"/*/)
    [ -z "${3:-}" ] || chosen=("$3")
    mkdir -p "$dir"
    {
        echo "resources: [$(realpath --relative-to="$dir" "$1")]"
        echo "components:"
        for component in "${chosen[@]}"; do
            echo "  - $(realpath --relative-to="$dir" "$component")"
        done
    } >"$dir/kustomization.yaml"
    echo "$dir"
}

servers=()
singles=()
others=()
for overlay in "$OVERLAYS"/*/; do
    name=$(basename "$overlay")
    render "$overlay" >"$rendered/$name.yaml"
    servers+=("$rendered/$name.yaml")
    render "$(with_components "$overlay" "$name")" >"$rendered/$name+components.yaml"
    servers+=("$rendered/$name+components.yaml")
    # Each component alone too: one may lean on another (a patch, a merged setting) unseen above.
    for component in "$COMPONENTS"/*/; do
        single=$name+$(basename "$component")
        render "$(with_components "$overlay" "$name" "$component")" >"$rendered/$single.yaml"
        singles+=("$rendered/$single.yaml")
    done
    for inner in "$overlay"*/kustomization.yaml; do
        [ -e "$inner" ] || continue
        inner_name=$name-$(basename "$(dirname "$inner")")
        render "$(dirname "$inner")" >"$rendered/$inner_name.yaml"
        others+=("$rendered/$inner_name.yaml")
    done
done
if [ ${#servers[@]} -eq 0 ]; then
    echo "lint-kubernetes: no overlay under $OVERLAYS" >&2
    exit 1
fi
# The components' custom resources (ServiceMonitor, PrometheusRule, HTTPRoute, ScaledObject) have no schema
# here: check_kubernetes.py checks them; other warnings still print.
for file in "${servers[@]}" "${singles[@]}" "${others[@]}"; do
    "$BIN/kubernetes-validate" --strict --quiet "$file" 2>&1 |
        { grep -Ev "Couldn't find schema for kind (ServiceMonitor|PrometheusRule|HTTPRoute|ScaledObject) " || true; }
done
"$BIN/python" scripts/check_kubernetes.py "${servers[@]}" "${singles[@]}"
if [ ${#others[@]} -gt 0 ]; then
    "$BIN/python" scripts/check_kubernetes.py --no-server "${others[@]}"
fi
echo "kubernetes: ${#servers[@]} renders of overlays (with and without components) and ${#others[@]} inner ones render, validate and pass check_kubernetes.py (and ${#singles[@]} with one component each)"
