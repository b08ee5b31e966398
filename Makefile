# casbreaker: `make help` lists the targets. Tools run from pinned versions
# through `go run`, so nothing is installed globally.
STATICCHECK := honnef.co/go/tools/cmd/staticcheck@v0.8.2
GO          ?= go

.PHONY: help test lint unit test386 demo

help: ## list the targets
	@grep -E '^[a-z0-9-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-12s %s\n", $$1, $$2}'

test: lint unit test386 ## gofmt, vet, staticcheck, race tests, 32-bit tests

lint: ## gofmt check, go vet, staticcheck
	@out="$$(gofmt -l .)"; if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(GO) run $(STATICCHECK) ./...

unit: ## all tests under the race detector, at their -short sizes (make stress runs the full ones)
	$(GO) test -race -count=1 -short ./...

test386: ## all tests (-short) as GOARCH=386, where a misaligned 64-bit atomic panics; under qemu-user where the kernel cannot run 386
	GO=$(GO) bash scripts/test386.sh

demo: ## a real HTTP outage behind the breaker: fails fast, then recovers
	$(GO) run ./examples/outage

# Benchmarks (issue 4): both modules, raw output into bench/results/, then
# benchstat -col /impl (docs/benchmarks.md). BENCH_RUN narrows the set (a
# -bench regexp). The parallel table on a 16-core machine:
#   make bench BENCH_CPU=1,2,4,8,16 BENCH_COUNT=5 BENCH_RUN='Parallel|OpenReject|ProbeStorm|Churn|Snapshot'
BENCHSTAT   := golang.org/x/perf/cmd/benchstat@v0.0.0-20260908200009-22c9c6c9d4da
BENCH_COUNT ?= 10
BENCH_CPU   ?= 1,2,4
BENCH_TIME  ?= 30ms
BENCH_RUN   ?= .
BENCH_OUT   ?= bench/results/$(shell date -u +%Y-%m-%d-%H%M)-$(shell hostname -s).txt

.PHONY: bench bench-quick

bench: ## benchmarks of bench/ and bench/peers into bench/results/, then benchstat tables
	GO=$(GO) BENCHSTAT=$(BENCHSTAT) BENCH_COUNT=$(BENCH_COUNT) BENCH_CPU=$(BENCH_CPU) \
		BENCH_TIME=$(BENCH_TIME) BENCH_RUN='$(BENCH_RUN)' BENCH_OUT=$(BENCH_OUT) bash bench/run.sh

bench-quick: ## a short bench run (3 counts, -cpu 1,2) to check that everything works
	$(MAKE) bench BENCH_COUNT=3 BENCH_CPU=1,2 BENCH_TIME=20ms \
		BENCH_OUT=bench/results/$(shell date -u +%Y-%m-%d-%H%M)-$(shell hostname -s)-quick.txt

# Contention proofs and fuzzing (issue 3; docs/verification.md). stress runs
# race/ at full size; fuzz runs every fuzz target in turn for FUZZTIME each.
FUZZTIME     ?= 60s
STRESS_COUNT ?= 10
FUZZ_TARGETS := ./fuzz:FuzzDifferential ./fuzz:FuzzAtomicRing ./fuzz:FuzzBuckets ./fuzz:FuzzConfig \
	./core:FuzzStateWord

.PHONY: stress fuzz

stress: ## full-size core, window and race/ tests under the race detector; race/ STRESS_COUNT (10) times, halting on the first race
	GORACE=halt_on_error=1 $(GO) test -race -count=1 -timeout=0 ./core/ ./window/...
	GORACE=halt_on_error=1 $(GO) test -race -count=$(STRESS_COUNT) -timeout=0 -v ./race/

fuzz: ## every fuzz target in turn for FUZZTIME each (make fuzz FUZZTIME=10m)
	@set -e; for t in $(FUZZ_TARGETS); do \
		pkg=$${t%%:*}; name=$${t##*:}; \
		echo "== $$name in $$pkg for $(FUZZTIME)"; \
		$(GO) test -run='^$$' -fuzz="^$$name$$" -fuzztime=$(FUZZTIME) $$pkg; \
	done
