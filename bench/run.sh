#!/usr/bin/env bash
# bench/run.sh: what `make bench`, `make bench-quick` and `make bench-mix`
# run. It runs the benchmarks of the root module (bench/: lock-free, mutex
# and the floors) and, unless BENCH_PEERS=0, of the nested module
# bench/peers (the other Go breakers) with the same flags, writes their raw
# output, one file, to $BENCH_OUT, and prints the benchstat tables that
# BENCH_TABLES names: impl (the floors, then every benchmark by /impl) or
# mix (BenchmarkMix by /impl, over all -cpu and per -cpu, then the targets
# table of bench/plot -targets, read from the same file, floors included).
# Every setting comes from the environment (the Makefile sets them all);
# benchstat runs from the pinned version in $BENCHSTAT.
#
# It exits 1, after writing the file and printing every table, when a
# benchmark failed, or, with BENCH_TABLES=mix, when the targets table
# could not be read.
#
# The BENCH_COUNT samples are taken in rounds: each module's test binary is
# built once, then run BENCH_COUNT times with -test.count 1, so every
# benchmark gets one sample per round. `go test -count N` would take a
# benchmark's N samples back to back; on a VM whose speed drifts over
# minutes that puts all of one cell's samples, or all of one -cpu's, in
# one speed and biases the comparison between cells. In rounds, each cell
# is sampled across the whole run, and the two implementations of a cell
# still run next to each other in every round.
set -euo pipefail
cd "$(dirname "$0")/.."

GO=${GO:-go}
: "${BENCHSTAT:?set BENCHSTAT to a pinned golang.org/x/perf/cmd/benchstat@version}"
: "${BENCH_OUT:?set BENCH_OUT to the raw output file}"
BENCH_COUNT=${BENCH_COUNT:-10}
BENCH_CPU=${BENCH_CPU:-1,2,4}
BENCH_TIME=${BENCH_TIME:-30ms}
BENCH_RUN=${BENCH_RUN:-.}
BENCH_PEERS=${BENCH_PEERS:-1}
BENCH_TABLES=${BENCH_TABLES:-impl}
case $BENCH_TABLES in
impl | mix) ;;
*)
	echo "BENCH_TABLES=$BENCH_TABLES: want impl or mix" >&2
	exit 2
	;;
esac
modules="./bench/ then bench/peers"
if [ "$BENCH_PEERS" = 0 ]; then
	modules="./bench/ only"
fi

flags=(-test.run '^$' -test.bench "$BENCH_RUN" -test.benchtime "$BENCH_TIME" -test.count 1 -test.cpu "$BENCH_CPU" -test.timeout 60m)
mkdir -p "$(dirname "$BENCH_OUT")"
tmp=$BENCH_OUT.tmp
bin=$(mktemp -d)
trap 'rm -rf "$bin"' EXIT
"$GO" test -c -o "$bin/bench.test" ./bench/
if [ "$BENCH_PEERS" != 0 ]; then
	"$GO" -C bench/peers test -c -o "$bin/peers.test" .
fi
start=$(date +%s)

# Lines that start with '#' are not benchmark data: benchstat ignores them.
{
	echo "# casbreaker benchmarks, $(date -u '+%Y-%m-%d %H:%M:%S UTC') on $(hostname)"
	echo "# $BENCH_COUNT rounds of: <pkg>.test ${flags[*]} ($modules)"
	echo "# $($GO version)"
	echo "# cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'), $(nproc) cores visible, load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
} >"$tmp"

status=0
for round in $(seq "$BENCH_COUNT"); do
	echo "# round $round of $BENCH_COUNT, load average $(cut -d' ' -f1-3 /proc/loadavg)" >>"$tmp"
	(cd bench && "$bin/bench.test" "${flags[@]}") 2>&1 | tee -a "$tmp" || status=1
	if [ "$BENCH_PEERS" != 0 ]; then
		(cd bench/peers && "$bin/peers.test" "${flags[@]}") 2>&1 | tee -a "$tmp" || status=1
	fi
done
if grep -q -- '--- FAIL' "$tmp"; then
	status=1
	echo "benchmark failures:" >&2
	grep -A1 -- '--- FAIL' "$tmp" >&2 || true
fi
echo "# took $(($(date +%s) - start)) s; load average at end: $(cut -d' ' -f1-3 /proc/loadavg)" >>"$tmp"
mv "$tmp" "$BENCH_OUT"
# The file is compressed once every table has read it (a mix run is 0.7 MB
# of text, 0.1 MB gzipped); bench/plot reads the .gz, and benchstat reads
# it through zcat (docs/benchmarks.md, Raw results).
trap 'gzip -9nf "$BENCH_OUT"; echo "raw output, compressed: $BENCH_OUT.gz"' EXIT

echo
echo "raw output: $BENCH_OUT"
echo
echo "== floors (ns per operation; read every other table as a ratio to these) =="
"$GO" run "$BENCHSTAT" -filter '.name:/^Floor/' -row /op,/gomaxprocs -col .name "$BENCH_OUT"
echo
if [ "$BENCH_TABLES" = mix ]; then
	echo "== the mix matrix (columns: /impl, each compared with the first, lockfree; the geomean row is over every cell and -cpu) =="
	"$GO" run "$BENCHSTAT" -filter '.name:Mix' -ignore pkg -col /impl "$BENCH_OUT"
	echo
	echo "== the mix matrix per -cpu (one table, and one geomean, per -cpu) =="
	"$GO" run "$BENCHSTAT" -filter '.name:Mix' -ignore pkg -table /gomaxprocs -col /impl "$BENCH_OUT"
	echo
	echo "== the targets: lock-free against the mutex, its floor and the peers, time300 against time10, -cpu 2 against -cpu 1; as ratios of medians and as medians of per-round ratios (docs/benchmarks.md) =="
	"$GO" -C bench/plot run . -in "$(cd "$(dirname "$BENCH_OUT")" && pwd)/$(basename "$BENCH_OUT")" -targets || status=1
	exit $status
fi
echo "== implementations (columns: /impl, each compared with the first, lockfree) =="
"$GO" run "$BENCHSTAT" -filter '-.name:/^Floor/' -ignore pkg -col /impl "$BENCH_OUT"
exit $status
