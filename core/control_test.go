package core_test

// Behavioural tests of manual control (ForceOpen, Disable, MetricsOnly,
// Reset): every expected value is worked out from the doc comments (the
// spec), and every test runs against both implementations. Time moves only on
// the manual clock.

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/casbreaker/casbreaker/core"
)

// controlOpen is the manual-control tests' open duration.
const controlOpen = 5 * time.Second

// controlCfg trips at the first failure.
var controlCfg = core.Config{ConsecutiveFailures: 1, OpenDuration: controlOpen}

// controlFrom is a state a control starts from: enter drives a fresh rig
// into it at 1 s and returns a permit granted there, if the state grants
// any.
type controlFrom struct {
	from  core.State
	enter func(r *rig) *core.Permit
}

// controlStates are the six states every control is tried from.
var controlStates = []controlFrom{
	{core.Closed, func(r *rig) *core.Permit { r.At(1); p := r.A(); return &p }},
	{core.Open, func(r *rig) *core.Permit { r.At(1); r.X(core.Failure); return nil }},
	{core.HalfOpen, func(r *rig) *core.Permit {
		r.At(1)
		r.X(core.Failure)
		r.At(6)
		p := r.A()
		return &p
	}},
	{core.ForcedOpen, func(r *rig) *core.Permit { r.At(1); require.NoError(r.t, r.B.ForceOpen(0)); return nil }},
	{core.Disabled, func(r *rig) *core.Permit { r.At(1); r.B.Disable(); p := r.A(); return &p }},
	{core.MetricsOnly, func(r *rig) *core.Permit { r.At(1); r.B.MetricsOnly(); p := r.A(); return &p }},
}

// controlAction is a manual control: do issues it, to is the state it
// moves to, and then checks what that state does afterwards.
type controlAction struct {
	name string
	to   core.State
	do   func(r *rig)
	then func(t *testing.T, r *rig)
}

// controlActions are the five controls tried from every state.
var controlActions = []controlAction{
	{"ForceOpen(0)", core.ForcedOpen, func(r *rig) { require.NoError(r.t, r.B.ForceOpen(0)) }, func(t *testing.T, r *rig) {
		for _, adv := range []time.Duration{0, controlOpen, 400 * 24 * time.Hour, 50 * 365 * 24 * time.Hour} {
			r.Clock.Advance(adv)
			p, err := r.B.Allow()
			require.ErrorIs(t, err, core.ErrForcedOpen)
			require.ErrorIs(t, err, core.ErrRejected)
			require.Equal(t, core.Permit{}, p) // Wait 0: only a control ends it
			r.Is(core.ForcedOpen)
			require.Equal(t, core.ForcedOpen, r.B.Counts().State)
		}
	}},
	{"ForceOpen(3s)", core.Open, func(r *rig) { require.NoError(r.t, r.B.ForceOpen(3*time.Second)) }, func(t *testing.T, r *rig) {
		ftWait(r, 3*time.Second)
		r.Clock.Advance(3*time.Second - time.Nanosecond)
		r.Reject(core.ErrOpen)
		r.Clock.Advance(time.Nanosecond)
		r.Is(core.HalfOpen)
		p := r.A()
		require.True(t, p.Probe)
		tr := r.Transitions()
		require.Equal(t, core.Open, tr[len(tr)-1].From)
		require.Equal(t, core.HalfOpen, tr[len(tr)-1].To)
	}},
	{"Disable", core.Disabled, func(r *rig) { r.B.Disable() }, func(t *testing.T, r *rig) {
		n := len(r.CBs())
		r.XN(5, core.Failure)
		r.Clock.Advance(time.Hour)
		r.XN(5, core.Failure)
		r.Is(core.Disabled)
		require.Len(t, r.CBs(), n)
		require.Zero(t, r.B.Counts().ConsecutiveFailures)
	}},
	{"MetricsOnly", core.MetricsOnly, func(r *rig) { r.B.MetricsOnly() }, func(t *testing.T, r *rig) {
		n := len(r.CBs())
		r.X(core.Failure) // one failure in a row: would have opened
		r.Is(core.MetricsOnly)
		tr := r.Transitions()
		require.Len(t, tr, n+1)
		require.Equal(t, [2]core.State{core.MetricsOnly, core.MetricsOnly}, [2]core.State{tr[n].From, tr[n].To})
		r.A()
	}},
	{"Reset", core.Closed, func(r *rig) { r.B.Reset() }, func(t *testing.T, r *rig) {
		r.Cnt(0, 0, 0, 0)
		require.Zero(t, r.B.Counts().ConsecutiveFailures)
		r.X(core.Failure)
		r.Is(core.Open)
		ftWait(r, controlOpen)
	}},
}

func TestFeatureManualControl(t *testing.T) {
	t.Run("scenario", controlScenario)
	for _, st := range controlStates {
		for _, ctl := range controlActions {
			t.Run(fmt.Sprintf("%v/%s", st.from, ctl.name), func(t *testing.T) { controlFromState(t, st, ctl) })
		}
	}
	t.Run("open but due: the control's from is Open", controlOpenButDue)
	t.Run("ForceOpen rejects bad durations and changes nothing", controlForceOpenBadDuration)
	t.Run("ForceOpen(d) resets the backoff step", controlForceOpenResetsBackoff)
	t.Run("disabled admits everything, records nothing, never trips", controlDisabled)
	t.Run("metrics-only counts, never rejects, would-have-opened restarts the window", controlMetricsOnly)
	t.Run("metrics-only keeps the run of failures", controlMetricsOnlyRun)
	t.Run("reset: fresh window and no backoff", controlReset)
}

// controlFromState is TestFeatureManualControl's subtest "<state>/<control>":
// the control commits exactly one transition, from st to ctl's state, in the
// next generation, leaves any permit granted before it stale, and then the
// new state behaves as ctl.then checks.
func controlFromState(t *testing.T, st controlFrom, ctl controlAction) {
	forEachImpl(t, func(t *testing.T, mk maker) {
		r := mk.build(t, controlCfg)
		held := st.enter(r)
		require.Equal(t, st.from, r.B.State())
		require.Equal(t, st.from, r.B.Counts().State)
		before := r.Transitions()
		g := ftGen(r)
		ctl.do(r)
		after := r.Transitions()
		require.Len(t, after, len(before)+1, "exactly one notification: %v", r.CBs())
		tr := after[len(after)-1]
		require.Equal(t, st.from, tr.From)
		require.Equal(t, ctl.to, tr.To)
		require.Equal(t, g+1, tr.Generation)
		require.Equal(t, r.Clock.Now(), tr.At)
		require.Equal(t, tr.Generation, ftGen(r))
		require.Equal(t, ctl.to, r.B.Counts().State)
		require.Equal(t, ctl.to, r.B.State())
		if held != nil { // R8: a permit from before the control is stale
			ftNoChange(r, "stale failure", func() { r.B.Done(*held, errFail) })
			ftNoChange(r, "stale success", func() { r.D(*held, core.Success) })
		}
		ctl.then(t, r)
	})
}

// controlScenario is TestFeatureManualControl's subtest "scenario".
func controlScenario(t *testing.T) {
	// The scenario: an operator forces the breaker open for maintenance,
	// then disables it, watches it in metrics-only mode, and resets it.
	forEachImpl(t, func(t *testing.T, mk maker) {
		r := mk.build(t, core.Config{WindowSize: 4, FailureRateThreshold: 50, OpenDuration: controlOpen})
		r.At(1)
		r.XN(3, core.Success)
		require.NoError(t, r.B.ForceOpen(0))
		r.Is(core.ForcedOpen)
		r.Reject(core.ErrForcedOpen)
		r.At(1000)
		r.Reject(core.ErrForcedOpen)
		r.B.Disable()
		r.XN(10, core.Failure)
		r.Is(core.Disabled)
		r.B.MetricsOnly()
		r.XN(2, core.Failure)
		r.XN(1, core.Success)
		r.Cnt(3, 2, 0, 0)
		r.XN(1, core.Success) // 2 of 4: would have opened
		r.Is(core.MetricsOnly)
		r.Cnt(0, 0, 0, 0)
		r.B.Reset()
		r.Is(core.Closed)
		r.Cnt(0, 0, 0, 0)
		r.XN(4, core.Failure)
		r.Is(core.Open)
		ftCBs(r, "C>F@1", "F>D@1000", "D>M@1000", "M>M@1000", "M>C@1000", "C>O@1000")
	})
}

// controlOpenButDue is TestFeatureManualControl's subtest "open but due: the
// control's from is Open".
func controlOpenButDue(t *testing.T) {
	// State reports half-open once the open duration has passed (R5),
	// but no transition into half-open has been committed.
	forEachImpl(t, func(t *testing.T, mk maker) {
		r := mk.build(t, controlCfg)
		r.X(core.Failure)
		r.At(10)
		r.Is(core.HalfOpen)
		r.B.Reset()
		ftCBs(r, "C>O@0", "O>C@10")
	})
}

// controlForceOpenBadDuration is TestFeatureManualControl's subtest
// "ForceOpen rejects bad durations and changes nothing".
func controlForceOpenBadDuration(t *testing.T) {
	forEachImpl(t, func(t *testing.T, mk maker) {
		for _, st := range controlStates {
			r := mk.build(t, core.Config{WindowSize: 10, FailureRateThreshold: 100, ConsecutiveFailures: 1, OpenDuration: controlOpen})
			st.enter(r)
			if st.from == core.Closed {
				r.X(core.Success)
				r.Cnt(1, 0, 0, 0)
			}
			for _, d := range []time.Duration{-1, -time.Hour, core.MaxOpenDurationLimit + 1, time.Duration(math.MaxInt64), time.Duration(math.MinInt64)} {
				ftNoChange(r, fmt.Sprintf("ForceOpen(%v) from %v", d, st.from), func() {
					err := r.B.ForceOpen(d)
					require.ErrorIs(t, err, core.ErrInvalidArgument, "ForceOpen(%v)", d)
					require.NotErrorIs(t, err, core.ErrInvalidConfig)
				})
			}
			require.Equal(t, st.from, r.B.State())
		}
		r := mk.build(t, controlCfg)
		require.NoError(t, r.B.ForceOpen(core.MaxOpenDurationLimit))
		ftWait(r, core.MaxOpenDurationLimit)
		ftCBs(r, "C>O@0")
	})
}

// controlForceOpenResetsBackoff is TestFeatureManualControl's subtest
// "ForceOpen(d) resets the backoff step".
func controlForceOpenResetsBackoff(t *testing.T) {
	c := core.Config{ConsecutiveFailures: 1, OpenDuration: controlOpen, OpenDurationBackoff: 2, MaxOpenDuration: 40 * time.Second}
	forEachImpl(t, func(t *testing.T, mk maker) {
		r := mk.build(t, c)
		r.X(core.Failure) // 5 s
		r.At(5)
		r.D(r.A(), core.Failure) // step 1: 10 s
		r.At(15)
		r.D(r.A(), core.Failure) // step 2: 20 s
		ftWait(r, 20*time.Second)
		require.NoError(t, r.B.ForceOpen(3*time.Second))
		ftWait(r, 3*time.Second)
		r.At(18)
		r.D(r.A(), core.Failure) // as after a trip: step 1, not 3
		ftWait(r, 10*time.Second)
		ftCBs(r, "C>O@0", "O>H@5", "H>O@5", "O>H@15", "H>O@15", "O>O@15", "O>H@18", "H>O@18")
	})
}

// controlDisabled is TestFeatureManualControl's subtest "disabled admits
// everything, records nothing, never trips".
func controlDisabled(t *testing.T) {
	c := core.Config{WindowSize: 10, MinimumNumberOfCalls: 1, FailureRateThreshold: 1, FailureCountThreshold: 1,
		ConsecutiveFailures: 1, OpenDuration: controlOpen, MaxRetryAfter: time.Minute}
	forEachImpl(t, func(t *testing.T, mk maker) {
		r := mk.build(t, c)
		r.X(core.Success)
		r.Cnt(1, 0, 0, 0)
		r.B.Disable()
		require.Equal(t, core.Counts{State: core.Disabled, Generation: 1}, r.B.Counts())
		for i := range 300 {
			r.Clock.Advance(time.Second)
			p := r.A()
			require.False(t, p.Probe)
			switch i % 3 {
			case 0:
				r.B.Done(p, errFail)
			case 1:
				r.B.Done(p, core.WithRetryAfter(errFail, time.Minute))
			default:
				r.D(p, core.Success)
			}
		}
		require.Equal(t, core.Counts{State: core.Disabled, Generation: 1}, r.B.Counts())
		r.Is(core.Disabled)
		r.B.Reset()
		r.X(core.Failure)
		r.Is(core.Open)
		ftCBs(r, "C>D@0", "D>C@300", "C>O@300")
	})
}

// controlMetricsOnly is TestFeatureManualControl's subtest "metrics-only
// counts, never rejects, would-have-opened restarts the window".
func controlMetricsOnly(t *testing.T) {
	c := core.Config{WindowSize: 4, MinimumNumberOfCalls: 4, FailureRateThreshold: 50, OpenDuration: controlOpen}
	forEachImpl(t, func(t *testing.T, mk maker) {
		r := mk.build(t, c)
		r.XN(4, core.Failure) // open
		r.Is(core.Open)
		r.B.MetricsOnly()
		r.Is(core.MetricsOnly)
		r.Cnt(0, 0, 0, 0)
		r.X(core.Success)
		r.X(core.Failure)
		r.X(core.Success)
		r.Cnt(3, 1, 0, 0)
		g := ftGen(r)
		r.X(core.Failure) // 2 of 4 = 50 %
		r.Is(core.MetricsOnly)
		require.Equal(t, g+1, ftGen(r))
		r.Cnt(0, 0, 0, 0)
		r.X(core.Ignored)
		r.Cnt(0, 0, 0, 0)
		r.XN(3, core.Failure) // below the minimum
		r.Cnt(3, 3, 0, 0)
		r.At(1e6)
		r.X(core.Failure)
		r.Cnt(0, 0, 0, 0)
		for range 50 { // never rejects
			r.X(core.Failure)
		}
		r.Is(core.MetricsOnly)
		want := []string{"C>O@0", "O>M@0", "M>M@0"}
		for range 1 + 50/4 { // every fourth failure in a row would have opened
			want = append(want, "M>M@1e+06")
		}
		ftCBs(r, want...)
	})
}

// controlMetricsOnlyRun is TestFeatureManualControl's subtest "metrics-only
// keeps the run of failures".
func controlMetricsOnlyRun(t *testing.T) {
	forEachImpl(t, func(t *testing.T, mk maker) {
		r := mk.build(t, core.Config{ConsecutiveFailures: 3})
		r.B.MetricsOnly()
		r.XN(2, core.Failure)
		require.Equal(t, uint64(2), r.B.Counts().ConsecutiveFailures)
		r.X(core.Success)
		require.Zero(t, r.B.Counts().ConsecutiveFailures)
		r.XN(3, core.Failure)
		require.Zero(t, r.B.Counts().ConsecutiveFailures)
		ftCBs(r, "C>M@0", "M>M@0")
	})
}

// controlReset is TestFeatureManualControl's subtest "reset: fresh window and
// no backoff".
func controlReset(t *testing.T) {
	c := core.Config{WindowSize: 4, FailureRateThreshold: 50, OpenDuration: controlOpen, OpenDurationBackoff: 2,
		MaxOpenDuration: 40 * time.Second, PermittedCallsInHalfOpen: 2}
	forEachImpl(t, func(t *testing.T, mk maker) {
		r := mk.build(t, c)
		r.XN(3, core.Failure)
		r.Cnt(3, 3, 0, 0)
		r.B.Reset()
		r.Cnt(0, 0, 0, 0)
		r.XN(3, core.Success)
		r.Cnt(3, 0, 0, 0)
		r.XN(2, core.Failure) // S S F F: 50 %, trip
		ftWait(r, 5*time.Second)
		r.At(5)
		r.D(r.A(), core.Failure) // step 1
		r.At(15)
		r.D(r.A(), core.Failure) // step 2
		r.At(35)
		p1, p2 := r.A(), r.A()
		r.B.Reset() // from half-open with two probes out
		r.Cnt(0, 0, 0, 0)
		ftNoChange(r, "stale probes", func() {
			r.D(p1, core.Failure)
			r.D(p2, core.Success)
		})
		r.XN(4, core.Failure)
		ftWait(r, 5*time.Second) // base duration again
		r.At(40)
		r.D(r.A(), core.Failure)
		ftWait(r, 10*time.Second) // step 1, not 3
		r.At(45)
		r.B.Reset() // from open at step 1
		r.XN(4, core.Failure)
		ftWait(r, 5*time.Second)
		ftCBs(r, "C>C@0", "C>O@0", "O>H@5", "H>O@5", "O>H@15", "H>O@15", "O>H@35", "H>C@35",
			"C>O@35", "O>H@40", "H>O@40", "O>C@45", "C>O@45")
	})
}

// ForceOpen with a duration out of its bounds changes nothing (no
// generation, no notification, no metric) in either implementation, and
// durations at the bounds work at any clock reading.
func TestForceOpenDurationBounds(t *testing.T) {
	for _, start := range []time.Duration{0, 999999, math.MaxInt64 - core.MaxOpenDurationLimit - time.Hour} {
		lf, mu := rigPair(t, core.Config{ConsecutiveFailures: 1, OpenDuration: time.Second, CollectMetrics: true}, start)
		for _, r := range []*rig{lf, mu} {
			for _, d := range []time.Duration{-1, math.MinInt64, core.MaxOpenDurationLimit + 1, math.MaxInt64} {
				ftNoChange(r, fmt.Sprint(d), func() {
					require.ErrorIs(t, r.B.ForceOpen(d), core.ErrInvalidArgument)
				})
			}
			require.Zero(t, r.B.Metrics().Transitions)
			require.NoError(t, r.B.ForceOpen(1)) // 1 ns: kept as 1 ms, so the deadline is the first whole ms at or after now + 1 ms
			p, err := r.B.Allow()
			require.ErrorIs(t, err, core.ErrOpen)
			now, ms := r.Clock.Now(), time.Millisecond
			require.Equal(t, (now+ms-1)/ms*ms+ms-now, p.RetryAfter)
			r.Clock.Advance(p.RetryAfter)
			r.X(core.Success)
			r.Is(core.Closed)
			r.Clock.Set(r.Clock.Now() / time.Millisecond * time.Millisecond) // whole ms: the boundary is exact
			require.NoError(t, r.B.ForceOpen(core.MaxOpenDurationLimit))
			r.Clock.Advance(core.MaxOpenDurationLimit - time.Millisecond)
			r.Reject(core.ErrOpen)
			r.Clock.Advance(time.Millisecond)
			r.X(core.Success)
			r.Is(core.Closed)
		}
		require.Equal(t, mu.CBs(), lf.CBs())
		require.Equal(t, mu.B.Metrics(), lf.B.Metrics())
	}
}
