# casbreaker: `make help` lists the targets. Tools run from pinned versions
# through `go run`, so nothing is installed globally.
STATICCHECK := honnef.co/go/tools/cmd/staticcheck@v0.8.2
GO          ?= go

.PHONY: help test lint unit test386 demo

help: ## list the targets
	@grep -E '^[a-z0-9-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-10s %s\n", $$1, $$2}'

test: lint unit test386 ## gofmt, vet, staticcheck, race tests, 32-bit tests

lint: ## gofmt check, go vet, staticcheck
	@out="$$(gofmt -l .)"; if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(GO) run $(STATICCHECK) ./...

unit: ## all tests under the race detector
	$(GO) test -race -count=1 ./...

test386: ## all tests as GOARCH=386, where a misaligned 64-bit atomic panics
	GOARCH=386 $(GO) test -count=1 -short ./...

demo: ## a real HTTP outage behind the breaker: fails fast, then recovers
	$(GO) run ./examples/outage
