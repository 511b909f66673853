#!/bin/bash
# Serve S3 on 8333 with one identity taken from AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY and
# the buckets in S3_BUCKETS created on start; /tmp/seaweedfs-ready marks the gateway as up.
set -eu
if [ -z "${AWS_ACCESS_KEY_ID:-}" ] || [ -z "${AWS_SECRET_ACCESS_KEY:-}" ]; then
    echo "seaweedfs-entrypoint: AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY must be set" >&2
    exit 1
fi
rm -f /tmp/seaweedfs-ready
config=/tmp/s3.json
cat > "$config" <<JSON
{"identities": [{"name": "batchd",
  "credentials": [{"accessKey": "$AWS_ACCESS_KEY_ID", "secretKey": "$AWS_SECRET_ACCESS_KEY"}],
  "actions": ["Admin", "Read", "Write", "List", "Tagging"]}]}
JSON
weed mini -dir=/data -ip=127.0.0.1 -ip.bind=0.0.0.0 -s3.config="$config" \
    -bucket="$S3_BUCKETS" -admin.ui=false "$@" &
pid=$!
# Ready once the S3 port accepts connections and every bucket exists.
ready() {
    (exec 3<>/dev/tcp/127.0.0.1/8333) 2>/dev/null || return 1
    local listing bucket
    listing=$(echo "s3.bucket.list" | weed shell -master=127.0.0.1:9333 2>/dev/null) || return 1
    for bucket in ${S3_BUCKETS//,/ }; do
        grep -qw -- "$bucket" <<<"$listing" || return 1
    done
}
: "${S3_BUCKETS:=batchd}"
(until ready; do sleep 1; done; touch /tmp/seaweedfs-ready) &
trap 'kill -TERM "$pid"' TERM INT
wait "$pid"
