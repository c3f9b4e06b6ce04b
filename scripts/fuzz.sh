#!/usr/bin/env bash
# Runs every fuzz target of the module (each func FuzzX of a _test.go
# file; the adapters are modules of their own and have none), one at a
# time, for a budget each:
#
#   scripts/fuzz.sh [-list]
#
#   FUZZTIME          how long each target fuzzes (go test -fuzztime), 14s
#   FUZZMINIMIZETIME  the most each input found is minimized for
#                     (-fuzzminimizetime), 200x: 200 runs of the target
#   FUZZPARALLEL      workers per target (-parallel), 2
#   FUZZ              only the targets whose "PKG TARGET" matches this
#                     extended regular expression (all by default)
#
# Why a bound on minimizing: go test -fuzz minimizes every input that
# reaches new code before it fuzzes on, by default for up to 60 s each,
# and minimizing costs runs of the target quadratic in the input's size
# (it tries cutting every span of it): a shard of a few KB never finishes,
# so a run of the default would spend its whole budget minimizing its
# first finds (FuzzTar made 11-17 executions in 60 s). Inputs that reach
# new code only go to the fuzz cache; a failing one is written whole
# whatever the bound.
#
# A failure prints the failing input's path (PKG/testdata/fuzz/FuzzX/ID):
# once fixed, commit it, so that it runs as an ordinary test forever
# after. The script goes on with the other targets and fails at the end.
# At the end it prints each target's executions and the total time.
set -uo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/go/bin"
GO=${GO:-go}
FUZZTIME=${FUZZTIME:-14s}
FUZZMINIMIZETIME=${FUZZMINIMIZETIME:-200x}
FUZZPARALLEL=${FUZZPARALLEL:-2}
FUZZ=${FUZZ:-.}

# targets prints "PKG TARGET" for each fuzz target, in order.
targets() {
	grep -rl --include='*_test.go' --exclude-dir=.git --exclude-dir=adapters '^func Fuzz' . | sort |
		while read -r file; do
			sed -n 's/^func \(Fuzz[A-Za-z0-9_]*\)(.*/\1/p' "$file" |
				while read -r target; do echo "./$(dirname "${file#./}") $target"; done
		done | grep -E -- "$FUZZ"
}

if [ "${1:-}" = -list ]; then
	targets
	exit 0
fi

start=$(date +%s)
summary=() failed=()
log=$(mktemp)
trap 'rm -f "$log"' EXIT
while read -r pkg target; do
	echo "== $pkg $target: -fuzztime $FUZZTIME -fuzzminimizetime $FUZZMINIMIZETIME -parallel $FUZZPARALLEL"
	t0=$(date +%s)
	"$GO" test -run '^$' -fuzz "^$target\$" -fuzztime "$FUZZTIME" -fuzzminimizetime "$FUZZMINIMIZETIME" \
		-parallel "$FUZZPARALLEL" "$pkg" 2>&1 | tee "$log"
	rc=${PIPESTATUS[0]}
	execs=$(grep -o 'execs: [0-9]*' "$log" | tail -1 | cut -d' ' -f2)
	summary+=("$(printf '%-12s %-24s %10s execs %4ss' "$pkg" "$target" "${execs:-?}" $(($(date +%s) - t0)))")
	if [ "$rc" -ne 0 ]; then
		inputs=$(sed -n 's/.*Failing input written to \(testdata\/fuzz\/[^ ]*\).*/\1/p' "$log")
		for in in $inputs; do
			failed+=("$pkg $target: failing input ${pkg#./}/$in")
		done
		[ -z "$inputs" ] && failed+=("$pkg $target: failed (exit $rc), no input written: see its output above")
	fi
done < <(targets)

echo "== fuzz: $(($(date +%s) - start))s in all"
printf '%s\n' "${summary[@]}"
if [ ${#failed[@]} -gt 0 ]; then
	echo "== fuzz FAILED: commit each input below once its bug is fixed (it then runs in go test):"
	printf '%s\n' "${failed[@]}"
	exit 1
fi
