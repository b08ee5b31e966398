package core_test

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

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

// readsClock is a manual clock that counts its readings.
type readsClock struct{ now, reads atomic.Int64 }

func (c *readsClock) Now() time.Duration {
	c.reads.Add(1)
	return time.Duration(c.now.Load())
}

// A time-window success that the buckets first drop, because the
// breaker's generation wrapped and the buckets' older generations read as
// newer, is taken over (RecordCurrent) with the same clock reading: one
// read per Record, as on the full path and in the baseline. Found by
// review: the fast path read the clock again by handing the drop to record.
func TestFastPaths_TimeWindowTakeoverReadsTheClockOnce(t *testing.T) {
	forEachImpl(t, func(t *testing.T, mk maker) {
		clk := &readsClock{}
		b, err := mk.new(core.Config{WindowType: core.TimeBased, WindowSize: 3, FailureRateThreshold: 50, MinimumNumberOfCalls: 4, Clock: clk})
		require.NoError(t, err)
		for range wordGens - 1 {
			b.Reset()
		}
		call := func(at time.Duration, o core.Outcome) {
			clk.now.Store(int64(at))
			p, err := b.Allow()
			require.NoError(t, err)
			before := clk.reads.Load()
			b.Record(p, o)
			if o == core.Success { // a failure that trips also reads it for the open deadline
				require.Equal(t, int64(1), clk.reads.Load()-before, "clock reads of one success's Record at %v", at)
			}
		}
		for s := range 3 {
			call(time.Duration(s)*time.Second, core.Success)
		}
		b.Reset() // the generation wraps to 0
		call(3*time.Second, core.Success)
		call(4*time.Second, core.Failure)
		call(4*time.Second, core.Success)
		require.Equal(t, core.Closed, b.State())
		call(4*time.Second, core.Failure) // 2 of 4, the success at 3 s counted: trips
		require.Equal(t, core.Open, b.State())
	})
}
