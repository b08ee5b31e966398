package core_test

import (
	"testing"
	"time"

	"github.com/casbreaker/casbreaker/core"
)

// The closed-state fast paths of Allow and Record (a breaker with no slow
// calls and no metrics; with no window, or with only a count window) must
// act exactly as the full paths do. Each case runs on configurations that
// take the fast path and on ones that cannot (metrics, a consecutive rule
// beside the window, a time window), and on both implementations. The
// outcome that trips must have committed the trip when its Record returns:
// the very next Allow is rejected, with no State or Counts call between
// that could commit it lazily.
func TestFastPaths_SuccessThatTripsCommitsBeforeReturning(t *testing.T) {
	configs := map[string]core.Config{
		"count window only (fast path)":  {WindowSize: 10, FailureRateThreshold: 50},
		"count window, metrics":          {WindowSize: 10, FailureRateThreshold: 50, CollectMetrics: true},
		"count window, consecutive rule": {WindowSize: 10, FailureRateThreshold: 50, ConsecutiveFailures: 20},
		"time window (fast path)":        {WindowType: core.TimeBased, WindowSize: 10, FailureRateThreshold: 50, MinimumNumberOfCalls: 10},
		"time window, metrics":           {WindowType: core.TimeBased, WindowSize: 10, FailureRateThreshold: 50, MinimumNumberOfCalls: 10, CollectMetrics: true},
	}
	for name, c := range configs {
		t.Run(name, func(t *testing.T) {
			forEachImpl(t, func(t *testing.T, mk maker) {
				r := mk.build(t, c)
				r.XN(5, F)
				r.XN(4, S) // 9 calls: below the minimum of 10
				p := r.A()
				r.D(p, S) // the 10th call, a success, brings the window to 5/10 = 50%
				r.Reject(core.ErrOpen)
				r.Is(core.Open)
			})
		})
	}
}

// A success that ends a run of failures must reset the run, fast path or
// not: two failures, a success, two failures do not trip a rule of three in
// a row; the third failure after the success does.
func TestFastPaths_SuccessEndsTheRunOfFailures(t *testing.T) {
	configs := map[string]core.Config{
		"consecutive only (fast path)": {ConsecutiveFailures: 3},
		"consecutive, metrics":         {ConsecutiveFailures: 3, CollectMetrics: true},
		"consecutive, slow calls":      {ConsecutiveFailures: 3, SlowCallDurationThreshold: time.Hour, SlowCallRateThreshold: 100},
	}
	for name, c := range configs {
		t.Run(name, func(t *testing.T) {
			forEachImpl(t, func(t *testing.T, mk maker) {
				r := mk.build(t, c)
				r.XN(2, F)
				r.X(S)
				r.XN(2, F)
				r.Is(core.Closed)
				r.X(F)
				r.Reject(core.ErrOpen)
			})
		})
	}
}
