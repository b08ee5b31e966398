package core

import (
	"fmt"
	"testing"
	"time"

	"github.com/casbreaker/casbreaker/internal/rulecases"
	"github.com/casbreaker/casbreaker/window"
)

// The lock-free breaker's rule arithmetic against the hand-computed tables
// of internal/rulecases. The baseline checks its own, independent code
// against the same tables (baseline/rules_test.go): the two share the
// expected values, never the code, so a bug in a rule is caught here or as
// a difference in the differential tests, and cannot hide on both sides.

func validated(t *testing.T, c Config) Settings {
	t.Helper()
	s, err := c.Validate()
	if err != nil {
		t.Fatalf("Validate(%+v): %v", c, err)
	}
	return s
}

func TestRules_Deadline(t *testing.T) {
	for _, c := range rulecases.Deadlines {
		if got := deadlineMillis(c.Now, c.D); got != c.Ms {
			t.Errorf("deadline(%d ns, %d ns) = %d ms, want %d", c.Now, c.D, got, c.Ms)
		}
		if got, want := deadline(c.Now, c.D), c.Ms%deadlineMod; got != want {
			t.Errorf("the word's deadline(%d ns, %d ns) = %d, want %d mod 2^36 = %d", c.Now, c.D, got, c.Ms, want)
		}
	}
	for _, c := range rulecases.Waits {
		if got := untilDeadline(c.Ms, c.Now); got != c.Wait {
			t.Errorf("wait for deadline %d ms at %d ns = %v, want %v", c.Ms, c.Now, got, c.Wait)
		}
	}
}

// coarseOf returns the coarse measure of d for both features that use one,
// built the way Validate builds them.
func coarseOf(t *testing.T, d time.Duration) map[string]coarse {
	t.Helper()
	s := validated(t, Config{ConsecutiveFailures: 1, MaxWaitInHalfOpen: d, RampUpDuration: d})
	return map[string]coarse{"max wait": s.halfOpenWait, "ramp-up": s.rampUp}
}

func TestRules_Coarse(t *testing.T) {
	for _, c := range rulecases.Coarses {
		for what, k := range coarseOf(t, c.D) {
			if k.unit != c.Unit || k.span != c.Span {
				t.Errorf("%s of %d ns: unit %v, span %d; want unit %v, span %d", what, c.D, k.unit, k.span, c.Unit, c.Span)
			}
		}
	}
	for _, c := range rulecases.CoarseDeadlines {
		s := validated(t, Config{ConsecutiveFailures: 1, MaxWaitInHalfOpen: c.D, RampUpDuration: c.D})
		got := [4]uint64{s.halfOpenUnits(c.Now), s.halfOpenDeadline(c.Now), s.rampUnits(c.Now), s.rampDeadline(c.Now)}
		if want := [4]uint64{c.At, c.Deadline, c.At, c.Deadline}; got != want {
			t.Errorf("D %d ns at %d ns: max wait units, deadline, ramp units, deadline %v; want %v", c.D, c.Now, got, want)
		}
	}
	// The max wait is on by default; WaitForever turns it off.
	off := validated(t, Config{ConsecutiveFailures: 1, MaxWaitInHalfOpen: WaitForever})
	if got := [4]uint64{off.halfOpenUnits(time.Hour), off.halfOpenDeadline(time.Hour), off.rampUnits(time.Hour), off.rampDeadline(time.Hour)}; got != [4]uint64{} {
		t.Errorf("features off: units and deadlines %v, want zeros", got)
	}
	// The default, max(60 s open duration, 1 min) = 60 s: units of
	// ceil(60000/1024) = 59 ms; at 1 h, floor(3600000/59) = 61016 units, and
	// a generation starting then expires at ceil(3660000/59) = 62034.
	def := validated(t, Config{ConsecutiveFailures: 1})
	if got := [2]uint64{def.halfOpenUnits(time.Hour), def.halfOpenDeadline(time.Hour)}; got != [2]uint64{61016, 62034} {
		t.Errorf("default max wait: units and deadline at 1 h %v, want [61016 62034]", got)
	}
	for _, c := range rulecases.Expireds {
		s := validated(t, Config{ConsecutiveFailures: 1, MaxWaitInHalfOpen: c.D, RampUpDuration: c.D})
		if got := s.halfOpenExpired(c.Remaining); got != c.Passed {
			t.Errorf("max wait %d ns, %d units left: passed %v, want %v", c.D, c.Remaining, got, c.Passed)
		}
		if got := s.rampOver(c.Remaining); got != c.Passed {
			t.Errorf("ramp-up %d ns, %d units left: over %v, want %v", c.D, c.Remaining, got, c.Passed)
		}
	}
}

func TestRules_RampHash(t *testing.T) {
	for _, c := range rulecases.Hashes {
		if got := rampHash(c.Now); got != c.Hash {
			t.Errorf("hash(%d) = %d, want %d", c.Now, got, c.Hash)
		}
	}
	for _, c := range rulecases.Ramps {
		s := validated(t, Config{ConsecutiveFailures: 1, RampUpDuration: c.D, RampUpStartPercent: c.StartPercent})
		if got := s.rampAdmits(c.Remaining, c.Now); got != c.Admitted {
			t.Errorf("ramp %v from %d%%, %d units left, reading %d: admitted %v, want %v", c.D, c.StartPercent, c.Remaining, c.Now, got, c.Admitted)
		}
	}
}

func TestRules_Backoff(t *testing.T) {
	for _, c := range rulecases.Backoffs {
		s := validated(t, Config{ConsecutiveFailures: 1, OpenDuration: c.Open, OpenDurationBackoff: c.Factor, MaxOpenDuration: c.Max})
		var got []time.Duration
		for step, i := uint8(0), 0; i < len(c.Steps); i, step = i+1, s.nextStep(step) {
			got = append(got, s.openDuration(step))
		}
		if fmt.Sprint(got) != fmt.Sprint(c.Steps) {
			t.Errorf("open %v x %v up to %v: %v, want %v", c.Open, c.Factor, c.Max, got, c.Steps)
		}
		// The 5-bit step never passes the last one, however many re-opens.
		step := uint8(0)
		for range 2 * MaxBackoffSteps {
			step = s.nextStep(step)
		}
		if step > MaxBackoffSteps || s.openDuration(step) != c.Steps[len(c.Steps)-1] {
			t.Errorf("open %v x %v up to %v: step %d after many re-opens, duration %v", c.Open, c.Factor, c.Max, step, s.openDuration(step))
		}
	}
}

func TestRules_Hint(t *testing.T) {
	for _, c := range rulecases.Hints {
		s := validated(t, Config{ConsecutiveFailures: 1, OpenDuration: c.Open, MaxRetryAfter: c.MaxRetryAfter})
		h := s.hint(c.D)
		if h != c.Bounded || s.openDurationHinted(0, h) != c.OpenFor {
			t.Errorf("max %v, open %v, hint %d ns: bounded %v, open for %v; want %v, %v", c.MaxRetryAfter, c.Open, c.D, h, s.openDurationHinted(0, h), c.Bounded, c.OpenFor)
		}
	}
}

func TestRules_Slow(t *testing.T) {
	for _, c := range rulecases.Slows {
		cfg := Config{ConsecutiveFailures: 1, SlowCallDurationThreshold: c.Threshold}
		s := validated(t, cfg)
		if got := s.isSlow(c.D); got != c.Slow || s.slowEnabled() != (c.Threshold > 0) {
			t.Errorf("threshold %v, call of %v: slow %v (enabled %v), want %v", c.Threshold, c.D, got, s.slowEnabled(), c.Slow)
		}
	}
}

func TestRules_Trip(t *testing.T) {
	for _, c := range rulecases.Trips {
		s := validated(t, tripConfig(c.Rule))
		w := window.Counts{Calls: c.Calls, Failures: c.Failures, SlowCalls: c.Slow}
		if got := s.shouldTrip(w, c.Consecutive); got != c.Trips {
			t.Errorf("%s: %+v with %d in a row: trips %v, want %v", c.Name, w, c.Consecutive, got, c.Trips)
		}
		// The ring and the buckets judge the window part with the rule
		// alone, in the swap that records the outcome.
		if c.Consecutive == 0 && s.rule.Trips(w) != c.Trips {
			t.Errorf("%s: trip.Rule.Trips(%+v) = %v, want %v", c.Name, w, !c.Trips, c.Trips)
		}
	}
}

// tripConfig is the Config of a trip-rule case.
func tripConfig(r rulecases.Rule) Config {
	c := Config{
		WindowSize:                r.WindowSize,
		MinimumNumberOfCalls:      r.MinimumNumberOfCalls,
		FailureRateThreshold:      r.FailureRateThreshold,
		SlowCallRateThreshold:     r.SlowCallRateThreshold,
		SlowCallDurationThreshold: r.SlowCallDurationThreshold,
		FailureCountThreshold:     r.FailureCountThreshold,
		ConsecutiveFailures:       r.ConsecutiveFailures,
	}
	if r.Timed {
		c.WindowType = TimeBased
	}
	return c
}
