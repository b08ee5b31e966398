package core_test

// The scenarios of docs/scenarios.md (S1-S13), each an exact vector from the
// articles it names as sources, run against both implementations.

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/casbreaker/casbreaker/core"
)

const (
	S = core.Success
	F = core.Failure
	I = core.Ignored
)

// S1: the 21-minute outage: 3 failures within a 10-minute time window
// trip; open 5 minutes; one probe; one success closes.
func TestScenario_S1_TwentyOneMinuteOutage(t *testing.T) {
	forEachImpl(t, func(t *testing.T, mk maker) {
		r := mk.build(t, core.Config{WindowType: core.TimeBased, WindowSize: 600, FailureCountThreshold: 3,
			OpenDuration: 5 * time.Minute, PermittedCallsInHalfOpen: 1, SuccessesToClose: 1})
		want := map[int]core.State{}
		for m := 0; m <= 20; m++ {
			want[m] = core.Closed
		}
		for m := 5; m <= 14; m++ {
			want[m] = core.Open
		}
		admitted, rejected, failures := 0, 0, 0
		for m := 0; m <= 20; m++ {
			r.Clock.Set(time.Duration(m) * time.Minute)
			o := S
			if m >= 3 && m <= 12 {
				o = F
			}
			if r.Try(o) {
				admitted++
				if o == F {
					failures++
				}
			} else {
				rejected++
			}
			require.Equal(t, want[m], r.B.Counts().State, "state after minute %d", m)
		}
		require.Equal(t, [3]int{13, 8, 4}, [3]int{admitted, rejected, failures})
		require.Equal(t, []string{"C>O@300", "O>H@600", "H>O@600", "O>H@900", "H>C@900"}, r.CBs())
	})
}

// S2: the window slides: failures 6 minutes apart never reach 3 in 10 minutes;
// a failure is counted while now - t < window and is out at exactly window.
func TestScenario_S2_WindowSlides(t *testing.T) {
	cfg := core.Config{WindowType: core.TimeBased, WindowSize: 600, FailureCountThreshold: 3, OpenDuration: 5 * time.Minute}
	forEachImpl(t, func(t *testing.T, mk maker) {
		r := mk.build(t, cfg)
		for _, m := range []int{0, 6, 12} {
			r.Clock.Set(time.Duration(m) * time.Minute)
			r.X(F)
			r.Is(core.Closed)
		}
		r.Cnt(2, 2, 0, 0)

		r = mk.build(t, cfg)
		for _, m := range []int{0, 1, 2} {
			r.Clock.Set(time.Duration(m) * time.Minute)
			r.X(F)
		}
		r.Is(core.Open)

		// Boundary: failures at 0 s and 60 s; the third at 599.999 s trips, at 600 s it does not.
		for _, tc := range []struct {
			third float64
			want  core.State
		}{{599.999, core.Open}, {600, core.Closed}} {
			r = mk.build(t, cfg)
			r.At(0).X(F)
			r.At(60).X(F)
			r.At(tc.third).X(F)
			r.Is(tc.want)
		}
	})
}

// S3: eight callers at half-open with one permitted call: exactly one probe.
// With N permitted calls and G > N callers: exactly N, every round.
func TestScenario_S3_EightCallersAtHalfOpen(t *testing.T) {
	forEachImpl(t, func(t *testing.T, mk maker) {
		for _, n := range []int{1, 3} {
			for round := range rounds(1000, 50) {
				r := mk.build(t, core.Config{ConsecutiveFailures: 1, OpenDuration: time.Second, PermittedCallsInHalfOpen: n})
				r.X(F)
				r.At(1)
				var admitted atomic.Int32
				parallel(8, func(int) {
					if _, err := r.B.Allow(); err == nil {
						admitted.Add(1)
					} else {
						require.ErrorIs(t, err, core.ErrHalfOpenFull)
					}
				})
				require.EqualValues(t, n, admitted.Load(), "round %d", round)
				require.Equal(t, []string{"C>O@0", "O>H@1"}, r.CBs())
			}
		}
	})
}

// S4: twenty attempts against a dead dependency, trip after 3 consecutive failures.
func TestScenario_S4_TwentyAttemptsDeadDependency(t *testing.T) {
	forEachImpl(t, func(t *testing.T, mk maker) {
		r := mk.build(t, core.Config{ConsecutiveFailures: 3})
		reached := 0
		for range 20 {
			if r.Try(F) {
				reached++
			}
		}
		require.Equal(t, 3, reached)
		r.Is(core.Open)
	})
}

// S5: a half-open probe fails, then a later one succeeds.
func TestScenario_S5_ProbeFailsThenSucceeds(t *testing.T) {
	forEachImpl(t, func(t *testing.T, mk maker) {
		r := mk.build(t, core.Config{ConsecutiveFailures: 3, OpenDuration: 1000 * time.Millisecond, PermittedCallsInHalfOpen: 1})
		reached := 0
		for range 5 {
			if r.Try(F) {
				reached++
			}
		}
		require.Equal(t, 3, reached)
		r.Is(core.Open)
		r.At(1)
		r.Is(core.HalfOpen) // reported lazily, no call needed
		r.X(F)
		r.Is(core.Open)
		r.Reject(core.ErrOpen)
		r.At(2).X(S)
		r.Is(core.Closed)
	})
}

// R5: State and Counts report an elapsed open duration as half-open without
// committing anything. No notification goes out, the generation stays the
// open one, no probe is counted, however often they are read; a clock that
// steps back before the next call un-reports it. The transition is committed
// by the next Allow, whose caller is the first probe, and its notification
// carries that Allow's clock reading (Transition.At: when it was committed),
// not the deadline.
func TestStateReportsHalfOpenWithoutCommitting(t *testing.T) {
	forEachImpl(t, func(t *testing.T, mk maker) {
		r := mk.build(t, core.Config{ConsecutiveFailures: 1, OpenDuration: 10 * time.Second, CollectMetrics: true})
		r.X(F)
		open := r.B.Counts()
		require.Equal(t, core.Open, open.State)
		r.At(10)
		for range 3 {
			r.Is(core.HalfOpen)
			c := r.B.Counts()
			require.Equal(t, core.Counts{State: core.HalfOpen, Generation: open.Generation}, c, "reported, not committed")
		}
		require.Equal(t, []string{"C>O@0"}, r.CBs(), "a read sends no notification")
		require.Zero(t, r.B.Metrics().Transitions[core.Open][core.HalfOpen])
		r.At(9.999)
		r.Is(core.Open) // a clock that stepped back un-reports it (R14)
		r.At(25)
		p := r.A()
		require.True(t, p.Probe)
		require.Equal(t, open.Generation+1, p.Generation)
		require.Equal(t, []string{"C>O@0", "O>H@25"}, r.CBs(), "committed by the Allow, stamped with its reading")
		require.Equal(t, uint64(1), r.B.Metrics().Transitions[core.Open][core.HalfOpen])
	})
}

// S6: never judge a partial window; the rate rule is inclusive.
func TestScenario_S6_NeverJudgePartialWindow(t *testing.T) {
	forEachImpl(t, func(t *testing.T, mk maker) {
		cfg := core.Config{WindowSize: 20, FailureRateThreshold: 50, MinimumNumberOfCalls: 20}
		r := mk.build(t, cfg)
		r.XN(19, F)
		r.Is(core.Closed)
		r.X(F)
		r.Is(core.Open)

		for _, tc := range []struct {
			failures int
			want     core.State
		}{{10, core.Open}, {9, core.Closed}} {
			r = mk.build(t, cfg)
			r.XN(20-tc.failures, S)
			r.XN(tc.failures, F)
			r.Is(tc.want)
		}

		r = mk.build(t, core.Config{WindowSize: 10, FailureRateThreshold: 50, MinimumNumberOfCalls: 5})
		r.XN(2, F)
		r.Is(core.Closed)
	})
}

// S7: three probes; all succeed -> closed. With the 2nd failing -> open at once,
// and the 3rd's later success is stale.
func TestScenario_S7_SeveralProbes(t *testing.T) {
	forEachImpl(t, func(t *testing.T, mk maker) {
		cfg := core.Config{ConsecutiveFailures: 1, OpenDuration: time.Second, PermittedCallsInHalfOpen: 3}
		r := mk.build(t, cfg)
		r.X(F)
		r.At(1)
		p1, p2, p3 := r.A(), r.A(), r.A()
		r.Reject(core.ErrHalfOpenFull)
		r.D(p1, S)
		r.D(p2, S)
		r.Is(core.HalfOpen)
		r.D(p3, S)
		r.Is(core.Closed)

		r = mk.build(t, cfg)
		r.X(F)
		r.At(1)
		p1, p2, p3 = r.A(), r.A(), r.A()
		r.D(p1, S)
		r.D(p2, F)
		r.Is(core.Open)
		r.D(p3, S)
		r.Is(core.Open)
		require.Equal(t, []string{"C>O@0", "O>H@1", "H>O@1"}, r.CBs())
	})
}

// S8: successes to close (2) larger than the probe slots (1).
func TestScenario_S8_SuccessThresholdAboveSlots(t *testing.T) {
	forEachImpl(t, func(t *testing.T, mk maker) {
		r := mk.build(t, core.Config{ConsecutiveFailures: 1, OpenDuration: time.Second, PermittedCallsInHalfOpen: 1, SuccessesToClose: 2})
		r.X(F)
		r.At(1)
		p := r.A()
		r.Reject(core.ErrHalfOpenFull)
		r.D(p, S)
		r.Is(core.HalfOpen)
		r.X(S)
		r.Is(core.Closed)
	})
}

// S9: a slow call admitted while closed fails after the breaker tripped,
// probed and closed again: it changes nothing.
func TestScenario_S9_StaleResultIgnored(t *testing.T) {
	forEachImpl(t, func(t *testing.T, mk maker) {
		r := mk.build(t, core.Config{ConsecutiveFailures: 2, OpenDuration: time.Second})
		slowCall := r.A()
		r.XN(2, F)
		r.Is(core.Open)
		r.At(1).X(S)
		r.Is(core.Closed)
		before := r.B.Counts()
		r.At(2).D(slowCall, F)
		require.Equal(t, before, r.B.Counts())
		r.Is(core.Closed)
		require.Equal(t, []string{"C>O@0", "O>H@1", "H>C@1"}, r.CBs())
	})
}

// S10: ignored outcomes release the probe slot; a business error classified
// as success counts as success.
func TestScenario_S10_IgnoredOutcomesReleaseProbe(t *testing.T) {
	errNotFound := errors.New("not found")
	forEachImpl(t, func(t *testing.T, mk maker) {
		r := mk.build(t, core.Config{ConsecutiveFailures: 1, OpenDuration: time.Second, Classifier: func(err error) core.Outcome {
			if errors.Is(err, errNotFound) {
				return core.Success
			}
			return classify(err)
		}})
		r.X(F)
		r.At(1)
		for _, err := range []error{context.Canceled, errIgnored} {
			p := r.A()
			r.Reject(core.ErrHalfOpenFull)
			r.B.Done(p, err)
			r.Is(core.HalfOpen)
		}
		r.B.Done(r.A(), errNotFound)
		r.Is(core.Closed)
	})
}

// S11: the probe's function panics: the panic reaches the caller unchanged, it
// counts as a failure, the breaker opens, and no slot stays taken.
func TestScenario_S11_PanicInProbe(t *testing.T) {
	forEachImpl(t, func(t *testing.T, mk maker) {
		r := mk.build(t, core.Config{ConsecutiveFailures: 1, OpenDuration: time.Second})
		r.X(F)
		r.At(1)
		require.PanicsWithValue(t, "boom", func() {
			_ = r.call(context.Background(), func(context.Context) error { panic("boom") })
		})
		r.Is(core.Open)
		r.At(2)
		r.X(S)
		r.Is(core.Closed)
	})
}

// S12: open-duration backoff 5, 10, 20, 40, 60, 60 s; closing resets it.
func TestScenario_S12_OpenDurationBackoff(t *testing.T) {
	forEachImpl(t, func(t *testing.T, mk maker) {
		r := mk.build(t, core.Config{ConsecutiveFailures: 1, OpenDuration: 5 * time.Second, OpenDurationBackoff: 2, MaxOpenDuration: time.Minute})
		now := 0.0
		r.At(now).X(F)
		for _, d := range []float64{5, 10, 20, 40, 60, 60} {
			r.At(now + d - 0.001).Reject(core.ErrOpen)
			now += d
			r.At(now).X(F) // the probe fails: re-open with the next duration
		}
		now += 60
		r.At(now).X(S)
		r.Is(core.Closed)
		r.X(F)
		r.At(now + 4.999).Reject(core.ErrOpen)
		r.At(now + 5).X(S)
		r.Is(core.Closed)
	})
}

// S13: one breaker per dependency: tripping one leaves the other closed.
func TestScenario_S13_OneBreakerPerDependency(t *testing.T) {
	forEachImpl(t, func(t *testing.T, mk maker) {
		cfg := core.Config{ConsecutiveFailures: 3}
		a, b := mk.build(t, cfg), mk.build(t, cfg)
		a.XN(3, F)
		a.Is(core.Open)
		b.Is(core.Closed)
		b.X(S)
		b.Is(core.Closed)
	})
}
