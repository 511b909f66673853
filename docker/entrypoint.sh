#!/bin/sh
# The images' entrypoint: `batchd ARGS`, never in open mode. A `serve` with no key configured
# (BATCHD_API_KEYS, BATCHD_ADMIN_KEYS, or one stored by `batchd keys create`) first creates an
# admin key, once, into the data volume (mode 0600) and says how to read it. BATCHD_ALLOW_OPEN_MODE=true
# skips this (batchd then serves in open mode: see docs/security.md).
set -eu
if [ "${1:-}" = "serve" ] && [ -z "${BATCHD_API_KEYS:-}" ] && [ -z "${BATCHD_ADMIN_KEYS:-}" ] \
    && [ "${BATCHD_ALLOW_OPEN_MODE:-false}" != "true" ]; then
    key_file="${BATCHD_DATA_DIR:-/data}/admin-api-key"
    if [ ! -s "$key_file" ]; then
        # Only serve and `db upgrade` migrate; the key commands need the schema the serve below would make.
        batchd db upgrade >&2
        if [ -z "$(batchd keys list)" ]; then
            (umask 077 && batchd keys create --admin > "$key_file")
            echo "batchd: no API keys were configured, so an admin API key was created in $key_file;" \
                "read it with: docker compose exec batchd cat $key_file" >&2
        fi
    fi
fi
exec batchd "$@"
