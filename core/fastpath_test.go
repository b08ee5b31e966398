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
// read per Record, as on the full path and in the baseline. A fast path
// that handed the drop to record would read the clock a second time.
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

// ftCountingClock counts its readings.
type ftCountingClock struct {
	c *core.ManualClock
	n atomic.Int64
}

func (c *ftCountingClock) Now() time.Duration { c.n.Add(1); return c.c.Now() }

// Closed-state calls that do not trip (successes, and failures below the
// threshold) read no clock, with metrics, the half-open max wait and
// retry-after hints configured, and once a ramp-up has ended.
func TestFeaturesNoClockOnClosedPath(t *testing.T) {
	base := core.Config{WindowSize: 10, FailureRateThreshold: 50, OpenDuration: time.Second,
		CollectMetrics: true, MaxWaitInHalfOpen: 2 * time.Second, MaxRetryAfter: 10 * time.Second}
	withRamp := base
	withRamp.RampUpDuration = 10 * time.Second
	for name, c := range map[string]core.Config{"metrics+maxwait+hints": base, "with ramp-up": withRamp} {
		t.Run(name, func(t *testing.T) {
			forEachImpl(t, func(t *testing.T, mk maker) {
				mc := core.NewManualClock(0)
				cc := &ftCountingClock{c: mc}
				c.Clock = cc
				r := mk.build(t, c)
				r.Clock = mc
				cc.n.Store(0)
				const n = 1000
				for range n {
					p, err := r.B.Allow()
					require.NoError(t, err)
					r.B.Done(p, nil)
				}
				require.Zero(t, cc.n.Load(), "closed Allow+Done(nil) read the clock")
				// Failures below the threshold (1 in 5) read none either.
				for i := range n {
					p, err := r.B.Allow()
					require.NoError(t, err)
					if i%5 == 0 {
						r.B.Done(p, errFail)
					} else {
						r.B.Done(p, nil)
					}
				}
				require.Zero(t, cc.n.Load(), "closed failures read the clock")
				require.Equal(t, core.Closed, r.B.Counts().State)
				require.Equal(t, uint64(2*n), r.B.Metrics().Admitted)

				if c.RampUpDuration == 0 {
					return
				}
				// After a ramp has ended, the path is clock-free again.
				for r.B.Counts().State == core.Closed {
					p, _ := r.B.Allow()
					r.B.Done(p, errFail)
				}
				mc.Set(time.Second)
				r.D(r.A(), core.Success)
				mc.Set(11 * time.Second)
				r.D(r.A(), core.Success) // the first call after the ramp may read it
				cc.n.Store(0)
				for range n {
					p, err := r.B.Allow()
					require.NoError(t, err)
					r.B.Done(p, nil)
				}
				require.Zero(t, cc.n.Load(), "closed after the ramp read the clock")
			})
		})
	}
}
