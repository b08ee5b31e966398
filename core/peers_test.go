package core_test

// The peers' own circuit-breaker tests that exercise what casbreaker once
// could not express (issue 24): live reconfiguration, restarts that
// remember, half-open judged by a ratio, sub-second buckets, an open
// duration from a function and its jitter, manual half-open, an initial
// state and the time-left query. Each row restates one peer test in
// casbreaker's terms with vectors of our own on a manual clock, so a row
// says what the peer asserts, not how it asserts it; where casbreaker's
// rule differs from the peer's, the row says so.

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/casbreaker/casbreaker/core"
)

// probes is a half-open breaker's {in flight, successes, failures}.
func probes(r *rig) [3]int {
	c := r.B.Counts()
	return [3]int{c.ProbesInFlight, c.ProbeSuccesses, c.ProbeFailures}
}

// halfOpenRatio is a breaker for failsafe-go's half-open ratio tests:
// one failure trips it (failsafe-go's default threshold), and half-open
// closes after need successes among permitted probes, re-opening once
// permitted-need+1 have failed, so that need of permitted can no longer
// succeed.
func halfOpenRatio(need, permitted int) core.Config {
	return core.Config{ConsecutiveFailures: 1, PermittedCallsInHalfOpen: permitted,
		SuccessesToClose: need, FailuresToReopen: permitted - need + 1}
}

// halfOpenVector moves r to half-open by hand, then records outcomes one
// call at a time: the breaker must stay half-open until the last, after
// which it must be in want.
func halfOpenVector(t *testing.T, r *rig, want core.State, outcomes ...core.Outcome) {
	t.Helper()
	r.B.HalfOpen()
	r.Is(core.HalfOpen)
	for i, o := range outcomes {
		r.Is(core.HalfOpen)
		r.X(o)
		if i < len(outcomes)-1 {
			require.Equal(t, core.HalfOpen, r.B.State(), "after outcome %d", i)
		}
	}
	r.Is(want)
}

// One row per peer test, each run against both implementations: a row
// that fails names, in its log, the peer assertion casbreaker no longer
// keeps.
func TestPeerCases(t *testing.T) {
	cases := []struct {
		name string
		peer string // the peer test restated: project, file, test (or the public issue)
		run  func(t *testing.T, mk maker)
	}{
		{"half-open 2 of 3 closes", "failsafe-go circuitbreaker/halfopenstate_test.go TestHalfOpenSuccessWithSuccessRatio", func(t *testing.T, mk maker) {
			// Two of three probes succeed: the tolerated failure first.
			r := mk.build(t, halfOpenRatio(2, 3))
			halfOpenVector(t, r, core.Closed, F, S, S)
			require.Equal(t, []string{"C>H@0", "H>C@0"}, r.CBs())
			require.Equal(t, core.ReasonProbesPassed, r.Transitions()[1].Reason)
		}},
		{"half-open 2 of 3 re-opens", "failsafe-go circuitbreaker/halfopenstate_test.go TestHalfOpenFailureWithSuccessRatio", func(t *testing.T, mk maker) {
			// A second failure among three probes leaves two successes out
			// of reach.
			r := mk.build(t, halfOpenRatio(2, 3))
			halfOpenVector(t, r, core.Open, F, S, F)
			require.Equal(t, []string{"C>H@0", "H>O@0"}, r.CBs())
			require.Equal(t, core.ReasonProbeFailed, r.Transitions()[1].Reason)
		}},
		{"half-open 3 of 4 closes, closed-state rate not judging", "failsafe-go circuitbreaker/halfopenstate_test.go TestHalfOpenSuccessWithSuccessAndFailureRatios", func(t *testing.T, mk maker) {
			// Three of four; failsafe-go's failure ratio does not judge
			// half-open, and casbreaker's closed-state rules never do.
			c := halfOpenRatio(3, 4)
			c.FailureRateThreshold, c.WindowSize = 60, 5
			r := mk.build(t, c)
			halfOpenVector(t, r, core.Closed, S, F, S, S)
		}},
		{"half-open 3 of 4 re-opens", "failsafe-go circuitbreaker/halfopenstate_test.go TestHalfOpenFailureWithSuccessAndFailureRatios", func(t *testing.T, mk maker) {
			c := halfOpenRatio(3, 4)
			c.FailureRateThreshold, c.WindowSize = 60, 5
			r := mk.build(t, c)
			halfOpenVector(t, r, core.Open, S, F, S, F)
		}},
		{"half-open 3 of 5 closes at the third success", "failsafe-go test/circuitbreaker_test.go TestCircuitBreaker/should call OnClose listener", func(t *testing.T, mk maker) {
			// Three of five: two failures are tolerated, and the close is
			// notified at the third success, with both failures counted
			// up to it.
			r := mk.build(t, halfOpenRatio(3, 5))
			r.B.HalfOpen()
			r.XN(2, F)
			r.XN(2, S)
			require.Equal(t, [3]int{0, 2, 2}, probes(r))
			require.Equal(t, []string{"C>H@0"}, r.CBs())
			r.X(S)
			r.Is(core.Closed)
			require.Equal(t, []string{"C>H@0", "H>C@0"}, r.CBs())
		}},
		{"manual half-open refuses calls beyond the permitted", "failsafe-go test/circuitbreaker_test.go TestCircuitBreaker/should reject excessive attempts when breaker half-open", func(t *testing.T, mk maker) {
			// A breaker put in half-open by hand admits its permitted calls
			// and refuses every call beyond them while they are in flight
			// (failsafe-go answers ErrOpen, casbreaker ErrHalfOpenFull).
			r := mk.build(t, core.Config{ConsecutiveFailures: 1, PermittedCallsInHalfOpen: 3})
			r.B.HalfOpen()
			p := []core.Permit{r.A(), r.A(), r.A()}
			for _, q := range p {
				require.True(t, q.Probe)
			}
			for range 5 {
				r.Reject(core.ErrHalfOpenFull)
			}
			require.Equal(t, [3]int{3, 0, 0}, probes(r))
			for _, q := range p {
				r.D(q, S)
			}
			r.Is(core.Closed)
		}},
		{"delay function decides the open duration", "failsafe-go circuitbreaker/openstate_test.go TestTryAcquirePermit", func(t *testing.T, mk maker) {
			// The delay function, not OpenDuration, decides how long the
			// trip keeps the breaker open; the first call after it probes.
			var reopens []int
			r := mk.build(t, core.Config{ConsecutiveFailures: 1, OpenDuration: time.Minute, MaxOpenDuration: time.Hour,
				OpenDurationFunc: func(n int, _ error) time.Duration { reopens = append(reopens, n); return 100 * time.Millisecond }})
			r.X(F)
			r.Is(core.Open)
			r.At(0.099)
			ftWait(r, time.Millisecond)
			r.At(0.1)
			require.True(t, r.A().Probe)
			r.Is(core.HalfOpen)
			require.Equal(t, []int{0}, reopens)
			require.Equal(t, []string{"C>O@0", "O>H@0.1"}, r.CBs())
		}},
		{"time left counts down, read without effect", "failsafe-go circuitbreaker/openstate_test.go TestRemainingDelay", func(t *testing.T, mk maker) {
			// The time left counts down with the clock, and asking for it
			// neither admits a call nor commits nor notifies anything.
			r := mk.build(t, core.Config{ConsecutiveFailures: 1, MaxOpenDuration: time.Minute, OpenDurationFunc: openFor(time.Second)})
			r.X(F)
			ftNoChange(r, "RetryAfter at the trip", func() { require.Equal(t, time.Second, r.B.RetryAfter()) })
			r.At(0.11)
			ftNoChange(r, "RetryAfter after 110 ms", func() { require.Equal(t, 890*time.Millisecond, r.B.RetryAfter()) })
			ftWait(r, 890*time.Millisecond)
		}},
		{"no time left closed, elapsed, or half-open", "failsafe-go circuitbreaker/openstate_test.go TestNoRemainingDelay, halfopenstate_test.go TestRemainingDelayInHalfOpenState", func(t *testing.T, mk maker) {
			// Nothing is left to wait while closed, once the open duration
			// has elapsed (the next call probes, and reading the time left
			// does not commit the half-open) and in a half-open breaker
			// with a free probe slot.
			r := mk.build(t, core.Config{ConsecutiveFailures: 1, MaxOpenDuration: time.Minute, OpenDurationFunc: openFor(10 * time.Millisecond)})
			require.Zero(t, r.B.RetryAfter())
			r.X(F)
			require.Equal(t, 10*time.Millisecond, r.B.RetryAfter())
			r.At(0.05)
			ftNoChange(r, "RetryAfter past the deadline", func() { require.Zero(t, r.B.RetryAfter()) })
			require.Equal(t, []string{"C>O@0"}, r.CBs())
			r.B.HalfOpen()
			r.Is(core.HalfOpen)
			require.Zero(t, r.B.RetryAfter())
		}},
		{"failure count in 200 ms buckets rolls off", "failsafe-go test/circuitbreaker_test.go TestCircuitBreaker/should support time based failure threshold", func(t *testing.T, mk maker) {
			// Two failures in a 1 s window of 200 ms buckets. failsafe-go's
			// window is 200 ms long; casbreaker's is whole seconds, with
			// only its buckets below one. An outcome leaves with its bucket
			// one window after the bucket began: those at 1.3 s, in
			// [1.2 s, 1.4 s), still count at 2.1 s, where 1 s buckets
			// would have dropped them at 2 s and the third failure would
			// not trip.
			r := mk.build(t, core.Config{WindowType: core.TimeBased, WindowSize: 1, BucketWidth: 200 * time.Millisecond,
				FailureCountThreshold: 2, OpenDuration: time.Second})
			r.X(F)
			r.X(S)
			r.Cnt(2, 1, 0, 0)
			r.At(1)
			r.Cnt(0, 0, 0, 0) // rolled off with their bucket
			r.At(1.3)
			r.X(F)
			r.X(S)
			r.Is(core.Closed)
			r.At(2.1)
			r.Cnt(2, 1, 0, 0)
			r.X(F)
			r.Is(core.Open)
			r.At(3.1).X(F) // the probe fails
			r.Is(core.Open)
			r.At(4.1).X(S)
			r.Is(core.Closed)
			require.Equal(t, []string{"C>O@2.1", "O>H@3.1", "H>O@3.1", "O>H@4.1", "H>C@4.1"}, r.CBs())
		}},
		{"failure rate in a rolling window of 250 ms buckets", "gobreaker v2/gobreaker_test.go TestRollingWindowCircuitBreaker", func(t *testing.T, mk maker) {
			// A rate of at least 60 % of at least 3 counted calls, excluded
			// calls not counted, in a rolling window whose oldest bucket
			// leaves whole. gobreaker rolls 3 s buckets over 30 s; the
			// widest casbreaker bucket is 1 s, so this is 250 ms over 2 s.
			r := mk.build(t, core.Config{WindowType: core.TimeBased, WindowSize: 2, BucketWidth: 250 * time.Millisecond,
				FailureRateThreshold: 60, MinimumNumberOfCalls: 3, OpenDuration: 9 * time.Second, PermittedCallsInHalfOpen: 3})
			for range 5 {
				r.X(S)
				r.X(F)
				r.X(I)
			}
			r.Cnt(10, 5, 0, 0) // 50 %
			r.At(0.25).X(S)
			r.At(0.5).X(S)
			r.X(I)
			r.At(0.75).X(I)
			r.X(S)
			r.At(1).X(F)
			r.Cnt(14, 6, 0, 0)
			r.At(2)
			r.Cnt(4, 1, 0, 0) // the bucket of 0 s has left, the others stay
			for i, want := range []core.State{core.Closed, core.Closed, core.Closed, core.Open} {
				r.X(F) // 2 of 5, 3 of 6, 4 of 7, then 5 of 8: 62.5 %
				require.Equal(t, want, r.B.State(), "failure %d at 2 s", i+1)
			}
			r.At(11)
			r.X(S)
			r.X(S)
			r.Is(core.HalfOpen)
			require.Equal(t, [3]int{0, 2, 0}, probes(r))
			p := r.A()
			r.Reject(core.ErrHalfOpenFull)
			r.D(p, S)
			r.Is(core.Closed)
			r.Cnt(0, 0, 0, 0)
			require.Equal(t, []string{"C>O@2", "O>H@11", "H>C@11"}, r.CBs())
		}},
		{"exponential open duration from a function", "Resilience4j resilience4j-circuitbreaker/.../internal/CircuitBreakerStateMachineTest.java shouldTransitionToHalfOpenAfterWaitInterval", func(t *testing.T, mk maker) {
			// An exponential interval function of 5 s and multiplier 1.5,
			// fed the re-opens since the last close. Resilience4j counts
			// manual transitions to open too; casbreaker's function decides
			// trips and re-opens only, so the vector re-opens by failed
			// probes.
			var reopens []int
			r := mk.build(t, core.Config{ConsecutiveFailures: 1, MaxOpenDuration: time.Minute,
				OpenDurationFunc: func(n int, _ error) time.Duration {
					reopens = append(reopens, n)
					return time.Duration(float64(5*time.Second) * math.Pow(1.5, float64(n)))
				}})
			r.X(F)
			r.At(3)
			ftWait(r, 2*time.Second)
			r.At(5).X(F)
			r.At(11)
			ftWait(r, 1500*time.Millisecond) // 7.5 s from 5 s
			r.At(12.5).X(F)
			require.Equal(t, 11250*time.Millisecond, r.B.RetryAfter())
			r.At(23.75).X(S)
			r.Is(core.Closed)
			r.X(F)
			require.Equal(t, 5*time.Second, r.B.RetryAfter(), "closing starts the function over")
			require.Equal(t, []int{0, 1, 2, 0}, reopens)
			require.Equal(t, []string{"C>O@0", "O>H@5", "H>O@5", "O>H@12.5", "H>O@12.5", "O>H@23.75", "H>C@23.75", "C>O@23.75"}, r.CBs())
		}},
		{"jittered open duration", "Resilience4j resilience4j-core/.../IntervalFunctionTest.java generatesRandomizedIntervals", func(t *testing.T, mk maker) {
			// A randomized open duration. Resilience4j's factor spreads an
			// interval both ways; casbreaker's jitter only lengthens it (the
			// open duration stays a minimum) and is a hash of the trip's
			// clock reading and generation, not a random draw: two breakers
			// tripping at the same reading wait alike, and breakers
			// tripping at different readings spread.
			c := core.Config{ConsecutiveFailures: 1, OpenDuration: 10 * time.Second, OpenDurationJitter: 0.5}
			seen := map[time.Duration]bool{}
			for i := range 8 {
				at := time.Duration(i) * 1337 * time.Millisecond
				var got [2]time.Duration
				for j := range got {
					r := mk.build(t, c)
					r.Clock.Set(at)
					r.X(F)
					got[j] = r.B.RetryAfter()
					require.Equal(t, lastOpenUntil(t, r)-at, got[j])
				}
				require.Equal(t, got[0], got[1], "trips at %v", at)
				require.GreaterOrEqual(t, got[0], 10*time.Second)
				require.LessOrEqual(t, got[0], 15*time.Second+time.Millisecond)
				seen[got[0]] = true
			}
			require.Greater(t, len(seen), 4, "trips at different readings spread")
		}},
		{"starts open, then half-open by hand", "Resilience4j resilience4j-circuitbreaker/.../internal/CircuitBreakerStateMachineTest.java circuitBreakerInitializeInOpenState", func(t *testing.T, mk maker) {
			// A breaker that starts open does so with no transition; the
			// manual half-open then admits the permitted probes.
			r := mk.build(t, core.Config{WindowType: core.TimeBased, WindowSize: 1, FailureRateThreshold: 50,
				MinimumNumberOfCalls: 1, PermittedCallsInHalfOpen: 4, OpenDuration: 2 * time.Second, InitialState: core.Open})
			r.Is(core.Open)
			require.Zero(t, r.B.Counts().Generation)
			require.Empty(t, r.CBs())
			ftWait(r, 2*time.Second)
			r.At(1)
			r.B.HalfOpen()
			r.Is(core.HalfOpen)
			for range 4 {
				require.True(t, r.A().Probe)
			}
			r.Reject(core.ErrHalfOpenFull)
			require.Equal(t, []string{"O>H@1"}, r.CBs())
			require.Equal(t, core.ReasonManual, r.Transitions()[0].Reason)
		}},
		{"starts metrics-only or disabled", "Resilience4j resilience4j-circuitbreaker/.../CircuitBreakerRegistryTest.java testCreateUsingBuilderWithCircuitBreakerInitialState{MetricOnly,Disabled}", func(t *testing.T, mk maker) {
			// Metrics-only starts there and admits every call while it
			// counts them; disabled admits every call and counts none.
			// Neither was reached by a transition.
			c := core.Config{WindowSize: 4, FailureRateThreshold: 50, InitialState: core.MetricsOnly}
			r := mk.build(t, c)
			r.Is(core.MetricsOnly)
			r.XN(3, F)
			r.Cnt(3, 3, 0, 0)
			r.Is(core.MetricsOnly)
			require.Zero(t, r.B.Counts().Generation)

			c.InitialState = core.Disabled
			r = mk.build(t, c)
			r.Is(core.Disabled)
			r.XN(6, F)
			r.Cnt(0, 0, 0, 0)
			r.Is(core.Disabled)
			require.Empty(t, r.CBs())
		}},
		{"restarts carry the run and the deadline", "gobreaker v2/distributed_gobreaker_test.go TestDistributedCircuitBreakerStateTransitions, TestDistributedCircuitBreakerCounts", func(t *testing.T, mk maker) {
			// gobreaker's instances share their state through a store;
			// casbreaker carries it across a restart instead: the run of
			// consecutive failures, then the open deadline, each into a
			// process whose clock starts elsewhere.
			c := core.Config{ConsecutiveFailures: 6, OpenDuration: 2 * time.Second, PermittedCallsInHalfOpen: 3}
			a := mk.build(t, c)
			a.XN(5, F)
			s, err := a.B.Snapshot(wall, false)
			require.NoError(t, err)
			b := mk.restoreRig(t, c, s, wall.Add(time.Second), 100*time.Second)
			require.Equal(t, uint64(5), b.B.Counts().ConsecutiveFailures)
			b.X(F) // the sixth in a row, across the restart
			b.Is(core.Open)
			b.Clock.Advance(500 * time.Millisecond)
			s, err = b.B.Snapshot(wall.Add(1500*time.Millisecond), false)
			require.NoError(t, err)
			require.Equal(t, wall.Add(3*time.Second), s.OpenUntil)

			d := mk.restoreRig(t, c, s, wall.Add(2*time.Second), 0)
			d.Is(core.Open)
			ftWait(d, time.Second)
			d.At(1)
			d.XN(3, S)
			d.Is(core.Closed)
			d.XN(6, F)
			d.Is(core.Open)
			require.Equal(t, []string{"O>H@1", "H>C@1", "C>O@1"}, d.CBs())
		}},
		{"reconfiguring half-open keeps its probes", "Resilience4j issue #2325 (pull request #2365, unmerged; no test in the suite): reconfiguring a half-open breaker", func(t *testing.T, mk maker) {
			// New rules on a half-open breaker keep its state, generation
			// and the probes counted and in flight, so reconfiguring lets
			// no flood through; the next outcome is judged by the new
			// rules. An open one keeps its deadline.
			c := core.Config{ConsecutiveFailures: 1, OpenDuration: 5 * time.Second, PermittedCallsInHalfOpen: 4}
			r := mk.build(t, c)
			r.X(F)
			r.At(5)
			p := []core.Permit{r.A(), r.A()}
			r.D(p[0], S)
			gen := r.B.Counts().Generation
			c.OpenDuration, c.SuccessesToClose = 10*time.Second, 2
			r.rc(c)
			r.Is(core.HalfOpen)
			require.Equal(t, gen, r.B.Counts().Generation)
			require.Equal(t, [3]int{1, 1, 0}, probes(r))
			tr := r.Transitions()[2]
			require.Equal(t, core.ReasonReconfigured, tr.Reason)
			// The defaults derived from OpenDuration move with it, and are
			// named as changed.
			require.Equal(t, "OpenDuration,MaxOpenDuration,SuccessesToClose,HalfOpenFullWait", tr.Changed)
			r.D(p[1], S) // the second success, enough under the new rules
			r.Is(core.Closed)
			require.Equal(t, []string{"C>O@0", "O>H@5", "H>H@5", "H>C@5"}, r.CBs())

			r.X(F)
			r.At(7)
			c.OpenDuration = time.Second
			r.rc(c)
			ftWait(r, 8*time.Second) // the deadline the trip set, 10 s from 5 s
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Logf("restates %s", tc.peer) // shown with a failure, to say which peer assertion broke
			forEachImpl(t, tc.run)
		})
	}
}
