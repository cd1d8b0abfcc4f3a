#!/usr/bin/env bash
# fuzz.sh TARGET PKG TIME: one short fuzz run of TARGET in PKG. Go's fuzzing
# engine can end a run with a bare "context deadline exceeded" when the time
# is up while it talks to a worker (no input failed, nothing is written to
# testdata/fuzz); that run is repeated once. A real failure (a failing input
# written) fails at once.
set -uo pipefail
target=$1 pkg=$2 time=$3
go=${GO:-go}
for attempt in 1 2; do
	out=$("$go" test -run '^$' -fuzz "^${target}\$" -fuzztime "$time" -fuzzminimizetime 5s "$pkg" 2>&1)
	rc=$?
	printf '%s\n' "$out"
	[ "$rc" -eq 0 ] && exit 0
	if grep -q 'Failing input written' <<<"$out" || ! grep -q 'context deadline exceeded' <<<"$out"; then
		exit "$rc"
	fi
	echo "fuzz.sh: $target ended with the fuzzing engine's 'context deadline exceeded' and no failing input; running it again (attempt $((attempt + 1)))"
done
exit "$rc"
