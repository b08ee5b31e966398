#!/usr/bin/env bash
# bench/instructions.sh: instructions per operation of benchmarks of bench/,
# counted by valgrind's callgrind, which counts instructions exactly: the
# same binary and arguments give the same count whatever else the machine
# is doing, where nanoseconds on a shared VM move by 10% between minutes.
# A time window's cell varies by a few instructions between runs all the
# same: its once-a-second work (a new bucket, a full judgement) depends on
# how many seconds of the system clock a run spans under valgrind.
# Each benchmark runs twice, at -benchtime N1x and N2x, and the count per
# operation is the difference of the two totals over N2 - N1, so the
# binary's start-up and the benchmark's set-up cancel out.
#
#   bash bench/instructions.sh [Name/sub=x/... ...]
#
# Each argument names one benchmark of bench/, without its Benchmark
# prefix; every level is matched whole (failures=1in10 does not run
# failures=1in100). Without arguments it counts the cells docs/benchmarks.md reports. Each
# runs at -cpu 1. valgrind must be installed (Debian: apt-get install
# valgrind); the script says so and exits 1 when it is not. It is a
# developer's tool, not part of make test.
set -euo pipefail
cd "$(dirname "$0")/.."

command -v valgrind >/dev/null || {
	echo "bench/instructions.sh: valgrind not found; install it (Debian: apt-get install valgrind)" >&2
	exit 1
}
GO=${GO:-go}
N1=${N1:-200000}
N2=${N2:-400000}

cells=("$@")
if [ ${#cells[@]} -eq 0 ]; then
	cells=(
		FloorParallel/op=clockadd
		FloorParallel/op=twoloads
		Mix/failures=0/window=count100/impl=lockfree
		Mix/failures=0/window=time10/impl=lockfree
		Mix/failures=1in10/window=count100/impl=lockfree
		Mix/failures=1in10/window=time10/impl=lockfree
		Mix/failures=0/window=count100/impl=mutex
		Mix/failures=0/window=time10/impl=mutex
	)
fi

dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
$GO test -c -o "$dir/bench.test" ./bench/

# total N prints the instructions callgrind counted for one run of the
# benchmark $cell at -benchtime Nx, each level of its name anchored. Async
# preemption is off: callgrind cannot follow the runtime's preemption
# signals.
total() {
	local re
	re=$(echo "Benchmark$cell" | sed 's|[^/]*|^&$|g')
	GODEBUG=asyncpreemptoff=1 valgrind --tool=callgrind --callgrind-out-file="$dir/out" \
		"$dir/bench.test" -test.run '^$' -test.bench "$re" -test.cpu 1 \
		-test.benchtime "$1x" -test.count 1 2>&1 | sed -n 's/.*Collected : \([0-9]*\).*/\1/p'
}

printf '%-55s %s\n' benchmark instructions/op
for cell in "${cells[@]}"; do
	a=$(total "$N1")
	b=$(total "$N2")
	printf '%-55s %d\n' "$cell" $(((b - a) / (N2 - N1)))
done
