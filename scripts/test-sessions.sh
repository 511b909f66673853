#!/usr/bin/env bash
# `make test`: the suite as two pytest sessions side by side. The first runs the tests that run
# vLLM engines (the `vllm` marker, tests/conftest.py): one session, as its shared model servers
# and head starts need; the second runs the rest (apps in process, servers without models) on
# the CPU the first leaves idle while engines start and lines wait, at a lower priority so the
# engines' timing is the first session's. The first session's output streams; the second's
# follows it. Fails when either session fails.
#   scripts/test-sessions.sh PYTHON [pytest options...]
set -uo pipefail
python=$1
shift
rest_log=$(mktemp)
nice -n 10 "$python" -m pytest -m "not vllm" "$@" >"$rest_log" 2>&1 &
rest=$!
# Stopped by a signal: stop the second session too (each session's watchdog stops its servers).
trap 'kill -TERM "$rest" 2>/dev/null; wait "$rest"; rm -f "$rest_log"; exit 130' INT TERM
"$python" -m pytest -m vllm "$@"
first=$?
wait "$rest"
second=$?
echo
echo "================ the second session: the tests without vLLM ================"
cat "$rest_log"
rm -f "$rest_log"
echo "make test: vLLM session exit $first, the other session exit $second"
[ "$first" -eq 0 ] && [ "$second" -eq 0 ]
