# casbreaker: `make help` lists the targets. Tools run from pinned versions
# through `go run`, so nothing is installed globally.
STATICCHECK := honnef.co/go/tools/cmd/staticcheck@v0.8.2
GO          ?= go
# BEAT runs a long step with a line every 10 s while it lasts (scripts/heartbeat.sh).
BEAT        := bash $(CURDIR)/scripts/heartbeat.sh

.PHONY: help test lint unit exercises test386 nested prometheus redis demo demo-fleet demo-stack

help: ## list the targets
	@grep -E '^[a-z0-9-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-12s %s\n", $$1, $$2}'

test: lint unit exercises test386 nested ## gofmt, vet, staticcheck, race tests, the exercises' solutions, 32-bit tests, then the nested modules

lint: ## gofmt check, go vet, staticcheck
	@out="$$(gofmt -l .)"; if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(BEAT) vet $(GO) vet ./...
	$(BEAT) staticcheck $(GO) run $(STATICCHECK) ./...

unit: ## all tests under the race detector, at their -short sizes (make stress runs the full ones)
	$(BEAT) unit $(GO) test -race -count=1 -short ./...

# docs/learn.md's exercises (race/exercises_test.go) fail until the learner
# fixes them, so they sit behind the exercises build tag, out of unit's way:
# here the broken variants are vetted with their tests, and the solutions
# (tag solutions) are vetted, staticchecked and run.
exercises: ## vet the learn.md exercises as given; vet, staticcheck and test their solutions
	$(BEAT) "exercises: vet" $(GO) vet -tags exercises ./race/
	$(BEAT) "solutions: vet" $(GO) vet -tags exercises,solutions ./race/
	$(BEAT) "solutions: staticcheck" $(GO) run $(STATICCHECK) -tags exercises,solutions ./race/
	$(BEAT) "solutions: test" $(GO) test -race -count=1 -tags exercises,solutions -run '^TestExercise' ./race/

test386: ## all tests (-short) as GOARCH=386, where a misaligned 64-bit atomic panics; under qemu-user where the kernel cannot run 386
	GO=$(GO) $(BEAT) test386 bash scripts/test386.sh

# The nested modules, each with its own go.mod, which ./... from the root
# does not enter: built, vetted and tested here so that CI (.ci/run: make
# test) compiles them. -short runs their tests only, never a benchmark;
# -race for the integrations and the demo, whose tests are about
# concurrency (bench/plot's figures take too long under it; ops/ tests
# files and a real Prometheus). ops/ needs prometheus and promtool, which
# the prometheus target installs where they are missing; fleet/ needs
# redis-server, which the redis target installs where it is missing.
NESTED_RACE := prombreaker otelbreaker grpcbreaker examples/outage fleet
NESTED := bench/peers bench/plot prombreaker otelbreaker grpcbreaker examples/outage ops fleet

nested: prometheus redis ## go vet, staticcheck and the -short tests of each nested module (bench/peers, bench/plot, prombreaker, otelbreaker, grpcbreaker, examples/outage, ops, fleet)
	@set -e; for m in $(NESTED); do \
		echo "== $$m"; \
		$(BEAT) "$$m: vet" $(GO) -C $$m vet ./...; \
		(cd $$m && $(BEAT) "$$m: staticcheck" $(GO) run $(STATICCHECK) ./...); \
		race=; case " $(NESTED_RACE) " in *" $$m "*) race=-race;; esac; \
		$(BEAT) "$$m: test" $(GO) -C $$m test $$race -count=1 -short ./...; \
	done

prometheus: ## prometheus and promtool, for ops/'s tests: installed from Debian's prometheus package where missing, or a message saying what to install
	bash scripts/prometheus.sh

redis: ## redis-server, for fleet/'s tests: installed from Debian's redis-server package where missing, or a message saying what to install
	bash scripts/redis.sh

# ops-figure runs ops/'s end-to-end test (the outage demo under a real
# Prometheus) and draws what Prometheus recorded: docs/figures/outage-prometheus.json
# and .png, shown in docs/observability.md.
.PHONY: ops-figure
ops-figure: prometheus ## the outage demo under a real Prometheus (ops/'s end-to-end test), recorded into docs/figures/outage-prometheus.json and drawn as outage-prometheus.png
	$(GO) -C ops test -count=1 -run '^TestEndToEnd$$' . -args -record $(abspath $(FIGURES))/outage-prometheus.json
	$(GO) -C bench/plot run . -outage $(abspath $(FIGURES))/outage-prometheus.json -out $(abspath $(FIGURES))

demo: ## a real HTTP outage behind the breaker: fails fast, then recovers; serves /metrics meanwhile and prints a scrape at the end
	$(GO) -C examples/outage run .

demo-fleet: redis ## eight replica processes through an outage, with plain breakers and then as a fleet on Redis (killed and restarted mid-outage): time to open and probes per open period
	$(GO) -C fleet run ./demo

demo-stack: ## a brownout and an outage behind Retry(Breaker(Bulkhead(TimeLimiter(call)))) on a simulated clock
	$(GO) run ./examples/stack

# Benchmarks: both modules, raw output into bench/results/, then
# benchstat -col /impl (docs/benchmarks.md). BENCH_RUN narrows the set (a
# -bench regexp). The parallel table on a 16-core machine:
#   make bench BENCH_CPU=1,2,4,8,16 BENCH_COUNT=5 BENCH_RUN='Parallel|OpenReject|ProbeStorm|Churn|Snapshot'
BENCHSTAT   := golang.org/x/perf/cmd/benchstat@v0.0.0-20260908200009-22c9c6c9d4da
BENCH_COUNT ?= 10
BENCH_CPU   ?= 1,2,4
BENCH_TIME  ?= 30ms
BENCH_RUN   ?= .
BENCH_OUT   ?= bench/results/$(shell date -u +%Y-%m-%d-%H%M)-$(shell hostname -s).txt

.PHONY: bench bench-quick bench-mix bench-ab bench-plot

bench: ## benchmarks of bench/ and bench/peers into bench/results/, then benchstat tables
	GO=$(GO) BENCHSTAT=$(BENCHSTAT) BENCH_COUNT=$(BENCH_COUNT) BENCH_CPU=$(BENCH_CPU) \
		BENCH_TIME=$(BENCH_TIME) BENCH_RUN='$(BENCH_RUN)' BENCH_OUT=$(BENCH_OUT) bash bench/run.sh

bench-quick: ## a short bench run (3 counts, -cpu 1,2) to check that everything works
	$(MAKE) bench BENCH_COUNT=3 BENCH_CPU=1,2 BENCH_TIME=20ms \
		BENCH_OUT=bench/results/$(shell date -u +%Y-%m-%d-%H%M)-$(shell hostname -s)-quick.txt

# The mix matrix (docs/benchmarks.md, "What is measured"): BenchmarkMix and the floors
# into bench/results/<date>-<HHMM>-<host>-mix.txt, then benchstat -col /impl,
# whose geomean row sums the matrix up, over all -cpu and per -cpu, then
# the targets table (bench/plot -targets; the floors must be in the same
# file, so BENCH_RUN keeps them), which counts the targets missed (a
# result, not a failure: the figures depend on the machine). Its own
# defaults are -cpu 1,2, -benchtime 20ms and 30 rounds: short samples, so
# that the cells a target compares (lock-free and mutex, -cpu 1 and 2,
# time10 and time300) run within a fraction of a second of each other in
# every round, and many rounds, so that their medians see this VM's speed
# modes alike (docs/benchmarks.md, "Rounds, not -count"). A BENCH_COUNT,
# BENCH_CPU, BENCH_TIME or BENCH_OUT given on the command line or in the
# environment still wins. MIX_PEERS=1 runs the peers' cells too.
MIX_PEERS ?= 0
MIX_CPU   := 1,2
MIX_TIME  := 20ms
MIX_COUNT := 30
MIX_OUT    = bench/results/$(shell date -u +%Y-%m-%d-%H%M)-$(shell hostname -s)-mix.txt
# $(call given,VAR,DEFAULT): VAR's value if the command line or the
# environment set it, otherwise the value of the variable DEFAULT (a name,
# so that a value with commas, like 1,2, passes through $(call)).
given = $(if $(filter command line environment,$(origin $1)),$($1),$($2))

bench-mix: ## BenchmarkMix (failures x window, -cpu 1,2) and the floors into bench/results/*-mix.txt, then benchstat -col /impl and its geomean, then the targets table; MIX_PEERS=1 adds the peers
	GO=$(GO) BENCHSTAT=$(BENCHSTAT) BENCH_COUNT=$(call given,BENCH_COUNT,MIX_COUNT) BENCH_CPU=$(call given,BENCH_CPU,MIX_CPU) \
		BENCH_TIME=$(call given,BENCH_TIME,MIX_TIME) BENCH_RUN='^Benchmark(Mix|Floor|FloorParallel)$$' \
		BENCH_OUT=$(call given,BENCH_OUT,MIX_OUT) BENCH_PEERS=$(MIX_PEERS) BENCH_TABLES=mix bash bench/run.sh

bench-ab: ## interleaved A/B of the mix cells of AB_OLD (a git revision) against AB_NEW (default: the working tree), AB_ROUNDS (20) rounds, then benchstat; AB_LAYOUTS=N spreads each side over N shuffled function layouts; files in bench/results/*-ab-AB_NAME-{old,new}.txt.gz
	GO=$(GO) BENCHSTAT=$(BENCHSTAT) bash bench/ab.sh

# bench-plot reads MIX_FILE, by default the newest *-mix.txt[.gz] by name (names
# start with the UTC date and time; a fresh clone's file times say nothing),
# and writes FIGURES/mix-by-failures.png and FIGURES/mix-by-cpu.png, the
# latter at the failure rate PLOT_FAILURES.
MIX_FILE      ?= $(lastword $(sort $(wildcard bench/results/*-mix.txt bench/results/*-mix.txt.gz)))
FIGURES       ?= docs/figures
PLOT_FAILURES ?= 1in100

bench-plot: ## PNG figures of a bench-mix result (MIX_FILE, default the newest bench/results/*-mix.txt) into docs/figures/
	@test -n "$(MIX_FILE)" || { echo "no bench/results/*-mix.txt: run make bench-mix first, or set MIX_FILE"; exit 1; }
	$(GO) -C bench/plot run . -in $(abspath $(MIX_FILE)) -out $(abspath $(FIGURES)) -failures $(PLOT_FAILURES)

# Contention proofs and fuzzing (docs/verification.md). stress runs
# race/ at full size; fuzz runs every fuzz target in turn for FUZZTIME each.
FUZZTIME     ?= 60s
STRESS_COUNT ?= 10
FUZZ_TARGETS := ./fuzz:FuzzDifferential ./fuzz:FuzzAtomicRing ./fuzz:FuzzBuckets ./fuzz:FuzzConfig \
	./core:FuzzStateWord ./core:FuzzSnapshot ./resilience:FuzzBackoff ./resilience:FuzzBudget \
	./httpbreaker:FuzzParseRetryAfter ./httpbreaker:FuzzHostKey

# stress-lin runs only the linearizability families whose clock steps
# concurrently, LIN_COUNT (84) times: 84 x 5 families x 400 histories is
# 168,000 stepping histories per implementation.
LIN_COUNT    ?= 84

.PHONY: stress stress-lin fuzz

stress: ## full-size core, window and race/ tests under the race detector; race/ STRESS_COUNT (10) times, halting on the first race
	GORACE=halt_on_error=1 $(GO) test -race -count=1 -timeout=0 ./core/ ./window/... ./internal/window/...
	GORACE=halt_on_error=1 $(GO) test -race -count=$(STRESS_COUNT) -timeout=0 -v ./race/

stress-lin: ## the stepping linearizability families at full size, LIN_COUNT (84) times, under the race detector
	GORACE=halt_on_error=1 $(GO) test -race -count=$(LIN_COUNT) -timeout=0 -v -run 'TestLinearizable$$/(count-window|consecutive)/' ./race/

fuzz: ## every fuzz target in turn for FUZZTIME each (make fuzz FUZZTIME=10m)
	@set -e; for t in $(FUZZ_TARGETS); do \
		pkg=$${t%%:*}; name=$${t##*:}; \
		echo "== $$name in $$pkg for $(FUZZTIME)"; \
		$(GO) test -run='^$$' -fuzz="^$$name$$" -fuzztime=$(FUZZTIME) $$pkg; \
	done
