package core_test

// Behavioural tests of Metrics (CollectMetrics): every expected value is
// worked out from the doc comments (the spec), and every test runs against
// both implementations. Time moves only on the manual clock.

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/casbreaker/casbreaker/core"
)

func ftMetricsCfg(collect bool) core.Config {
	return core.Config{WindowSize: 4, MinimumNumberOfCalls: 4, FailureRateThreshold: 50,
		SlowCallDurationThreshold: time.Second, OpenDuration: 5 * time.Second,
		MaxWaitInHalfOpen: 2 * time.Second, RampUpDuration: 10 * time.Second, MaxRetryAfter: time.Minute,
		Classifier: classify, CollectMetrics: collect}
}

// ftMetricsScript touches every counter and several transitions.
func ftMetricsScript(t *testing.T, r *rig) {
	old := r.A()
	p := r.A()
	r.At(2)
	r.D(p, core.Success) // slow: 2 s > 1 s
	r.X(core.Ignored)
	r.X(core.Success)
	r.X(core.Failure)
	r.X(core.Failure) // 2 of 4: trip
	r.Is(core.Open)
	r.Reject(core.ErrOpen)
	r.Reject(core.ErrOpen)
	r.D(old, core.Failure) // stale
	r.At(7)
	q1 := r.A()
	r.Reject(core.ErrHalfOpenFull)
	r.At(9)
	q2 := r.A()           // max wait: restart
	r.D(q1, core.Success) // stale
	r.D(q2, core.Success) // closes, ramp from 0 %
	r.Is(core.Closed)
	r.Reject(core.ErrRampingUp)
	r.Reject(core.ErrRampingUp)
	r.At(19) // the ramp is over
	r.X(core.Success)
	p = r.A()
	r.B.Done(p, core.WithRetryAfter(errFail, 30*time.Second))
	r.Is(core.Open)
	require.NoError(t, r.B.ForceOpen(0))
	r.Reject(core.ErrForcedOpen)
	r.Reject(core.ErrForcedOpen)
	r.Reject(core.ErrForcedOpen)
	r.B.Disable()
	r.X(core.Failure) // dropped
	r.X(core.Success) // dropped
	r.X(core.Ignored) // dropped
	r.B.MetricsOnly()
	r.X(core.Failure)
	r.X(core.Failure)
	r.X(core.Success)
	r.X(core.Success) // would have opened
	p = r.A()
	r.At(21)
	r.D(p, core.Success) // slow, in metrics-only
	r.B.Reset()
	r.B.RecordHint(old, 10*time.Second) // stale
	ftCBs(r, "C>O@2", "O>H@7", "H>H@9", "H>C@9", "C>O@19", "O>F@19", "F>D@19", "D>M@19", "M>M@19", "M>C@21")
}

func TestFeatureMetrics(t *testing.T) {
	want := core.Metrics{
		Admitted:             18,
		RejectedOpen:         2,
		RejectedHalfOpenFull: 1,
		RejectedForcedOpen:   3,
		RejectedRampUp:       2,
		Successes:            7,
		Failures:             5,
		Ignored:              1,
		SlowCalls:            2,
		Dropped:              6,
	}
	want.Transitions[core.Closed][core.Open] = 2
	want.Transitions[core.Open][core.HalfOpen] = 1
	want.Transitions[core.HalfOpen][core.HalfOpen] = 1
	want.Transitions[core.HalfOpen][core.Closed] = 1
	want.Transitions[core.Open][core.ForcedOpen] = 1
	want.Transitions[core.ForcedOpen][core.Disabled] = 1
	want.Transitions[core.Disabled][core.MetricsOnly] = 1
	want.Transitions[core.MetricsOnly][core.MetricsOnly] = 1
	want.Transitions[core.MetricsOnly][core.Closed] = 1

	// The scenario: one history, every counter exact.
	forEachImpl(t, func(t *testing.T, mk maker) {
		r := mk.build(t, ftMetricsCfg(true))
		require.Equal(t, core.Metrics{}, r.B.Metrics())
		ftMetricsScript(t, r)
		require.Equal(t, want, r.B.Metrics())
		// Reads change nothing; controls never reset the counters.
		require.Equal(t, want, r.B.Metrics())
		r.B.Reset()
		w := want
		w.Transitions[core.Closed][core.Closed]++
		require.Equal(t, w, r.B.Metrics())
	})

	t.Run("off by default", func(t *testing.T) {
		forEachImpl(t, func(t *testing.T, mk maker) {
			r := mk.build(t, ftMetricsCfg(false))
			ftMetricsScript(t, r)
			require.Equal(t, core.Metrics{}, r.B.Metrics())
		})
	})

	t.Run("probe outcomes", func(t *testing.T) {
		c := core.Config{ConsecutiveFailures: 1, OpenDuration: time.Second, PermittedCallsInHalfOpen: 2,
			Classifier: classify, CollectMetrics: true}
		forEachImpl(t, func(t *testing.T, mk maker) {
			r := mk.build(t, c)
			r.X(core.Failure)
			r.At(1)
			p1, p2 := r.A(), r.A()
			r.D(p1, core.Ignored) // the slot returns: Ignored
			r.D(p2, core.Failure) // re-open: Failures
			r.D(p1, core.Success) // stale: Dropped
			r.B.Done(p2, errFail) // Dropped
			m := r.B.Metrics()
			require.Equal(t, [5]uint64{3, 0, 2, 1, 2}, [5]uint64{m.Admitted, m.Successes, m.Failures, m.Ignored, m.Dropped})
			require.Equal(t, uint64(1), m.Transitions[core.HalfOpen][core.Open])

			// A probe outcome with no probe in flight in its own generation
			// (a second record for one permit) is dropped.
			r.At(2)
			q := r.A()
			r.D(q, core.Ignored)
			r.D(q, core.Ignored)
			m = r.B.Metrics()
			require.Equal(t, [3]uint64{4, 2, 3}, [3]uint64{m.Admitted, m.Ignored, m.Dropped})
			require.Equal(t, 0, r.B.Counts().ProbesInFlight)
			r.Is(core.HalfOpen)
		})
	})

	t.Run("no allocations", func(t *testing.T) {
		forEachImpl(t, func(t *testing.T, mk maker) {
			c := ftMetricsCfg(true)
			c.SlowCallDurationThreshold = 0
			c.OpenDuration = time.Second
			c.ConsecutiveFailures = 1 // for ftCloseAt
			hinted := core.WithRetryAfter(errFail, 10*time.Second)
			r := mk.build(t, c)
			allocs := func(what string, fn func()) {
				t.Helper()
				require.Zero(t, testing.AllocsPerRun(200, fn), what)
			}
			stale := r.A()
			allocs("Metrics", func() { _ = r.B.Metrics() })

			require.NoError(t, r.B.ForceOpen(0))
			allocs("forced open", func() {
				_, _ = r.B.Allow()
				r.B.Done(stale, errFail)
				r.B.Done(core.Permit{}, nil)
			})
			allocs("stale RecordHint", func() { r.B.RecordHint(stale, 10*time.Second) })
			allocs("stale Done with a hint", func() { r.B.Done(stale, hinted) })

			r.B.Disable()
			allocs("disabled", func() {
				p, _ := r.B.Allow()
				r.B.Done(p, errFail)
				p, _ = r.B.Allow()
				r.B.Done(p, nil)
				p, _ = r.B.Allow()
				r.B.Done(p, hinted)
				p, _ = r.B.Allow()
				r.B.Record(p, core.Ignored)
			})

			r.B.MetricsOnly()
			allocs("metrics-only", func() {
				p, _ := r.B.Allow()
				r.B.Done(p, nil)
				p, _ = r.B.Allow()
				r.B.Record(p, core.Ignored)
				_ = r.B.Counts()
			})

			r.B.Reset()
			ftCloseAt(r, 100*time.Second)
			ftSet(r, 105*time.Second)
			allocs("ramping", func() {
				r.Clock.Advance(time.Microsecond)
				if p, err := r.B.Allow(); err == nil {
					r.B.Done(p, nil)
				}
			})
			r.Is(core.Closed)
			allocs("Metrics again", func() { _ = r.B.Metrics() })
		})
	})
}

// Without a sliding window (a consecutive-failures rule alone), slow calls
// are still measured, and Metrics counts them with the outcome they came
// with: Record's success and failure paths there read the clock for the
// duration as the windowed ones do.
func TestMetricsCountSlowCallsWithoutWindow(t *testing.T) {
	forEachImpl(t, func(t *testing.T, mk maker) {
		clock := core.NewManualClock(0)
		b, err := mk.new(core.Config{ConsecutiveFailures: 3, SlowCallDurationThreshold: time.Second,
			CollectMetrics: true, Clock: clock})
		require.NoError(t, err)
		for _, tc := range []struct {
			o    core.Outcome
			took time.Duration
		}{{core.Success, 2 * time.Second}, {core.Failure, 2 * time.Second}, {core.Success, time.Second}, {core.Failure, 0}} {
			p, err := b.Allow()
			require.NoError(t, err)
			clock.Advance(tc.took)
			b.Record(p, tc.o)
		}
		m := b.Metrics()
		require.Equal(t, [3]uint64{2, 2, 2}, [3]uint64{m.Successes, m.Failures, m.SlowCalls},
			"successes, failures, slow calls (slow: strictly over the threshold)")
	})
}
