package core_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/casbreaker/casbreaker/core"
)

// reasons returns the Reason of every notification so far.
func (r *rig) reasons() []core.Reason {
	var out []core.Reason
	for _, tr := range r.Transitions() {
		out = append(out, tr.Reason)
	}
	return out
}

// Every transition says why, the same on both implementations: the rule
// that tripped, the probes' verdict, the elapsed open duration, the max
// wait, a hint or a manual control.
func TestTransitionReasons(t *testing.T) {
	slow := 2 * time.Second
	for _, tc := range []struct {
		name string
		cfg  core.Config
		run  func(r *rig)
		want []core.Reason
	}{
		{"failure rate", core.Config{WindowSize: 4, FailureRateThreshold: 50, FailureCountThreshold: 3},
			func(r *rig) { r.X(core.Success); r.X(core.Success); r.X(core.Failure); r.X(core.Failure) },
			[]core.Reason{core.ReasonFailureRate}},
		{"failure count before the minimum calls", core.Config{WindowSize: 10, FailureCountThreshold: 2},
			func(r *rig) { r.X(core.Failure); r.X(core.Failure) },
			[]core.Reason{core.ReasonFailureCount}},
		{"slow-call rate", core.Config{WindowSize: 2, FailureRateThreshold: 100, SlowCallRateThreshold: 100, SlowCallDurationThreshold: time.Second},
			func(r *rig) {
				for range 2 {
					p := r.A()
					r.Clock.Advance(slow)
					r.D(p, core.Success)
				}
			},
			[]core.Reason{core.ReasonSlowCallRate}},
		{"failure rate before slow-call rate when both hold", core.Config{WindowSize: 2, FailureRateThreshold: 100, SlowCallRateThreshold: 100, SlowCallDurationThreshold: time.Second},
			func(r *rig) {
				for range 2 {
					p := r.A()
					r.Clock.Advance(slow)
					r.D(p, core.Failure)
				}
			},
			[]core.Reason{core.ReasonFailureRate}},
		{"consecutive failures, time window", core.Config{WindowType: core.TimeBased, WindowSize: 10, FailureRateThreshold: 90, ConsecutiveFailures: 2},
			func(r *rig) {
				r.XN(8, core.Success)
				r.X(core.Failure)
				r.X(core.Failure)
			},
			[]core.Reason{core.ReasonConsecutiveFailures}},
		{"probe failed, then probes passed", core.Config{ConsecutiveFailures: 1, OpenDuration: time.Second},
			func(r *rig) {
				r.X(core.Failure)
				r.At(1)
				r.D(r.A(), core.Failure)
				r.At(2)
				r.D(r.A(), core.Success)
			},
			[]core.Reason{core.ReasonConsecutiveFailures, core.ReasonOpenDurationElapsed, core.ReasonProbeFailed,
				core.ReasonOpenDurationElapsed, core.ReasonProbesPassed}},
		{"max wait", core.Config{ConsecutiveFailures: 1, OpenDuration: time.Second, MaxWaitInHalfOpen: time.Second},
			func(r *rig) {
				r.X(core.Failure)
				r.At(1)
				r.A() // lost
				r.At(2.1)
				r.A()
			},
			[]core.Reason{core.ReasonConsecutiveFailures, core.ReasonOpenDurationElapsed, core.ReasonMaxWaitInHalfOpen}},
		{"retry-after hint, closed and half-open", core.Config{ConsecutiveFailures: 5, OpenDuration: time.Second, MaxRetryAfter: time.Minute},
			func(r *rig) {
				r.B.Done(r.A(), core.WithRetryAfter(errFail, time.Second))
				r.At(1)
				r.B.Done(r.A(), core.WithRetryAfter(errFail, time.Second))
			},
			[]core.Reason{core.ReasonRetryAfter, core.ReasonOpenDurationElapsed, core.ReasonRetryAfter}},
		{"metrics-only's would-have-opened", core.Config{ConsecutiveFailures: 1},
			func(r *rig) { r.B.MetricsOnly(); r.X(core.Failure) },
			[]core.Reason{core.ReasonManual, core.ReasonConsecutiveFailures}},
		{"manual controls", core.Config{ConsecutiveFailures: 1},
			func(r *rig) {
				require.NoError(r.t, r.B.ForceOpen(0))
				require.NoError(r.t, r.B.ForceOpen(time.Second))
				r.B.Disable()
				r.B.Reset()
			},
			[]core.Reason{core.ReasonManual, core.ReasonManual, core.ReasonManual, core.ReasonManual}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			forEachImpl(t, func(t *testing.T, mk maker) {
				r := mk.build(t, tc.cfg)
				tc.run(r)
				require.Equal(t, tc.want, r.reasons())
			})
		})
	}
}

// A transition's Time is the wall-clock time of its At on a SystemClock,
// and zero on a ManualClock, which has no wall time.
func TestTransitionTime(t *testing.T) {
	forEachImpl(t, func(t *testing.T, mk maker) {
		clock := core.NewSystemClock()
		var got []core.Transition
		b, err := mk.new(core.Config{ConsecutiveFailures: 1, Clock: clock, OnStateChange: func(tr core.Transition) { got = append(got, tr) }})
		require.NoError(t, err)
		before := clock.Wall(clock.Now())
		p, err := b.Allow()
		require.NoError(t, err)
		b.Done(p, errFail)
		require.Len(t, got, 1)
		require.Equal(t, clock.Wall(got[0].At), got[0].Time)
		require.False(t, got[0].Time.Before(before))

		r := mk.build(t, core.Config{ConsecutiveFailures: 1})
		r.X(core.Failure)
		require.True(t, r.Transitions()[0].Time.IsZero())
	})
}

func TestReasonString(t *testing.T) {
	require.Equal(t, "failure-rate", core.ReasonFailureRate.String())
	require.Equal(t, "manual", core.ReasonManual.String())
	require.Equal(t, "reason(0)", core.Reason(0).String())
}

// A transition into Open says until when: the deadline the breaker keeps,
// in whole milliseconds, for a trip, a hint, a backed-off re-open and
// ForceOpen; every other transition says zero.
func TestTransitionOpenUntil(t *testing.T) {
	forEachImpl(t, func(t *testing.T, mk maker) {
		r := mk.build(t, core.Config{ConsecutiveFailures: 1, OpenDuration: 2 * time.Second,
			OpenDurationBackoff: 2, MaxOpenDuration: 8 * time.Second, MaxRetryAfter: time.Minute})
		r.Clock.Set(1000500 * time.Microsecond)
		r.X(core.Failure) // open for 2 s from 1.0005 s: until 3.001 s
		r.At(3.001)
		r.D(r.A(), core.Failure) // re-open for 4 s: until 7.001 s
		r.At(7.001)
		r.B.Done(r.A(), core.WithRetryAfter(errFail, 10*time.Second)) // re-open for 10 s, longer than 8 s
		require.NoError(t, r.B.ForceOpen(1500*time.Microsecond))      // 2 ms, rounded up
		var until []time.Duration
		for _, tr := range r.Transitions() {
			until = append(until, tr.OpenUntil)
		}
		require.Equal(t, []time.Duration{3001 * time.Millisecond, 0, 7001 * time.Millisecond, 0,
			17001 * time.Millisecond, 7003 * time.Millisecond}, until)
	})
}
