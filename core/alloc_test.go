package core_test

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/casbreaker/casbreaker/core"
)

// The hot path allocates nothing, in every state, for both implementations:
// Allow, Done with nil and with an error, Record, the rejections, State and
// Counts.
func TestNoAllocationsInAnyState(t *testing.T) {
	errDown := errors.New("down")
	configs := map[string]core.Config{
		"count":       {WindowSize: 100, FailureRateThreshold: 60},
		"time":        {WindowType: core.TimeBased, WindowSize: 10, FailureRateThreshold: 60},
		"consecutive": {ConsecutiveFailures: 5},
		"slow":        {WindowSize: 100, FailureRateThreshold: 60, SlowCallRateThreshold: 50, SlowCallDurationThreshold: time.Second},
	}
	for name, cfg := range configs {
		t.Run(name, func(t *testing.T) {
			forEachImpl(t, func(t *testing.T, mk maker) {
				cfg.OpenDuration = time.Second
				cfg.PermittedCallsInHalfOpen = 2
				cfg.MinimumNumberOfCalls = 0
				r := mk.build(t, cfg)
				allocs := func(what string, fn func()) {
					t.Helper()
					require.Zero(t, testing.AllocsPerRun(200, fn), what)
				}
				allocs("closed success", func() { p, _ := r.B.Allow(); r.B.Done(p, nil) })
				allocs("closed ignored", func() { p, _ := r.B.Allow(); r.B.Record(p, core.Ignored) })
				allocs("closed state/counts", func() { _, _ = r.B.State(), r.B.Counts() })
				// Failures alternate with successes so the breaker stays closed.
				allocs("closed failure", func() {
					p, _ := r.B.Allow()
					r.B.Done(p, errDown)
					p, _ = r.B.Allow()
					r.B.Done(p, nil)
				})
				r.Is(core.Closed)

				for r.B.State() == core.Closed {
					p, _ := r.B.Allow()
					r.B.Done(p, errDown)
				}
				allocs("open reject", func() { _, _ = r.B.Allow() })
				allocs("open state/counts", func() { _, _ = r.B.State(), r.B.Counts() })

				r.Clock.Advance(time.Second)
				p := r.A() // open -> half-open
				allocs("half-open probe released", func() { q, _ := r.B.Allow(); r.B.Record(q, core.Ignored) })
				q := r.A()
				allocs("half-open full", func() { _, _ = r.B.Allow() })
				allocs("half-open stale", func() { r.B.Done(core.Permit{}, errDown) })
				r.D(p, core.Success)
				r.D(q, core.Success)
				r.Is(core.Closed)
			})
		})
	}
}
