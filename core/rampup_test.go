package core_test

// Behavioural tests of ramp-up after close (RampUpDuration,
// RampUpStartPercent): every expected value is worked out from the doc
// comments (the spec), and every test runs against both implementations. Time
// moves only on the manual clock.

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/casbreaker/casbreaker/core"
)

// ftRampCfg closes through half-open with a 1 s open duration.
func ftRampCfg(start int) core.Config {
	return core.Config{ConsecutiveFailures: 1, OpenDuration: time.Second, RampUpDuration: 10 * time.Second,
		RampUpStartPercent: start}
}

// ftCloseAt trips the breaker at at-1s and closes it through a probe at at.
func ftCloseAt(r *rig, at time.Duration) {
	r.t.Helper()
	ftSet(r, at-time.Second)
	r.X(core.Failure)
	ftSet(r, at)
	p := r.A()
	require.True(r.t, p.Probe)
	r.D(p, core.Success)
	r.Is(core.Closed)
}

// ftSample makes n calls at readings from, from+step, ...; admitted calls
// succeed. Every rejection must be ErrRampingUp with a zero permit.
func ftSample(r *rig, from time.Duration, n int, step time.Duration) (admitted int, pattern []bool) {
	r.t.Helper()
	for i := range n {
		ftSet(r, from+time.Duration(i)*step)
		p, err := r.B.Allow()
		if err != nil {
			require.ErrorIs(r.t, err, core.ErrRampingUp, "Allow at %v", r.Clock.Now())
			require.ErrorIs(r.t, err, core.ErrRejected)
			require.Equal(r.t, core.Permit{}, p)
			pattern = append(pattern, false)
			continue
		}
		r.B.Done(p, nil)
		admitted++
		pattern = append(pattern, true)
	}
	return admitted, pattern
}

// The ramp-up tests close the breaker at rampCloseAt; a 10 s ramp moves in
// units of rampUnit, rampSpan of them.
const (
	rampCloseAt = 100 * time.Second
	rampUnit    = 10 * time.Millisecond // ceil(10 s / 1024) = 9.77 ms, rounded up
	rampSpan    = 1000                  // units in 10 s
)

func TestFeatureRampUp(t *testing.T) {
	t.Run("scenario", rampScenario)
	t.Run("a reading decides: same reading, same answer", rampSameReading)
	t.Run("start percent", rampStartPercent)
	t.Run("reset closes without ramp", rampReset)
	t.Run("a trip during ramp works, and the next close ramps again", rampTrip)
	t.Run("ramp applies after a forced open closes through half-open", rampAfterForcedOpen)
	t.Run("long idle after close: the ramp is over", rampLongIdle)
	t.Run("never after New", rampNeverAfterNew)
	t.Run("off by default: no shedding after close", rampOffByDefault)
}

// rampScenario is TestFeatureRampUp's subtest "scenario".
func rampScenario(t *testing.T) {
	// The scenario: after half-open -> closed the admitted share grows
	// linearly from 0 % to 100 % over 10 s; then everything is admitted.
	var patterns [][]bool
	forEachImpl(t, func(t *testing.T, mk maker) {
		r := mk.build(t, ftRampCfg(0))
		ftCloseAt(r, rampCloseAt)
		var all []bool

		// Every reading of the first unit: share 0 %.
		n, pat := ftSample(r, rampCloseAt, 1000, 10*time.Microsecond)
		require.Zero(t, n, "share 0 at the instant of closing")
		all = append(all, pat...)

		for _, sec := range []int{1, 5, 9} {
			from := rampCloseAt + time.Duration(sec)*time.Second
			const samples, step = 2000, 50 * time.Microsecond // across 100 ms
			var want float64
			for i := range samples {
				elapsed := (from + time.Duration(i)*step - rampCloseAt) / rampUnit
				want += float64(elapsed) / rampSpan
			}
			want /= samples
			n, pat := ftSample(r, from, samples, step)
			all = append(all, pat...)
			got := float64(n) / samples
			require.InDelta(t, want, got, 0.05, "admitted share %d s after closing", sec)
			r.Is(core.Closed)
		}

		// The last unit before the end: share 99.9 %.
		ftSet(r, rampCloseAt+10*time.Second-time.Nanosecond)
		r.Is(core.Closed)

		// From the end on, everything.
		n, pat = ftSample(r, rampCloseAt+10*time.Second, 2000, 50*time.Microsecond)
		require.Equal(t, 2000, n)
		all = append(all, pat...)
		n, _ = ftSample(r, rampCloseAt+20*time.Second, 100, time.Second)
		require.Equal(t, 100, n)
		ftCBs(r, "C>O@99", "O>H@100", "H>C@100")
		patterns = append(patterns, all)
	})
	for i := 1; i < len(patterns); i++ {
		require.Equal(t, patterns[0], patterns[i], "both implementations decide every reading alike")
	}
}

// rampSameReading is TestFeatureRampUp's subtest "a reading decides: same
// reading, same answer".
func rampSameReading(t *testing.T) {
	forEachImpl(t, func(t *testing.T, mk maker) {
		r := mk.build(t, ftRampCfg(0))
		ftCloseAt(r, rampCloseAt)
		for i := range 200 {
			ftSet(r, rampCloseAt+5*time.Second+time.Duration(i)*time.Millisecond)
			_, err := r.B.Allow()
			for range 5 {
				_, again := r.B.Allow()
				require.Equal(t, err, again)
			}
		}
	})
}

// rampStartPercent is TestFeatureRampUp's subtest "start percent".
func rampStartPercent(t *testing.T) {
	for _, tc := range []struct {
		start int
		want  float64
	}{{50, 0.5}, {25, 0.25}, {100, 1}} {
		t.Run(fmt.Sprint(tc.start), func(t *testing.T) {
			forEachImpl(t, func(t *testing.T, mk maker) {
				r := mk.build(t, ftRampCfg(tc.start))
				ftCloseAt(r, rampCloseAt)
				// 2000 readings within the first unit: the start share.
				n, _ := ftSample(r, rampCloseAt, 2000, 5*time.Microsecond)
				if tc.start == 100 {
					require.Equal(t, 2000, n)
				} else {
					require.InDelta(t, tc.want, float64(n)/2000, 0.05)
				}
				// Halfway: start + (100 - start) / 2, within 100 ms of 5 s.
				n, _ = ftSample(r, rampCloseAt+5*time.Second, 2000, 50*time.Microsecond)
				mid := (float64(tc.start) + float64(100-tc.start)*0.5045) / 100
				if tc.start == 100 {
					require.Equal(t, 2000, n)
				} else {
					require.InDelta(t, mid, float64(n)/2000, 0.05)
				}
			})
		})
	}
}

// rampReset is TestFeatureRampUp's subtest "reset closes without ramp".
func rampReset(t *testing.T) {
	forEachImpl(t, func(t *testing.T, mk maker) {
		r := mk.build(t, ftRampCfg(0))
		ftCloseAt(r, rampCloseAt)
		r.Rejected()
		r.B.Reset() // closed -> closed, no ramp
		n, _ := ftSample(r, rampCloseAt, 1000, 10*time.Microsecond)
		require.Equal(t, 1000, n)

		// From half-open.
		ftSet(r, 200*time.Second)
		r.X(core.Failure)
		ftSet(r, 201*time.Second)
		r.A()
		r.B.Reset()
		n, _ = ftSample(r, 201*time.Second, 1000, 10*time.Microsecond)
		require.Equal(t, 1000, n)

		// Metrics-only during a ramp ends it too.
		ftCloseAt(r, 300*time.Second)
		r.Rejected()
		r.B.MetricsOnly()
		n, _ = ftSample(r, 300*time.Second, 100, 10*time.Microsecond)
		require.Equal(t, 100, n)
		ftSet(r, 300*time.Second)
		r.B.Reset()
		n, _ = ftSample(r, 300*time.Second, 100, 10*time.Microsecond)
		require.Equal(t, 100, n)
		ftCBs(r, "C>O@99", "O>H@100", "H>C@100", "C>C@100", "C>O@200", "O>H@201", "H>C@201",
			"C>O@299", "O>H@300", "H>C@300", "C>M@300", "M>C@300")
	})
}

// rampTrip is TestFeatureRampUp's subtest "a trip during ramp works, and the
// next close ramps again".
func rampTrip(t *testing.T) {
	forEachImpl(t, func(t *testing.T, mk maker) {
		r := mk.build(t, ftRampCfg(0))
		ftCloseAt(r, rampCloseAt)
		at := rampCloseAt + 5*time.Second
		for {
			ftSet(r, at)
			p, err := r.B.Allow()
			if err == nil {
				r.B.Done(p, errFail)
				break
			}
			require.ErrorIs(t, err, core.ErrRampingUp) // a shed call is no failure
			r.Is(core.Closed)
			at += time.Millisecond // whole milliseconds: the open deadline is exact
		}
		r.Is(core.Open)
		ftWait(r, time.Second)
		r.Clock.Advance(time.Second)
		q := r.A()
		r.D(q, core.Success)
		r.Is(core.Closed)
		n, _ := ftSample(r, r.Clock.Now(), 100, time.Microsecond)
		require.Zero(t, n, "a new ramp from 0 %")
		require.Len(t, r.CBs(), 6)
	})
}

// rampAfterForcedOpen is TestFeatureRampUp's subtest "ramp applies after a
// forced open closes through half-open".
func rampAfterForcedOpen(t *testing.T) {
	forEachImpl(t, func(t *testing.T, mk maker) {
		r := mk.build(t, ftRampCfg(0))
		require.NoError(t, r.B.ForceOpen(time.Second))
		ftSet(r, time.Second)
		r.D(r.A(), core.Success)
		n, _ := ftSample(r, time.Second, 100, time.Microsecond)
		require.Zero(t, n)
		ftCBs(r, "C>O@0", "O>H@1", "H>C@1")
	})
}

// rampLongIdle is TestFeatureRampUp's subtest "long idle after close: the
// ramp is over".
//
// The spec has no idle limit: once RampUpDuration has passed after the
// close, every call is admitted, however long nobody called.
func rampLongIdle(t *testing.T) {
	// 10 s: units of 10 ms; 2^18 units are 43.7 minutes.
	for _, idle := range []time.Duration{time.Minute, 45 * time.Minute, time.Hour, 3 * time.Hour} {
		t.Run(idle.String(), func(t *testing.T) {
			forEachImpl(t, func(t *testing.T, mk maker) {
				r := mk.build(t, ftRampCfg(0))
				ftCloseAt(r, rampCloseAt)
				// The ramp ended at 110 s; nobody called since.
				at := rampCloseAt + 10*time.Second + idle
				n, _ := ftSample(r, at, 1000, 10*time.Microsecond)
				require.Equal(t, 1000, n, "calls %v after the ramp ended", idle)
				ftCBs(r, "C>O@99", "O>H@100", "H>C@100")
			})
		})
	}
}

// rampNeverAfterNew is TestFeatureRampUp's subtest "never after New".
func rampNeverAfterNew(t *testing.T) {
	forEachImpl(t, func(t *testing.T, mk maker) {
		r := mk.build(t, ftRampCfg(0))
		n, _ := ftSample(r, 0, 1000, 10*time.Microsecond)
		require.Equal(t, 1000, n)
		n, _ = ftSample(r, time.Second, 2000, 5*time.Millisecond)
		require.Equal(t, 2000, n)
		ftCBs(r)
	})
}

// rampOffByDefault is TestFeatureRampUp's subtest "off by default: no
// shedding after close".
func rampOffByDefault(t *testing.T) {
	forEachImpl(t, func(t *testing.T, mk maker) {
		r := mk.build(t, core.Config{ConsecutiveFailures: 1, OpenDuration: time.Second})
		ftCloseAt(r, rampCloseAt)
		n, _ := ftSample(r, rampCloseAt, 1000, 10*time.Microsecond)
		require.Equal(t, 1000, n)
	})
}
