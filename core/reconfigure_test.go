package core_test

import (
	"errors"
	"strings"
	"sync"
	"sync/atomic"
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

// A listener that panics on a reconfiguration's notification must not
// cost the transition the reconfiguration's verdict committed: kept
// probe counts that close the breaker under the new rules still release
// its OpenGate slot and are notified, in order, and the notifications
// after them still come. (With the verdict's part run after the
// reconfiguration's delivery, the panic skipped it: the slot leaked, the
// half-open -> closed was never published, and every later notification
// waited behind it for good.)
func TestReconfigureListenerPanicKeepsTheVerdict(t *testing.T) {
	forEachImpl(t, func(t *testing.T, mk maker) {
		gate := &slots{capacity: 1}
		c := core.Config{ConsecutiveFailures: 1, OpenDuration: time.Second, PermittedCallsInHalfOpen: 3,
			SuccessesToClose: 3, MaxWaitInHalfOpen: core.WaitForever, OpenGate: gate}
		r := mk.build(t, c, func(tr core.Transition) {
			if tr.Reason == core.ReasonReconfigured {
				panic("listener")
			}
		})
		r.B.Record(r.A(), core.Failure)
		r.Clock.Advance(time.Second)
		p1, p2, p3 := r.A(), r.A(), r.A()
		r.B.Record(p1, core.Success)
		r.B.Record(p2, core.Success)
		requireHeld(t, gate, 1, "half-open")

		c.SuccessesToClose = 2
		require.PanicsWithValue(t, "listener", func() { _ = r.B.(reconfigurer).Reconfigure(c) })
		require.Equal(t, core.Closed, r.B.State(), "2 successes close under the new rule")
		requireHeld(t, gate, 0, "closed by the verdict")
		r.B.Record(p3, core.Success) // stale now
		require.NoError(t, r.B.ForceOpen(time.Second))
		require.Equal(t, []string{"C>O@0", "O>H@1", "H>H@1", "H>C@1", "C>O@1"}, r.CBs())
		requireHeld(t, gate, 1, "forced open")
	})
}

// panicClock is a manual clock whose reads panic while armed.
type panicClock struct {
	core.ManualClock
	armed atomic.Bool
}

func (c *panicClock) Now() time.Duration {
	if c.armed.Load() {
		panic("clock")
	}
	return c.ManualClock.Now()
}

// A clock that panics while a Reconfigure builds the breaker under the
// new rules leaves no hang and no half state: the panic goes out of
// Reconfigure (the lock-free one reads the clock there), and once the clock reads again every method works, the
// reconfiguration has either happened (one notification) or not (none),
// and the next Reconfigure takes effect.
func TestReconfigurePanickingClock(t *testing.T) {
	forEachImpl(t, func(t *testing.T, mk maker) {
		clock := new(panicClock)
		c := core.Config{ConsecutiveFailures: 3, Clock: clock}
		r := mk.build(t, c)
		r.B.Record(r.A(), core.Failure)
		clock.armed.Store(true)
		next := c
		next.ConsecutiveFailures = 2
		func() {
			// An implementation may reconfigure without reading the clock.
			defer func() {
				if v := recover(); v != nil {
					require.Equal(t, "clock", v)
				}
			}()
			_ = r.B.(reconfigurer).Reconfigure(next)
		}()
		clock.armed.Store(false)

		done := make(chan struct{})
		go func() {
			defer close(done)
			require.Equal(t, core.Closed, r.B.State())
			applied := r.B.(reconfigurer).Settings().ConsecutiveFailures == 2
			require.Len(t, r.Transitions(), map[bool]int{true: 1}[applied])
			require.Equal(t, uint64(1), r.B.Counts().ConsecutiveFailures, "the run kept")
			next.ConsecutiveFailures = 3 - map[bool]int{true: 1}[!applied] // 2 if not applied, else back to 3
			require.NoError(t, r.B.(reconfigurer).Reconfigure(next))
			require.Equal(t, next.ConsecutiveFailures, r.B.(reconfigurer).Settings().ConsecutiveFailures)
			for range next.ConsecutiveFailures - 1 {
				r.B.Record(r.A(), core.Failure)
			}
			require.Equal(t, core.Open, r.B.State())
			tr := r.Transitions()
			require.Equal(t, core.ReasonReconfigured, tr[len(tr)-2].Reason)
			require.Equal(t, core.Open, tr[len(tr)-1].To)
		}()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatal("hung after the clock's panic")
		}
	})
}

// A ProbeGate may call Reconfigure from AdmitProbe: the probe it is asked
// about was counted before, is kept in flight, and is judged by the new
// rules (one success closes now); a probe it refuses after reconfiguring
// gives its slot back on the reconfigured breaker.
func TestReconfigureFromProbeGate(t *testing.T) {
	forEachImpl(t, func(t *testing.T, mk maker) {
		for _, refuse := range []bool{false, true} {
			var r *rig
			c := core.Config{ConsecutiveFailures: 1, OpenDuration: time.Second, PermittedCallsInHalfOpen: 2,
				SuccessesToClose: 2, MaxWaitInHalfOpen: core.WaitForever}
			var once sync.Once
			c.ProbeGate = probeGateFunc(func(p core.Permit) (time.Duration, error) {
				once.Do(func() {
					next := c
					next.SuccessesToClose = 1
					require.NoError(t, r.B.(reconfigurer).Reconfigure(next))
				})
				if refuse {
					return 0, core.ErrHalfOpenFull
				}
				return 0, nil
			})
			r = mk.build(t, c)
			r.B.Record(r.A(), core.Failure)
			r.Clock.Advance(time.Second)
			p, err := r.B.Allow()
			require.Equal(t, 1, r.B.(reconfigurer).Settings().SuccessesToClose)
			if refuse {
				require.ErrorIs(t, err, core.ErrHalfOpenFull)
				require.Equal(t, core.Counts{State: core.HalfOpen, Generation: 2}, r.B.Counts(), "the slot given back")
				continue
			}
			require.NoError(t, err)
			require.Equal(t, 1, r.B.Counts().ProbesInFlight)
			r.B.Record(p, core.Success)
			require.Equal(t, core.Closed, r.B.State(), "one success closes under the new rule")
			require.Equal(t, []string{"C>O@0", "O>H@1", "H>H@1", "H>C@1"}, r.CBs())
		}
	})
}

// probeGateFunc is a ProbeGate that asks a function and ignores ProbeDone.
type probeGateFunc func(core.Permit) (time.Duration, error)

func (f probeGateFunc) AdmitProbe(p core.Permit) (time.Duration, error) { return f(p) }
func (probeGateFunc) ProbeDone(core.Permit, core.Outcome)               {}

// A breaker built with the default classifier and reconfigured with a
// classifier of its own classifies a plain error (errors.New's) with the
// new one, and a new OpenDurationFunc hears the error that tripped: for
// permits granted before and after the Reconfigure. (The breaker New
// returned kept its path for plain errors, which skips the classifier and
// the error: a Classifier making every error Ignored still saw each plain
// one counted as a failure.)
func TestReconfigureClassifiesPlainErrorsWithTheNewRules(t *testing.T) {
	forEachImpl(t, func(t *testing.T, mk maker) {
		for _, window := range []core.WindowType{core.CountBased, core.TimeBased} {
			c := core.Config{WindowType: window, WindowSize: 2, MinimumNumberOfCalls: 2, FailureRateThreshold: 50}
			r := mk.build(t, c)
			before := r.A()
			next := c
			next.Classifier = func(error) core.Outcome { return core.Ignored }
			require.NoError(t, r.B.(reconfigurer).Reconfigure(next))
			r.B.Done(before, errFail)
			r.B.Done(r.A(), errFail)
			require.Equal(t, core.Counts{State: core.Closed}, r.B.Counts(), "both ignored by the new classifier")

			next = c
			next.OpenDuration, next.MaxOpenDuration = time.Second, 10*time.Second
			next.OpenDurationFunc = func(_ int, err error) time.Duration {
				if errors.Is(err, errFail) {
					return 7 * time.Second
				}
				return time.Second
			}
			require.NoError(t, r.B.(reconfigurer).Reconfigure(next))
			r.B.Done(r.A(), errFail)
			r.B.Done(r.A(), errFail)
			require.Equal(t, core.Open, r.B.State())
			require.Equal(t, 7*time.Second, r.B.RetryAfter(), "the open duration for the error that tripped")
		}
	})
}

// RecordHint bounds a hint by the MaxRetryAfter of the rules in force:
// turned off by a Reconfigure, a hint is a plain failure; turned on, it
// trips. (The breaker New returned bounded every hint by its own
// MaxRetryAfter, the first Config's, forever.)
func TestReconfigureBoundsHintsByTheNewRules(t *testing.T) {
	forEachImpl(t, func(t *testing.T, mk maker) {
		c := core.Config{ConsecutiveFailures: 100, OpenDuration: time.Second, MaxRetryAfter: time.Minute}
		r := mk.build(t, c)
		next := c
		next.MaxRetryAfter = 0
		require.NoError(t, r.B.(reconfigurer).Reconfigure(next))
		r.B.RecordHint(r.A(), 30*time.Second)
		require.Equal(t, core.Counts{State: core.Closed, ConsecutiveFailures: 1}, r.B.Counts(), "hints off: a failure")

		next.MaxRetryAfter = 10 * time.Second
		require.NoError(t, r.B.(reconfigurer).Reconfigure(next))
		r.B.RecordHint(r.A(), 30*time.Second)
		require.Equal(t, core.Open, r.B.State(), "hints on again: it trips")
		require.Equal(t, 10*time.Second, r.B.RetryAfter(), "for the hint, bounded by the new MaxRetryAfter")
	})
}

// Kept probe failures that re-open the breaker under new rules with an
// OpenDurationFunc: its duration is the re-open's; if it panics, the
// reconfiguration and the re-open (for OpenDuration) are committed and
// notified, then the panic goes out of Reconfigure.
func TestReconfigureVerdictRunsOpenDurationFunc(t *testing.T) {
	forEachImpl(t, func(t *testing.T, mk maker) {
		for _, panics := range []bool{false, true} {
			c := core.Config{ConsecutiveFailures: 1, OpenDuration: time.Second, PermittedCallsInHalfOpen: 2,
				FailuresToReopen: 2, SuccessesToClose: 2, MaxWaitInHalfOpen: core.WaitForever}
			r := mk.build(t, c)
			r.B.Record(r.A(), core.Failure)
			r.Clock.Advance(time.Second)
			r.B.Record(r.A(), core.Failure) // 1 of 2
			next := c
			next.FailuresToReopen, next.MaxOpenDuration = 1, time.Minute
			next.OpenDurationFunc = func(reopens int, err error) time.Duration {
				require.Equal(t, 1, reopens)
				require.NoError(t, err)
				if panics {
					panic("open duration")
				}
				return 5 * time.Second
			}
			if panics {
				require.PanicsWithValue(t, "open duration", func() { _ = r.B.(reconfigurer).Reconfigure(next) })
			} else {
				require.NoError(t, r.B.(reconfigurer).Reconfigure(next))
			}
			require.Equal(t, []string{"C>O@0", "O>H@1", "H>H@1", "H>O@1"}, r.CBs())
			require.Equal(t, map[bool]time.Duration{false: 5 * time.Second, true: time.Second}[panics], r.B.RetryAfter())
		}
	})
}

// A kept window or run that trips the new rules (a threshold lowered)
// leaves the breaker closed until its next outcome, and its Snapshot
// restores under those rules, closed, to a breaker whose next failure
// trips it.
func TestReconfigureSnapshotRestoresUnderTheNewRules(t *testing.T) {
	forEachImpl(t, func(t *testing.T, mk maker) {
		for _, c := range []core.Config{
			{ConsecutiveFailures: 5},
			{WindowSize: 10, MinimumNumberOfCalls: 10, FailureRateThreshold: 50},
		} {
			r := mk.build(t, c)
			for i := range map[bool]int{true: 10, false: 4}[c.WindowSize > 0] { // 4 failures first
				r.B.Record(r.A(), core.Outcome(map[bool]int{true: 1}[i < 4]))
			}
			next := c
			if next.FailureRateThreshold > 0 {
				next.FailureRateThreshold = 40 // 4 of 10 trip now
			} else {
				next.ConsecutiveFailures = 3
			}
			require.NoError(t, r.B.(reconfigurer).Reconfigure(next))
			s, err := r.B.Snapshot(time.Unix(1000, 0), true)
			require.NoError(t, err)
			next.Clock, next.OnStateChange = nil, nil
			rb, err := mk.restore(next, s, time.Unix(1000, 0))
			require.NoError(t, err, "%+v", s)
			require.Equal(t, core.Closed, rb.State())
			p, err := rb.Allow()
			require.NoError(t, err)
			rb.Record(p, core.Failure)
			require.Equal(t, core.Open, rb.State(), "the next outcome judges it")
		}
	})
}

// A Config that changes no rule changes nothing: no notification, the
// same settings, whatever wiring it carries (c's Name, Clock, listener,
// metrics, gates and InitialState are not read); a function-valued rule
// other than DefaultClassifier always counts as changed.
func TestReconfigureNoOp(t *testing.T) {
	forEachImpl(t, func(t *testing.T, mk maker) {
		c := core.Config{WindowSize: 10, FailureRateThreshold: 50, OpenDuration: time.Second}
		r := mk.build(t, c)
		before := r.B.(reconfigurer).Settings()
		same := c
		same.Name, same.Clock, same.CollectMetrics, same.InitialState = "other", core.NewManualClock(time.Hour), true, core.ForcedOpen
		same.OnStateChange = func(core.Transition) { t.Error("the new Config's listener ran") }
		same.ProbeGate, same.OpenGate = probeGateFunc(nil), &slots{}
		require.NoError(t, r.B.(reconfigurer).Reconfigure(same))
		require.NoError(t, r.B.(reconfigurer).Reconfigure(c))
		require.Empty(t, r.Transitions())
		after := r.B.(reconfigurer).Settings()
		require.Equal(t, before.Fingerprint(), after.Fingerprint())
		require.Same(t, r.Clock, after.Clock)
		require.Equal(t, core.Closed, r.B.State())

		same.Classifier = func(error) core.Outcome { return core.Failure }
		require.NoError(t, r.B.(reconfigurer).Reconfigure(same))
		require.NoError(t, r.B.(reconfigurer).Reconfigure(same))
		tr := r.Transitions()
		require.Len(t, tr, 2)
		require.Equal(t, "Classifier", tr[1].Changed)
	})
}
