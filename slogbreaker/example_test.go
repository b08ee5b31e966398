package slogbreaker_test

import (
	"errors"
	"log/slog"
	"os"
	"time"

	"github.com/casbreaker/casbreaker/core"
	"github.com/casbreaker/casbreaker/slogbreaker"
)

// Every transition as one structured log line. The manual clock has no
// wall time, so the lines carry none; on the default clock each line's
// time is the transition's.
func Example() {
	logger := slog.New(slog.NewTextHandler(os.Stdout, nil))
	clock := core.NewManualClock(0)
	b, err := core.New(core.Config{
		Name:                "payments",
		ConsecutiveFailures: 1,
		OpenDuration:        5 * time.Second,
		Clock:               clock,
		OnStateChange:       slogbreaker.Listener(logger, slogbreaker.Options{}),
	})
	if err != nil {
		panic(err)
	}
	p, _ := b.Allow()
	b.Done(p, errors.New("connection refused"))
	clock.Set(5 * time.Second)
	p, _ = b.Allow()
	b.Done(p, nil)
	// Output:
	// level=WARN msg="circuit breaker transition" breaker=payments from=closed to=open reason=consecutive-failures generation=1 open_for=5s
	// level=INFO msg="circuit breaker transition" breaker=payments from=open to=half-open reason=open-duration-elapsed generation=2
	// level=INFO msg="circuit breaker transition" breaker=payments from=half-open to=closed reason=probes-passed generation=3
}
