package core_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/casbreaker/casbreaker/core"
)

// A listener may call Reconfigure, from any notification, that of a
// reconfiguration included: nothing waits on itself, and the notifications
// come in order, each reconfiguration after the transition that caused it.
func TestReconfigureFromListener(t *testing.T) {
	forEachImpl(t, func(t *testing.T, mk maker) {
		c := core.Config{ConsecutiveFailures: 3, OpenDuration: time.Second}
		var r *rig
		r = mk.build(t, c, func(tr core.Transition) {
			switch {
			case tr.From == core.Closed && tr.To == core.Open:
				next := c
				next.OpenDuration = 2 * time.Second // after a trip, back off more
				require.NoError(t, r.B.(reconfigurer).Reconfigure(next))
			case tr.Reason == core.ReasonReconfigured && strings.HasPrefix(tr.Changed, "OpenDuration,"):
				next := c
				next.OpenDuration, next.ConsecutiveFailures = 2*time.Second, 2
				require.NoError(t, r.B.(reconfigurer).Reconfigure(next))
			case tr.Reason == core.ReasonReconfigured && tr.Changed == "MaxRetryAfter":
				next := c
				next.OpenDuration, next.ConsecutiveFailures, next.MaxRetryAfter = 2*time.Second, 4, time.Minute
				require.NoError(t, r.B.(reconfigurer).Reconfigure(next))
			}
		})
		for range 3 {
			r.B.Record(r.A(), core.Failure)
		}
		require.Equal(t, []string{"C>O@0", "O>O@0", "O>O@0"}, r.CBs())
		require.Equal(t, 2, r.B.(reconfigurer).Settings().ConsecutiveFailures)
		require.Equal(t, 2*time.Second, r.B.(reconfigurer).Settings().OpenDuration)

		// From outside a listener, whose notification the listener hears
		// on this goroutine, and reconfigures again from.
		next := c
		next.OpenDuration, next.ConsecutiveFailures, next.MaxRetryAfter = 2*time.Second, 2, time.Minute
		require.NoError(t, r.B.(reconfigurer).Reconfigure(next))
		require.Equal(t, []string{"C>O@0", "O>O@0", "O>O@0", "O>O@0", "O>O@0"}, r.CBs())
		require.Equal(t, 4, r.B.(reconfigurer).Settings().ConsecutiveFailures)
	})
}

// rc reconfigures the rig's breaker to c, which must be accepted.
func (r *rig) rc(c core.Config) {
	r.t.Helper()
	require.NoError(r.t, r.B.(reconfigurer).Reconfigure(c))
}

// The reconfiguration rule, case by case, on both implementations: what a
// reconfiguration keeps, what it drops, the verdict half-open counts reach
// under new rules, and what it refuses.
func TestReconfigureRules(t *testing.T) {
	countRate := core.Config{WindowSize: 10, MinimumNumberOfCalls: 4, FailureRateThreshold: 50, OpenDuration: 10 * time.Second}
	halfOpen := core.Config{ConsecutiveFailures: 1, OpenDuration: time.Second, PermittedCallsInHalfOpen: 4,
		SuccessesToClose: 4, FailuresToReopen: 3, MaxWaitInHalfOpen: core.WaitForever}
	cases := []struct {
		name string
		run  func(t *testing.T, mk maker)
	}{
		{"a count window keeps its newest outcomes, in order", func(t *testing.T, mk maker) {
			c := countRate
			r := mk.build(t, c)
			r.XN(5, core.Success)
			r.XN(3, core.Failure) // 3 of 8: 37.5 %
			r.Cnt(8, 3, 0, 0)
			c.WindowSize = 6
			r.rc(c)
			r.Cnt(6, 3, 0, 0) // S S S F F F: the newest six, at 50 %, not judged until the next outcome
			c.WindowSize = 20
			r.rc(c)
			r.Cnt(6, 3, 0, 0) // a larger window keeps all
			require.Equal(t, []string{"C>C@0", "C>C@0"}, r.CBs())
			r.X(core.Success) // 3 of 7
			r.Is(core.Closed)
			r.X(core.Failure) // 4 of 8: 50 %, under the new window; the old one held 4 of 10
			r.Is(core.Open)
		}},
		{"another window kind starts empty; the next outcome judges", func(t *testing.T, mk maker) {
			c := countRate
			r := mk.build(t, c)
			r.XN(3, core.Failure)
			c.WindowType, c.WindowSize = core.TimeBased, 10
			r.rc(c)
			r.Cnt(0, 0, 0, 0)
			c.WindowType, c.WindowSize = core.CountBased, 10
			r.rc(c)
			r.Cnt(0, 0, 0, 0)
		}},
		{"a lower threshold trips at the next outcome, not at the reconfiguration", func(t *testing.T, mk maker) {
			c := countRate
			r := mk.build(t, c)
			r.XN(1, core.Failure)
			r.XN(3, core.Success) // 25 %
			c.FailureRateThreshold = 25
			r.rc(c)
			r.Is(core.Closed)
			r.X(core.Success) // 1 of 5: 20 %
			r.Is(core.Closed)
			r.X(core.Failure) // 2 of 6: 33 %
			r.Is(core.Open)
			require.Equal(t, []string{"C>C@0", "C>O@0"}, r.CBs())
		}},
		{"the run of consecutive failures: kept while tracked, dropped when not", func(t *testing.T, mk maker) {
			c := core.Config{ConsecutiveFailures: 5}
			r := mk.build(t, c)
			r.XN(3, core.Failure)
			c.ConsecutiveFailures = 4
			r.rc(c)
			require.Equal(t, uint64(3), r.B.Counts().ConsecutiveFailures)
			r.X(core.Failure) // the 4th in a row
			r.Is(core.Open)

			c = core.Config{ConsecutiveFailures: 5, WindowSize: 10, MinimumNumberOfCalls: 10, FailureRateThreshold: 100}
			r = mk.build(t, c)
			r.XN(3, core.Failure)
			c.ConsecutiveFailures = 0
			r.rc(c)
			require.Zero(t, r.B.Counts().ConsecutiveFailures)
			c.ConsecutiveFailures = 2
			r.rc(c)
			r.X(core.Failure)
			r.Is(core.Closed) // a run of one, the old three were dropped
			r.X(core.Failure)
			r.Is(core.Open)
		}},
		{"open keeps its deadline and step; new durations from the next trip", func(t *testing.T, mk maker) {
			c := core.Config{ConsecutiveFailures: 1, OpenDuration: 10 * time.Second}
			r := mk.build(t, c)
			r.X(core.Failure)
			r.Clock.Advance(4 * time.Second)
			c.OpenDuration = time.Second
			r.rc(c)
			r.Reject(core.ErrOpen)
			require.Equal(t, 6*time.Second, r.B.RetryAfter())
			r.Clock.Advance(6 * time.Second)
			r.X(core.Failure) // the probe fails: re-open for the new duration
			require.Equal(t, time.Second, r.B.RetryAfter())
			require.Equal(t, []string{"C>O@0", "O>O@4", "O>H@10", "H>O@10"}, r.CBs())
		}},
		{"half-open keeps its counts; in-flight probes report into them", func(t *testing.T, mk maker) {
			c := halfOpen
			r := mk.build(t, c)
			r.X(core.Failure)
			r.Clock.Advance(time.Second)
			p1, p2 := r.A(), r.A()
			r.D(r.A(), core.Success)
			c.SuccessesToClose = 3
			r.rc(c)
			got := r.B.Counts()
			require.Equal(t, [3]int{2, 1, 0}, [3]int{got.ProbesInFlight, got.ProbeSuccesses, got.ProbeFailures})
			r.D(p1, core.Success)
			r.Is(core.HalfOpen)
			r.D(p2, core.Success) // the third success closes, under the new rule
			r.Is(core.Closed)
			require.Equal(t, []string{"C>O@0", "O>H@1", "H>H@1", "H>C@1"}, r.CBs())
		}},
		{"half-open counts that reach the new verdict commit it at once", func(t *testing.T, mk maker) {
			c := halfOpen
			r := mk.build(t, c)
			r.X(core.Failure)
			r.Clock.Advance(time.Second)
			stale := r.A()
			r.XN(2, core.Success)
			c.SuccessesToClose = 2
			r.rc(c)
			r.Is(core.Closed)
			r.D(stale, core.Failure) // of the half-open generation: stale now
			r.Is(core.Closed)
			require.Equal(t, []string{"C>O@0", "O>H@1", "H>H@1", "H>C@1"}, r.CBs())

			c = halfOpen
			r = mk.build(t, c)
			r.X(core.Failure)
			r.Clock.Advance(time.Second)
			r.XN(2, core.Failure) // tolerated: 2 of 3
			r.X(core.Success)
			c.FailuresToReopen, c.SuccessesToClose = 2, 1 // both verdicts reached: re-open wins
			r.rc(c)
			r.Is(core.Open)
			require.Equal(t, []string{"C>O@0", "O>H@1", "H>H@1", "H>O@1"}, r.CBs())
		}},
		{"fewer permitted probes: those in flight drain, no new one until then", func(t *testing.T, mk maker) {
			c := halfOpen
			r := mk.build(t, c)
			r.X(core.Failure)
			r.Clock.Advance(time.Second)
			p1, p2 := r.A(), r.A()
			c.PermittedCallsInHalfOpen = 1
			r.rc(c)
			r.Reject(core.ErrHalfOpenFull)
			r.D(p1, core.Success)
			r.Reject(core.ErrHalfOpenFull)
			r.D(p2, core.Success)
			require.True(t, r.A().Probe)
		}},
		{"the max wait restarts when it changes", func(t *testing.T, mk maker) {
			c := halfOpen
			c.MaxWaitInHalfOpen = 10 * time.Second
			r := mk.build(t, c)
			r.X(core.Failure)
			r.Clock.Advance(time.Second)
			for range 4 {
				r.A()
			}
			r.Clock.Advance(8 * time.Second)
			c.MaxWaitInHalfOpen = 5 * time.Second
			r.rc(c)
			r.Clock.Advance(4 * time.Second) // 12 s into the old wait, 4 into the new
			r.Reject(core.ErrHalfOpenFull)
			r.Clock.Advance(2 * time.Second)
			require.True(t, r.A().Probe, "the new wait passed: a new probe generation")
		}},
		{"a ramp-up: kept while its duration is, ended when it changes", func(t *testing.T, mk maker) {
			c := halfOpen
			c.SuccessesToClose, c.RampUpDuration, c.RampUpStartPercent = 1, time.Minute, 0
			r := mk.build(t, c)
			r.X(core.Failure)
			r.Clock.Advance(time.Second)
			r.X(core.Success) // closed, ramping from 0 %
			r.Reject(core.ErrRampingUp)
			c.RampUpStartPercent = 1
			r.rc(c)
			r.Reject(core.ErrRampingUp)
			c.RampUpDuration = 2 * time.Minute
			r.rc(c)
			r.X(core.Success) // the ramp ended
		}},
		{"no rule changed: nothing happens; wiring is kept, not read", func(t *testing.T, mk maker) {
			c := countRate
			r := mk.build(t, c)
			same := c
			same.Name, same.CollectMetrics, same.InitialState = "other", true, core.ForcedOpen
			same.OnStateChange = func(core.Transition) { t.Error("the new listener was called") }
			r.rc(same)
			require.Empty(t, r.CBs())
			same.FailureRateThreshold = 60
			r.rc(same)
			require.Equal(t, []string{"C>C@0"}, r.CBs())
			require.Empty(t, r.B.(reconfigurer).Settings().Name)
			require.Equal(t, core.Metrics{}, r.B.Metrics())
		}},
		{"refused: an invalid config, or slow calls started; nothing changes", func(t *testing.T, mk maker) {
			c := countRate
			r := mk.build(t, c)
			r.XN(2, core.Failure)
			bad := c
			bad.FailureRateThreshold = 101
			require.ErrorIs(t, r.B.(reconfigurer).Reconfigure(bad), core.ErrInvalidConfig)
			bad = c
			bad.SlowCallDurationThreshold = time.Second
			err := r.B.(reconfigurer).Reconfigure(bad)
			require.ErrorIs(t, err, core.ErrInvalidConfig)
			require.ErrorContains(t, err, "SlowCallDurationThreshold")
			require.Empty(t, r.CBs())
			r.Cnt(2, 2, 0, 0)
			require.Equal(t, 50, r.B.(reconfigurer).Settings().FailureRateThreshold)
		}},
		{"slow calls measured before: a permit in flight is judged by the new threshold", func(t *testing.T, mk maker) {
			c := core.Config{WindowSize: 10, MinimumNumberOfCalls: 10, FailureRateThreshold: 100,
				SlowCallDurationThreshold: 5 * time.Second, SlowCallRateThreshold: 100}
			r := mk.build(t, c)
			p := r.A()
			r.Clock.Advance(3 * time.Second)
			c.SlowCallDurationThreshold = 2 * time.Second
			r.rc(c)
			r.D(p, core.Success)
			r.Cnt(1, 0, 1, 0)
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) { forEachImpl(t, tc.run) })
	}
}
