#!/usr/bin/env bash
# `make test`: the suite as two pytest sessions side by side, and `make lint` beside them. The
# first session runs the tests that run vLLM engines (the `vllm` marker, tests/conftest.py): one
# session, as its shared model servers and head starts need; the second runs the rest (apps in
# process, servers without models) on the CPU the first leaves idle while engines start and lines
# wait, at a lower priority so the engines' timing is the first session's (serially: on two xdist
# workers a CI run on 2 cores saw six timing tests fail under the added load, and no faster). The
# lint command (LINT, when set) runs while the sessions collect and start their servers: its
# minutes were the run's first, on a machine the sessions then left idle. The first session's
# output streams; the second's and the lint's, in logs, follow it, also when a signal ends the
# run. Each session keeps its own pytest cache. An empty session (exit 5: a selection with none of
# its tests) passes; any other failure, the lint's too, fails.
#   [LINT="make lint"] scripts/test-sessions.sh PYTHON [pytest options...]
set -uo pipefail
python=$1
shift
rest_log=$(mktemp)
lint_log=
lint_pid=
# The sessions' ids while they run (a reaped id may be another process's).
running=

show_rest() {
	echo
	echo "================ the second session: the tests without vLLM ================"
	cat "$rest_log"
	rm -f "$rest_log"
	if [ -n "$lint_pid" ]; then
		echo
		echo "================ the lint: $LINT ================"
		cat "$lint_log"
		rm -f "$lint_log"
	fi
}

# Stopped by a signal: each session stops as on Ctrl-C, tearing down and printing its summary (a
# terminal's Ctrl-C reaches them itself: a second SIGINT would cut that short; SIGTERM, as a CI
# timeout sends, is passed on to them as SIGINT); another signal stops them at once (each
# session's watchdog stops its servers however it ends). Then the second session's log, so far.
stop() {
	# shellcheck disable=SC2086 # an ended session's id is empty
	trap 'kill -TERM $running 2>/dev/null' INT TERM
	[ "$1" = INT ] || kill -INT $running 2>/dev/null
	# `wait` returns early when a trapped signal comes: wait again until both are gone.
	while ! wait; do :; done
	show_rest
	echo "make test: stopped by SIG$1"
	exit "$2"
}
trap 'stop INT 130' INT
trap 'stop TERM 143' TERM

if [ -n "${LINT:-}" ]; then
	lint_log=$(mktemp)
	(
		trap - INT
		# shellcheck disable=SC2086 # LINT is a command line
		exec $LINT
	) >"$lint_log" 2>&1 &
	lint_pid=$!
fi

# Asynchronous commands start with SIGINT ignored; `trap - INT` gives each session pytest's own
# handling back (Ctrl-C: it stops, tears down and prints its summary). `-u`: the log holds
# everything the second session wrote, however it ends.
(
	trap - INT
	exec "$python" -m pytest -m vllm -o cache_dir=.pytest_cache/vllm-session "$@"
) &
first_pid=$!
running=$first_pid
(
	trap - INT
	exec nice -n 10 "$python" -u -m pytest -m "not vllm" -o cache_dir=.pytest_cache/other-session \
		"$@" >"$rest_log" 2>&1
) &
rest_pid=$!
running="$first_pid $rest_pid $lint_pid"

wait "$first_pid"
first=$?
running="$rest_pid $lint_pid"
wait "$rest_pid"
second=$?
running=$lint_pid
lint=0
if [ -n "$lint_pid" ]; then
	wait "$lint_pid"
	lint=$?
fi
trap - INT TERM
show_rest
echo "make test: vLLM session exit $first, the other session exit $second, lint exit $lint"
# 5: pytest collected or selected no test for that session.
passed() { [ "$1" -eq 0 ] || [ "$1" -eq 5 ]; }
passed "$first" && passed "$second" && [ "$lint" -eq 0 ]
