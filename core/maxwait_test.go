package core_test

// Behavioural tests of the half-open max wait (MaxWaitInHalfOpen): every
// expected value is worked out from the doc comments (the spec), and every
// test runs against both implementations. Time moves only on the manual
// clock.

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/casbreaker/casbreaker/core"
)

// maxWaitOpen is the max-wait tests' open duration.
const maxWaitOpen = 5 * time.Second

// maxWaitCfg trips at the first failure and restarts a full half-open 2 s
// after its generation began.
var maxWaitCfg = core.Config{ConsecutiveFailures: 1, OpenDuration: maxWaitOpen, MaxWaitInHalfOpen: 2 * time.Second}

func TestFeatureHalfOpenMaxWait(t *testing.T) {
	t.Run("scenario", maxWaitScenario)
	t.Run("lost probe's failure is stale too; restarts repeat every max wait", maxWaitLostProbeFailure)
	t.Run("not-full half-open does not restart", maxWaitNotFull)
	t.Run("full by successes restarts with none counted", maxWaitFullBySuccesses)
	t.Run("restart keeps the backoff step", maxWaitKeepsBackoff)
	t.Run("coarse unit boundary", maxWaitUnitBoundary)
	t.Run("long idle: the max wait has still passed", maxWaitLongIdle)
	t.Run("default: a lost probe ends after max(OpenDuration, 1 min)", maxWaitDefault)
	t.Run("WaitForever: a lost probe keeps it half-open", maxWaitForever)
}

// maxWaitScenario is TestFeatureHalfOpenMaxWait's subtest "scenario".
func maxWaitScenario(t *testing.T) {
	// The scenario: the only probe's caller dies. Without a max wait the
	// breaker would stay half-open and full forever; with it, the first call
	// after 2 s becomes the first probe of a new generation.
	forEachImpl(t, func(t *testing.T, mk maker) {
		r := mk.build(t, maxWaitCfg)
		r.X(core.Failure)
		r.At(5)
		lost := r.A()
		require.True(t, lost.Probe)
		r.At(6)
		r.Reject(core.ErrHalfOpenFull)
		ftSet(r, 7*time.Second-time.Nanosecond)
		r.Reject(core.ErrHalfOpenFull)
		r.Is(core.HalfOpen)
		ftCBs(r, "C>O@0", "O>H@5")
		ftSet(r, 7*time.Second)
		p := r.A()
		require.True(t, p.Probe)
		require.Equal(t, lost.Generation+1, p.Generation)
		require.Equal(t, p.Generation, ftGen(r))
		ftCBs(r, "C>O@0", "O>H@5", "H>H@7")
		c := r.B.Counts()
		require.Equal(t, [2]int{1, 0}, [2]int{c.ProbesInFlight, c.ProbeSuccesses})
		r.Reject(core.ErrHalfOpenFull)
		ftNoChange(r, "lost probe's success", func() { r.D(lost, core.Success) })
		r.D(p, core.Success)
		r.Is(core.Closed)
		ftCBs(r, "C>O@0", "O>H@5", "H>H@7", "H>C@7")
	})
}

// maxWaitLostProbeFailure is TestFeatureHalfOpenMaxWait's subtest "lost
// probe's failure is stale too; restarts repeat every max wait".
func maxWaitLostProbeFailure(t *testing.T) {
	forEachImpl(t, func(t *testing.T, mk maker) {
		r := mk.build(t, maxWaitCfg)
		r.X(core.Failure)
		r.At(5)
		lost1 := r.A()
		r.At(7)
		lost2 := r.A() // H>H@7
		ftNoChange(r, "lost probe's failure", func() { r.B.Done(lost1, errFail) })
		ftSet(r, 9*time.Second-time.Nanosecond)
		r.Reject(core.ErrHalfOpenFull)
		r.At(9)
		p := r.A() // H>H@9
		ftNoChange(r, "second lost probe's failure", func() { r.D(lost2, core.Failure) })
		ftNoChange(r, "first lost probe's success", func() { r.D(lost1, core.Success) })
		r.D(p, core.Failure) // the current probe decides
		ftWait(r, maxWaitOpen)
		ftCBs(r, "C>O@0", "O>H@5", "H>H@7", "H>H@9", "H>O@9")
	})
}

// maxWaitNotFull is TestFeatureHalfOpenMaxWait's subtest "not-full half-open
// does not restart".
func maxWaitNotFull(t *testing.T) {
	c := maxWaitCfg
	c.PermittedCallsInHalfOpen = 2
	forEachImpl(t, func(t *testing.T, mk maker) {
		r := mk.build(t, c)
		r.X(core.Failure)
		r.At(5)
		p1 := r.A()
		r.At(100) // long past the max wait, but a slot is free
		p2 := r.A()
		require.Equal(t, p1.Generation, p2.Generation)
		require.Equal(t, 2, r.B.Counts().ProbesInFlight)
		ftCBs(r, "C>O@0", "O>H@5")
		p3 := r.A() // full and past the max wait: restart
		require.Equal(t, p1.Generation+1, p3.Generation)
		require.Equal(t, 1, r.B.Counts().ProbesInFlight)
		ftCBs(r, "C>O@0", "O>H@5", "H>H@100")
		p4 := r.A() // the new generation has a free slot
		require.Equal(t, p3.Generation, p4.Generation)
		r.Reject(core.ErrHalfOpenFull)
		ftNoChange(r, "old probes", func() { r.D(p1, core.Success); r.D(p2, core.Success) })
		r.D(p3, core.Success)
		r.D(p4, core.Success)
		r.Is(core.Closed)
		ftCBs(r, "C>O@0", "O>H@5", "H>H@100", "H>C@100")
	})
}

// maxWaitFullBySuccesses is TestFeatureHalfOpenMaxWait's subtest "full by
// successes restarts with none counted".
func maxWaitFullBySuccesses(t *testing.T) {
	c := maxWaitCfg
	c.PermittedCallsInHalfOpen, c.SuccessesToClose = 2, 2
	forEachImpl(t, func(t *testing.T, mk maker) {
		r := mk.build(t, c)
		r.X(core.Failure)
		r.At(5)
		p1, p2 := r.A(), r.A()
		r.D(p1, core.Success)
		c := r.B.Counts()
		require.Equal(t, [2]int{1, 1}, [2]int{c.ProbesInFlight, c.ProbeSuccesses})
		r.At(6)
		r.Reject(core.ErrHalfOpenFull)
		r.At(7)
		q1 := r.A()
		c = r.B.Counts()
		require.Equal(t, [2]int{1, 0}, [2]int{c.ProbesInFlight, c.ProbeSuccesses})
		ftNoChange(r, "old probe", func() { r.D(p2, core.Success) })
		q2 := r.A()
		r.D(q1, core.Success)
		r.Is(core.HalfOpen)
		r.D(q2, core.Success)
		r.Is(core.Closed)
		ftCBs(r, "C>O@0", "O>H@5", "H>H@7", "H>C@7")
	})
}

// maxWaitKeepsBackoff is TestFeatureHalfOpenMaxWait's subtest "restart keeps
// the backoff step".
func maxWaitKeepsBackoff(t *testing.T) {
	c := maxWaitCfg
	c.OpenDurationBackoff, c.MaxOpenDuration = 2, 40*time.Second
	forEachImpl(t, func(t *testing.T, mk maker) {
		r := mk.build(t, c)
		r.X(core.Failure)
		r.At(5)
		r.D(r.A(), core.Failure) // step 1: 10 s
		r.At(15)
		r.A() // lost
		r.At(17)
		p := r.A() // restart
		r.D(p, core.Failure)
		ftWait(r, 20*time.Second) // step 2
		ftCBs(r, "C>O@0", "O>H@5", "H>O@5", "O>H@15", "H>H@17", "H>O@17")
	})
}

// maxWaitUnitBoundary is TestFeatureHalfOpenMaxWait's subtest "coarse unit
// boundary".
//
// The max wait is kept in coarse units of max(1 ms, ceil(d/1024 in ms));
// the deadline is the first unit boundary at or after start + d.
func maxWaitUnitBoundary(t *testing.T) {
	for _, tc := range []struct {
		name     string
		wait     time.Duration
		start    time.Duration // the reading of the call that performs open -> half-open
		deadline time.Duration // the first reading that restarts
	}{
		{"2s unit 2ms aligned", 2 * time.Second, 5 * time.Second, 7 * time.Second},
		{"2s unit 2ms start 5.001", 2 * time.Second, 5001 * time.Millisecond, 7002 * time.Millisecond},
		{"2s unit 2ms start 5.0005", 2 * time.Second, 5000500 * time.Microsecond, 7002 * time.Millisecond},
		{"2s unit 2ms start 5.002", 2 * time.Second, 5002 * time.Millisecond, 7002 * time.Millisecond},
		{"250ms unit 1ms aligned", 250 * time.Millisecond, 5 * time.Second, 5250 * time.Millisecond},
		{"250ms unit 1ms start 5.0005", 250 * time.Millisecond, 5000500 * time.Microsecond, 5251 * time.Millisecond},
		{"2.5ms unit 1ms", 2500 * time.Microsecond, 5 * time.Second, 5003 * time.Millisecond},
		{"1025ms unit 2ms", 1025 * time.Millisecond, 5 * time.Second, 6026 * time.Millisecond},
		{"10s unit 10ms start 5.001", 10 * time.Second, 5001 * time.Millisecond, 15010 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := maxWaitCfg
			c.MaxWaitInHalfOpen = tc.wait
			forEachImpl(t, func(t *testing.T, mk maker) {
				r := mk.build(t, c)
				r.X(core.Failure)
				ftSet(r, tc.start)
				r.A()
				ftSet(r, tc.start+tc.wait-time.Nanosecond)
				r.Reject(core.ErrHalfOpenFull)
				ftSet(r, tc.deadline-time.Nanosecond)
				r.Reject(core.ErrHalfOpenFull)
				ftCBs(r, "C>O@0", fmt.Sprintf("O>H@%g", tc.start.Seconds()))
				ftSet(r, tc.deadline)
				p := r.A()
				require.True(t, p.Probe)
				ftCBs(r, "C>O@0", fmt.Sprintf("O>H@%g", tc.start.Seconds()), fmt.Sprintf("H>H@%g", tc.deadline.Seconds()))
			})
		})
	}
}

// maxWaitLongIdle is TestFeatureHalfOpenMaxWait's subtest "long idle: the max
// wait has still passed".
//
// The spec has no idle limit: once the max wait has passed, the next
// call that finds half-open full restarts it, however long nobody called.
func maxWaitLongIdle(t *testing.T) {
	// 2 s: units of 2 ms; the lost probe's generation expires at 7 s.
	// 2^19 units are 1048.576 s.
	for _, at := range []time.Duration{1000 * time.Second, 1056 * time.Second, time.Hour, 24 * time.Hour} {
		t.Run(at.String(), func(t *testing.T) {
			forEachImpl(t, func(t *testing.T, mk maker) {
				r := mk.build(t, maxWaitCfg)
				r.X(core.Failure)
				r.At(5)
				r.A() // lost
				ftSet(r, at)
				p, err := r.B.Allow()
				require.NoError(t, err, "Allow at %v, %v after the max wait passed", at, at-7*time.Second)
				require.True(t, p.Probe)
				ftCBs(r, "C>O@0", "O>H@5", fmt.Sprintf("H>H@%g", at.Seconds()))
			})
		})
	}
}

// maxWaitDefault is TestFeatureHalfOpenMaxWait's subtest "default: a lost
// probe ends after max(OpenDuration, 1 min)".
//
// A lost probe must not wedge a breaker whose config never
// mentions the max wait. Zero is max(OpenDuration, 1 min), in the same
// coarse units as a configured wait; the rejections before it carry the
// time left (deadlines hand-computed below).
func maxWaitDefault(t *testing.T) {
	for _, tc := range []struct {
		name     string
		open     time.Duration
		wait     time.Duration // the default the config resolves to
		deadline time.Duration // the first reading that restarts
	}{
		// 60 s: units of ceil(60000/1024) = 59 ms; half-open at 5 s,
		// deadline ceil(65000/59) = 1102 units = 65.018 s.
		{"open 5s: the 1 min floor", 5 * time.Second, time.Minute, 65018 * time.Millisecond},
		// 90 s: units of ceil(90000/1024) = 88 ms; half-open at 90 s,
		// deadline ceil(180000/88) = 2046 units = 180.048 s.
		{"open 90s: the open duration", 90 * time.Second, 90 * time.Second, 180048 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			forEachImpl(t, func(t *testing.T, mk maker) {
				r := mk.build(t, core.Config{ConsecutiveFailures: 1, OpenDuration: tc.open})
				r.X(core.Failure)
				ftSet(r, tc.open)
				lost := r.A() // its Done never comes
				require.True(t, lost.Probe)
				for _, at := range []time.Duration{tc.open + time.Second, tc.open + tc.wait - time.Nanosecond, tc.deadline - time.Nanosecond} {
					ftSet(r, at)
					// The wait is the default HalfOpenFullWait (a tenth
					// of the open duration) until the max wait has less
					// left.
					ftHalfOpenFull(r, min(tc.deadline-at, tc.open/10))
					r.Is(core.HalfOpen)
				}
				ftCBs(r, "C>O@0", fmt.Sprintf("O>H@%g", tc.open.Seconds()))
				ftSet(r, tc.deadline)
				p := r.A() // H->H: the first probe of a new generation
				require.True(t, p.Probe)
				require.Equal(t, lost.Generation+1, p.Generation)
				ftCBs(r, "C>O@0", fmt.Sprintf("O>H@%g", tc.open.Seconds()), fmt.Sprintf("H>H@%g", tc.deadline.Seconds()))
				ftNoChange(r, "the lost probe's late Done", func() { r.B.Done(lost, nil) })
				ftNoChange(r, "the lost probe's late failure", func() { r.B.Done(lost, errFail) })
				r.D(p, core.Success)
				r.Is(core.Closed)
			})
		})
	}
}

// maxWaitForever is TestFeatureHalfOpenMaxWait's subtest "WaitForever: a lost
// probe keeps it half-open".
//
// WaitForever is the old default, now asked for by name: a lost probe
// keeps the breaker half-open, whatever the clock says, until a manual
// control; the rejections carry the half-open-full wait (a tenth of the
// open duration by default), so callers back off instead of spinning.
func maxWaitForever(t *testing.T) {
	forEachImpl(t, func(t *testing.T, mk maker) {
		r := mk.build(t, core.Config{ConsecutiveFailures: 1, OpenDuration: maxWaitOpen, MaxWaitInHalfOpen: core.WaitForever})
		r.X(core.Failure)
		r.At(5)
		r.A()
		for _, at := range []time.Duration{time.Hour, 400 * 24 * time.Hour, 50 * 365 * 24 * time.Hour} {
			ftSet(r, at)
			ftHalfOpenFull(r, maxWaitOpen/10)
			r.Is(core.HalfOpen)
		}
		ftCBs(r, "C>O@0", "O>H@5")
		r.B.Reset()
		r.A()
	})
}
