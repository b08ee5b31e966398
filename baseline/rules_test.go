package baseline

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/casbreaker/casbreaker/core"
	"github.com/casbreaker/casbreaker/internal/rulecases"
)

// The baseline's own rule code against the hand-computed tables of
// internal/rulecases, the same tables core/rules_test.go holds core's code
// to. The two implementations share these expected values and the
// validated configuration, never rule code.

func validated(t *testing.T, c core.Config) *core.Settings {
	t.Helper()
	s, err := c.Validate()
	if err != nil {
		t.Fatalf("Validate(%+v): %v", c, err)
	}
	return &s
}

func TestRules_Deadline(t *testing.T) {
	for _, c := range rulecases.Deadlines {
		if got := openDeadline(c.Now, c.D); got != c.Ms {
			t.Errorf("deadline(%d ns, %d ns) = %d ms, want %d", c.Now, c.D, got, c.Ms)
		}
	}
	for _, c := range rulecases.Waits {
		if got := untilOpenDeadline(c.Ms, c.Now); got != c.Wait {
			t.Errorf("wait for deadline %d ms at %d ns = %v, want %v", c.Ms, c.Now, got, c.Wait)
		}
	}
}

// spansOf returns the spans a breaker with max wait and ramp-up d uses.
func spansOf(t *testing.T, d time.Duration) map[string]span {
	t.Helper()
	b, err := New(core.Config{ConsecutiveFailures: 1, MaxWaitInHalfOpen: d, RampUpDuration: d})
	if err != nil {
		t.Fatal(err)
	}
	return map[string]span{"max wait": b.maxWait, "ramp-up": b.ramp}
}

func TestRules_Coarse(t *testing.T) {
	for _, c := range rulecases.Coarses {
		for what, s := range spansOf(t, c.D) {
			if s.unit != uint64(c.Unit) || s.units != c.Span {
				t.Errorf("%s of %d ns: unit %d ns, span %d; want unit %v, span %d", what, c.D, s.unit, s.units, c.Unit, c.Span)
			}
		}
	}
	for _, c := range rulecases.CoarseDeadlines {
		for what, s := range spansOf(t, c.D) {
			if at, dl := s.at(c.Now), s.deadline(c.Now); at != c.At || dl != c.Deadline {
				t.Errorf("%s %d ns at %d ns: %d units, deadline %d; want %d, %d", what, c.D, c.Now, at, dl, c.At, c.Deadline)
			}
		}
	}
	for _, c := range rulecases.Expireds {
		for what, s := range spansOf(t, c.D) {
			if got := s.over(c.Remaining); got != c.Passed {
				t.Errorf("%s %d ns, %d units left: passed %v, want %v", what, c.D, c.Remaining, got, c.Passed)
			}
		}
	}
	// left is the signed difference the rule reads.
	s := newSpan(1025 * time.Millisecond)
	if l := s.left(s.deadline(0), 0); l != 513 {
		t.Errorf("a deadline set at 0 is %d units ahead, want 513", l)
	}
	if l := s.left(513, 2*time.Second); l != -487 {
		t.Errorf("deadline 513 at 2 s (1000 units of 2 ms): %d units left, want -487", l)
	}
	if off := newSpan(0); off.unit != 0 {
		t.Errorf("a zero duration has unit %d, want 0 (off)", off.unit)
	}
}

func TestRules_RampHash(t *testing.T) {
	for _, c := range rulecases.Hashes {
		if got := uint32(fmix64(uint64(c.Now)) >> 32); got != c.Hash {
			t.Errorf("hash(%d) = %d, want %d", c.Now, got, c.Hash)
		}
	}
	for _, c := range rulecases.Ramps {
		s := newSpan(c.D)
		if got := s.admits(c.StartPercent, c.Remaining, c.Now); got != c.Admitted {
			t.Errorf("ramp %v from %d%%, %d units left, reading %d: admitted %v, want %v", c.D, c.StartPercent, c.Remaining, c.Now, got, c.Admitted)
		}
	}
}

func TestRules_Backoff(t *testing.T) {
	for _, c := range rulecases.Backoffs {
		s := validated(t, core.Config{ConsecutiveFailures: 1, OpenDuration: c.Open, OpenDurationBackoff: c.Factor, MaxOpenDuration: c.Max})
		got := []time.Duration{s.OpenDuration}
		for len(got) < len(c.Steps) {
			got = append(got, backoff(s, got[len(got)-1]))
		}
		if fmt.Sprint(got) != fmt.Sprint(c.Steps) {
			t.Errorf("open %v x %v up to %v: %v, want %v", c.Open, c.Factor, c.Max, got, c.Steps)
		}
	}
}

func TestRules_Hint(t *testing.T) {
	for _, c := range rulecases.Hints {
		s := validated(t, core.Config{ConsecutiveFailures: 1, OpenDuration: c.Open, MaxRetryAfter: c.MaxRetryAfter})
		if h := bound(s, c.D); h != c.Bounded || hinted(s.OpenDuration, h) != c.OpenFor {
			t.Errorf("max %v, open %v, hint %d ns: bounded %v; want %v, open for %v", c.MaxRetryAfter, c.Open, c.D, h, c.Bounded, c.OpenFor)
		}
	}
}

func TestRules_Slow(t *testing.T) {
	for _, c := range rulecases.Slows {
		s := validated(t, core.Config{ConsecutiveFailures: 1, SlowCallDurationThreshold: c.Threshold})
		if got := isSlow(s, c.D); got != c.Slow {
			t.Errorf("threshold %v, call of %v: slow %v, want %v", c.Threshold, c.D, got, c.Slow)
		}
	}
}

func TestRules_Trip(t *testing.T) {
	for _, c := range rulecases.Trips {
		r := c.Rule
		cfg := core.Config{
			WindowSize:                r.WindowSize,
			MinimumNumberOfCalls:      r.MinimumNumberOfCalls,
			FailureRateThreshold:      r.FailureRateThreshold,
			SlowCallRateThreshold:     r.SlowCallRateThreshold,
			SlowCallDurationThreshold: r.SlowCallDurationThreshold,
			FailureCountThreshold:     r.FailureCountThreshold,
			ConsecutiveFailures:       r.ConsecutiveFailures,
		}
		if r.Timed {
			cfg.WindowType = core.TimeBased
		}
		w := windowCounts{n: c.Calls, f: c.Failures, s: c.Slow}
		if got := trips(validated(t, cfg), w, c.Consecutive); got != c.Trips {
			t.Errorf("%s: %+v with %d in a row: trips %v, want %v", c.Name, w, c.Consecutive, got, c.Trips)
		}
	}
}

type hintErr struct {
	d     time.Duration
	inner error
}

func (e hintErr) Error() string             { return "hinted" }
func (e hintErr) RetryAfter() time.Duration { return e.d }
func (e hintErr) Unwrap() error             { return e.inner }

func TestRules_ClassifyAndHint(t *testing.T) {
	plain := errors.New("plain")
	for _, c := range []struct {
		err  error
		want core.Outcome
	}{
		{plain, core.Failure},
		{context.DeadlineExceeded, core.Failure},
		{context.Canceled, core.Ignored},
		{fmt.Errorf("call: %w", context.Canceled), core.Ignored},
		{errors.Join(plain, context.Canceled), core.Ignored},
	} {
		if got := classify(c.err); got != c.want {
			t.Errorf("classify(%v) = %v, want %v", c.err, got, c.want)
		}
	}
	for _, c := range []struct {
		err  error
		want time.Duration
	}{
		{plain, 0},
		{hintErr{d: time.Second}, time.Second},
		{hintErr{d: -time.Second}, 0},
		{hintErr{d: 0, inner: hintErr{d: 3}}, 3}, // a hint of zero is none: look further down
		{hintErr{d: 2, inner: hintErr{d: 3}}, 2},
		{fmt.Errorf("a: %w", fmt.Errorf("b: %w", hintErr{d: 5})), 5},
		{errors.Join(plain, hintErr{d: -1}, hintErr{d: 7}, hintErr{d: 8}), 7}, // depth first, in order
		{errors.Join(fmt.Errorf("x: %w", hintErr{d: 9}), hintErr{d: 7}), 9},
		{fmt.Errorf("two: %w, %w", hintErr{d: 0}, hintErr{d: 4}), 4},
	} {
		if got := retryAfter(c.err); got != c.want {
			t.Errorf("retryAfter(%#v) = %v, want %v", c.err, got, c.want)
		}
	}
}
