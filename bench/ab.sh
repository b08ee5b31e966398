#!/usr/bin/env bash
# bench/ab.sh: what `make bench-ab` runs. An interleaved A/B of the mix
# cells of two revisions of this module: it builds bench/'s test binary at
# AB_OLD and at AB_NEW (git revisions; NEW defaults to the working tree),
# then runs them in turn, one round of each per iteration, AB_ROUNDS times
# (so that a slow spell of the machine falls on both alike), and prints
# benchstat's comparison (old vs new, p-values) and writes both result
# files, compressed, to bench/results/<date>-<host>-ab-<AB_NAME>-{old,new}.txt.gz.
#
# Environment: GO, BENCHSTAT (a pinned `go run` path), AB_OLD (required),
# AB_NEW (default: the working tree), AB_ROUNDS (20), AB_CPU (1,2), AB_TIME
# (20ms), AB_RUN (the benchmark regex: the mix cells of both of our
# implementations), AB_NAME (ab), AB_LAYOUTS (0). make expands a $ in a
# variable it passes on, so through `make bench-ab` write each $ of AB_RUN
# as $$ (AB_RUN='^BenchmarkMix$$/^failures=0$$'), or run this script
# with the variables in its environment.
#
# AB_LAYOUTS=N builds each side N times, each with the linker's function
# order shuffled by a seed of its own (-ldflags=-randlayout=SEED, seeds 1..N),
# and runs round i on layout i mod N of both sides. Where a cell moves with
# where its functions land (a loop that straddles a fetch block in one
# build and not in the next), one build per side measures the placement as
# much as the change; over N layouts each side's median is of its code, not
# of one placement (docs/benchmarks.md, "Placement"). Keep AB_ROUNDS a
# multiple of N.
set -euo pipefail
: "${GO:=go}" "${BENCHSTAT:?set BENCHSTAT}" "${AB_OLD:?set AB_OLD to the revision to compare against}"
: "${AB_NEW:=}" "${AB_ROUNDS:=20}" "${AB_CPU:=1,2}" "${AB_TIME:=20ms}" "${AB_NAME:=ab}" "${AB_LAYOUTS:=0}"
: "${AB_RUN:=^BenchmarkMix$///^impl=(lockfree|mutex)$}"

root=$(git rev-parse --show-toplevel)
work=$(mktemp -d)
trap 'git -C "$root" worktree remove --force "$work/old" >/dev/null 2>&1 || true; git -C "$root" worktree remove --force "$work/new" >/dev/null 2>&1 || true; rm -rf "$work"' EXIT

build() { # build REV DIR: bench's test binary of revision REV (empty: the working tree) into DIR/bench.test, or DIR/bench-K.test for each layout K
	local rev=$1 dir=$2 src=$root k
	mkdir -p "$dir"
	if [ -n "$rev" ]; then
		git -C "$root" worktree add --detach -q "$work/$(basename "$dir")-src" "$rev"
		src=$work/$(basename "$dir")-src
	fi
	if [ "$AB_LAYOUTS" -gt 0 ]; then
		for k in $(seq "$AB_LAYOUTS"); do
			(cd "$src/bench" && "$GO" test -c -ldflags="-randlayout=$k" -o "$dir/bench-$k.test" .)
		done
	else
		(cd "$src/bench" && "$GO" test -c -o "$dir/bench.test" .)
	fi
	if [ -n "$rev" ]; then git -C "$root" worktree remove --force "$src"; fi
}
build "$AB_OLD" "$work/old"
build "$AB_NEW" "$work/new"

binary() { # binary SIDE ROUND: the test binary SIDE runs in round ROUND
	if [ "$AB_LAYOUTS" -gt 0 ]; then
		echo "$work/$1/bench-$(( ($2 - 1) % AB_LAYOUTS + 1 )).test"
	else
		echo "$work/$1/bench.test"
	fi
}

stamp=$(date -u +%Y-%m-%d-%H%M)-$(hostname -s)
out=$root/bench/results/$stamp-ab-$AB_NAME
for i in $(seq "$AB_ROUNDS"); do
	for side in old new; do
		(cd "$root/bench" && "$(binary "$side" "$i")" -test.run '^$' -test.bench "$AB_RUN" -test.benchmem \
			-test.cpu "$AB_CPU" -test.benchtime "$AB_TIME" -test.count 1) >>"$out-$side.txt"
	done
	echo "round $i of $AB_ROUNDS" >&2
done
"$GO" run "$BENCHSTAT" "$out-old.txt" "$out-new.txt"
gzip -f "$out-old.txt" "$out-new.txt"
