#!/usr/bin/env bash
# Lint of deploy/kubernetes for `make lint`, with no cluster: every overlay is rendered by
# kustomize (`kubectl kustomize`, or a standalone `kustomize build`) and each rendered object is
# checked against the Kubernetes API schemas by kubernetes-validate (a dev extra), strictly:
# an unknown or misspelt field fails too. Usage: scripts/lint-kubernetes.sh VENV_BIN [OVERLAYS_DIR]
set -euo pipefail

BIN=${1:?usage: $0 VENV_BIN [OVERLAYS_DIR]}
cd "$(dirname "$0")/.."
OVERLAYS=${2:-deploy/kubernetes/overlays}

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
found=0
for overlay in "$OVERLAYS"/*/; do
    name=$(basename "$overlay")
    render "$overlay" >"$rendered/$name.yaml"
    "$BIN/kubernetes-validate" --strict --quiet "$rendered/$name.yaml"
    found=$((found + 1))
done
if [ "$found" -eq 0 ]; then
    echo "lint-kubernetes: no overlay under $OVERLAYS" >&2
    exit 1
fi
echo "kubernetes: $found overlays render and validate"
