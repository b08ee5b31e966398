package fuzz_test

import (
	"errors"
	"math"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/casbreaker/casbreaker/baseline"
	"github.com/casbreaker/casbreaker/core"
)

// configFields is the set of core.Config field names a ConfigError may name.
var configFields = func() map[string]bool {
	m := map[string]bool{}
	t := reflect.TypeFor[core.Config]()
	for i := range t.NumField() {
		m[t.Field(i).Name] = true
	}
	return m
}()

// FuzzConfig: configuration validation (R3) on arbitrary values, NaN and
// infinite backoff factors and the extremes of every integer included.
//
//   - Validate, core.New and baseline.New never panic.
//   - A rejection matches ErrInvalidConfig; every error it joins is a
//     *core.ConfigError (errors.As) that names a real Config field and says
//     so in its message; core.New and baseline.New reject with the same
//     message as Validate.
//   - Values R3 rules out are rejected naming their own field, never
//     clamped: rate thresholds outside 0..100, negative counts and
//     durations, window sizes and probe counts above their maxima, an
//     unknown window type, a bucket width that is not a whole divisor of
//     a second from 100 ms, or set for a count window.
//   - The extra argument's low four bits pick the bucket width
//     (fuzzWidths); its bit 0x10 moves the backoff argument to the jitter
//     fraction (OpenDurationJitter), and its bit 0x20 adds an open-duration
//     function: a jitter outside 0..1 (NaN included) is rejected naming
//     it, and so is a function beside a backoff factor above 1.
//   - An accepted config yields Settings within every limit (window size,
//     minimum calls >= 1, 1..127 probes, successes and failures to re-open, open durations in
//     1 ns..a year, never shrinking with the backoff step, the step itself
//     stopping at most at 31), keeps every non-zero value it was given, and
//     both constructors accept it.
func FuzzConfig(f *testing.F) {
	f.Add(uint8(0), 20, 10, 50, 0, int64(0), 0, 0, int64(5*time.Second), 0.0, int64(0), 1, 0, 0, uint8(0))
	f.Add(uint8(1), 60, 0, 0, 30, int64(time.Second), 3, 0, int64(time.Second), 2.0, int64(time.Minute), 3, 2, 2, uint8(0))
	f.Add(uint8(0), 0, 0, 0, 0, int64(0), 0, 5, int64(0), 0.0, int64(0), 0, 0, 0, uint8(0))
	f.Add(uint8(7), -1, -1, 101, -1, int64(-1), -1, -1, int64(-1), math.NaN(), int64(-1), 128, 128, 128, uint8(0))
	f.Add(uint8(0), 5, 10, 50, 0, int64(0), 0, 0, int64(0), 0.0, int64(0), 0, 0, -1, uint8(0))
	f.Add(uint8(1), 3601, 0, 100, 100, int64(0), 0, 0, int64(400*24*time.Hour), math.Inf(1), int64(0), 127, 127, 127, uint8(0))
	f.Add(uint8(0), 255, 255, 100, 0, int64(0), 255, math.MaxInt, int64(time.Millisecond), 1.01, int64(time.Second), 0, 0, 0, uint8(0))
	f.Add(uint8(0), 0, 0, 0, 0, int64(0), 0, 1, int64(time.Second), 0.25, int64(0), 0, 0, 0, uint8(0x10))
	f.Add(uint8(0), 0, 0, 0, 0, int64(0), 0, 1, int64(time.Second), 1.5, int64(0), 0, 0, 0, uint8(0x10))
	f.Add(uint8(0), 0, 0, 0, 0, int64(0), 0, 1, int64(time.Second), math.NaN(), int64(time.Minute), 0, 0, 0, uint8(0x30))
	f.Add(uint8(0), 0, 0, 0, 0, int64(0), 0, 1, int64(time.Second), 0.0, int64(time.Minute), 0, 0, 0, uint8(0x20))
	f.Add(uint8(0), 0, 0, 0, 0, int64(0), 0, 1, int64(time.Second), 2.0, int64(time.Minute), 0, 0, 0, uint8(0x20))
	f.Add(uint8(0), 0, 0, 0, 0, int64(0), 0, 1, int64(time.Second), 0.0, int64(0), 0, 0, 0, uint8(0x20))
	f.Add(uint8(1), 361, 0, 50, 0, int64(0), 0, 0, int64(0), 0.0, int64(0), 0, 0, 0, uint8(1)) // 361 s of 100 ms buckets
	f.Add(uint8(1), 720, 0, 50, 0, int64(0), 0, 0, int64(0), 0.0, int64(0), 0, 0, 0, uint8(5)) // 720 s of 500 ms buckets
	f.Add(uint8(0), 10, 0, 50, 0, int64(0), 0, 0, int64(0), 0.0, int64(0), 0, 0, 0, uint8(2))  // a width on a count window
	f.Add(uint8(1), 10, 0, 50, 0, int64(0), 0, 0, int64(0), 0.0, int64(0), 0, 0, 0, uint8(7))  // 150 ms: does not divide 1 s
	f.Fuzz(func(t *testing.T, wt uint8, size, minCalls, rate, slowRate int, slowDur int64, count, consec int,
		open int64, backoff float64, maxOpen int64, permitted, successes, failures int, extra uint8) {
		c := core.Config{
			WindowType:                core.WindowType(wt),
			BucketWidth:               fuzzWidths[extra&15],
			WindowSize:                size,
			MinimumNumberOfCalls:      minCalls,
			FailureRateThreshold:      rate,
			SlowCallRateThreshold:     slowRate,
			SlowCallDurationThreshold: time.Duration(slowDur),
			FailureCountThreshold:     count,
			ConsecutiveFailures:       consec,
			OpenDuration:              time.Duration(open),
			OpenDurationBackoff:       backoff,
			MaxOpenDuration:           time.Duration(maxOpen),
			PermittedCallsInHalfOpen:  permitted,
			SuccessesToClose:          successes,
			FailuresToReopen:          failures,
			Clock:                     core.NewManualClock(0),
		}
		if extra&0x10 != 0 {
			c.OpenDurationBackoff, c.OpenDurationJitter = 0, backoff
		}
		if extra&0x20 != 0 {
			c.OpenDurationFunc = func(int, error) time.Duration { return time.Duration(maxOpen) }
		}
		s, err := c.Validate()
		_, errCore := core.New(c)
		_, errBase := baseline.New(c)
		if err != nil {
			checkRejection(t, c, err)
			for name, e := range map[string]error{"core.New": errCore, "baseline.New": errBase} {
				if e == nil || e.Error() != err.Error() {
					t.Fatalf("%s: %v, want Validate's %v", name, e, err)
				}
			}
			return
		}
		if errCore != nil || errBase != nil {
			t.Fatalf("Validate accepted %+v but core.New says %v and baseline.New %v", c, errCore, errBase)
		}
		checkSettings(t, c, s)
	})
}

// fuzzWidths are the bucket widths FuzzConfig tries: zero (1 s), every
// valid one, and invalid ones of each kind.
var fuzzWidths = [16]time.Duration{0, 100 * time.Millisecond, 125 * time.Millisecond, 200 * time.Millisecond,
	250 * time.Millisecond, 500 * time.Millisecond, time.Second, 150 * time.Millisecond, 99 * time.Millisecond,
	-time.Second, time.Millisecond, 2 * time.Second, 100*time.Millisecond + 1, math.MaxInt64, math.MinInt64, 333 * time.Millisecond}

// validWidth is whether Validate must accept width for a time window: a
// whole number of milliseconds from 100 ms to 1 s that divides 1 s (zero
// means 1 s).
func validWidth(width time.Duration) bool {
	return width == 0 || width >= 100*time.Millisecond && width <= time.Second && width%time.Millisecond == 0 && time.Second%width == 0
}

// maxTimeWindow is the largest time window in seconds for a valid width.
func maxTimeWindow(width time.Duration) int {
	if width == 0 {
		width = time.Second
	}
	return core.MaxTimeBuckets / int(time.Second/width)
}

// checkRejection: every joined error is a *ConfigError naming a real field,
// and every value R3 rules out is named.
func checkRejection(t *testing.T, c core.Config, err error) {
	t.Helper()
	if !errors.Is(err, core.ErrInvalidConfig) {
		t.Fatalf("%v does not match ErrInvalidConfig", err)
	}
	errs := []error{err}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		errs = j.Unwrap()
	}
	named := map[string]bool{}
	for _, e := range errs {
		var ce *core.ConfigError
		if !errors.As(e, &ce) {
			t.Fatalf("%v (in %v) is not a *core.ConfigError", e, err)
		}
		if !configFields[ce.Field] || !strings.Contains(ce.Error(), "Config."+ce.Field) || ce.Problem == "" {
			t.Fatalf("%#v does not name a Config field in its message %q", ce, ce.Error())
		}
		named[ce.Field] = true
	}
	maxWindow := core.MaxCountWindow
	if c.WindowType == core.TimeBased {
		maxWindow = core.MaxTimeWindow
		if validWidth(c.BucketWidth) {
			maxWindow = maxTimeWindow(c.BucketWidth)
		}
	}
	for field, bad := range map[string]bool{
		"WindowType":                c.WindowType != core.CountBased && c.WindowType != core.TimeBased,
		"WindowSize":                c.WindowSize < 0 || c.WindowSize > maxWindow,
		"BucketWidth":               c.BucketWidth != 0 && (c.WindowType != core.TimeBased || !validWidth(c.BucketWidth)),
		"MinimumNumberOfCalls":      c.MinimumNumberOfCalls < 0,
		"FailureRateThreshold":      c.FailureRateThreshold < 0 || c.FailureRateThreshold > 100,
		"SlowCallRateThreshold":     c.SlowCallRateThreshold < 0 || c.SlowCallRateThreshold > 100,
		"SlowCallDurationThreshold": c.SlowCallDurationThreshold < 0,
		"FailureCountThreshold":     c.FailureCountThreshold < 0,
		"ConsecutiveFailures":       c.ConsecutiveFailures < 0,
		"OpenDuration":              c.OpenDuration < 0 || c.OpenDuration > core.MaxOpenDurationLimit,
		"PermittedCallsInHalfOpen":  c.PermittedCallsInHalfOpen < 0 || c.PermittedCallsInHalfOpen > core.MaxPermittedInHalf,
		"SuccessesToClose":          c.SuccessesToClose < 0 || c.SuccessesToClose > core.MaxPermittedInHalf,
		"FailuresToReopen":          c.FailuresToReopen < 0 || c.FailuresToReopen > core.MaxPermittedInHalf,
		"OpenDurationJitter":        !(c.OpenDurationJitter >= 0 && c.OpenDurationJitter <= 1),
		// Checked once the open duration and the factor are valid.
		"OpenDurationBackoff": c.OpenDurationFunc != nil && c.OpenDurationBackoff > 1 && !math.IsInf(c.OpenDurationBackoff, 1) &&
			c.OpenDuration >= 0 && c.OpenDuration <= core.MaxOpenDurationLimit,
	} {
		if bad && !named[field] {
			t.Fatalf("config %+v has a bad %s, but the rejection %v does not name it", c, field, err)
		}
	}
}

// checkSettings: an accepted config resolves within every limit and keeps
// every value it was given.
func checkSettings(t *testing.T, c core.Config, s core.Settings) {
	t.Helper()
	fail := func(what string) { t.Fatalf("config %+v accepted with settings %+v: %s", c, s, what) }
	maxWindow := core.MaxCountWindow
	if s.WindowType == core.TimeBased {
		maxWindow = maxTimeWindow(s.BucketWidth)
	}
	switch {
	case s.WindowSize < 0 || s.WindowSize > maxWindow:
		fail("window size out of range")
	case s.WindowType == core.TimeBased && s.WindowSize > 0 && (s.BucketWidth == 0 || !validWidth(s.BucketWidth)):
		fail("a time window without a valid bucket width")
	case (s.WindowType != core.TimeBased || s.WindowSize == 0) && s.BucketWidth != 0:
		fail("a bucket width without a time window")
	case s.WindowSize == 0 && (s.FailureRateThreshold > 0 || s.SlowCallRateThreshold > 0 || s.FailureCountThreshold > 0):
		fail("a window rule without a window")
	case s.FailureRateThreshold == 0 && s.SlowCallRateThreshold == 0 && s.FailureCountThreshold == 0 && s.ConsecutiveFailures == 0:
		fail("no trip rule")
	case s.MinimumNumberOfCalls < 1:
		fail("minimum calls below 1")
	case s.WindowType == core.CountBased && s.WindowSize > 0 && s.MinimumNumberOfCalls > s.WindowSize:
		fail("minimum calls above the count window")
	case s.PermittedCallsInHalfOpen < 1 || s.PermittedCallsInHalfOpen > core.MaxPermittedInHalf:
		fail("permitted half-open calls out of range")
	case s.SuccessesToClose < 1 || s.SuccessesToClose > core.MaxPermittedInHalf:
		fail("successes to close out of range")
	case s.FailuresToReopen < 1 || s.FailuresToReopen > core.MaxPermittedInHalf:
		fail("failures to re-open out of range")
	case s.Classifier == nil || s.Clock == nil:
		fail("no classifier or clock")
	}
	for name, kept := range map[string]bool{
		"WindowSize":                c.WindowSize == 0 || s.WindowSize == c.WindowSize,
		"BucketWidth":               c.BucketWidth == 0 || s.BucketWidth == c.BucketWidth,
		"MinimumNumberOfCalls":      c.MinimumNumberOfCalls == 0 || s.MinimumNumberOfCalls == c.MinimumNumberOfCalls,
		"FailureRateThreshold":      s.FailureRateThreshold == c.FailureRateThreshold,
		"SlowCallRateThreshold":     s.SlowCallRateThreshold == c.SlowCallRateThreshold,
		"SlowCallDurationThreshold": s.SlowCallDurationThreshold == c.SlowCallDurationThreshold,
		"FailureCountThreshold":     s.FailureCountThreshold == c.FailureCountThreshold,
		"ConsecutiveFailures":       s.ConsecutiveFailures == c.ConsecutiveFailures,
		"PermittedCallsInHalfOpen":  c.PermittedCallsInHalfOpen == 0 || s.PermittedCallsInHalfOpen == c.PermittedCallsInHalfOpen,
		"SuccessesToClose":          c.SuccessesToClose == 0 || s.SuccessesToClose == c.SuccessesToClose,
		"FailuresToReopen":          c.FailuresToReopen == 0 || s.FailuresToReopen == c.FailuresToReopen,
		"OpenDuration":              c.OpenDuration == 0 || s.OpenDuration == c.OpenDuration,
		"OpenDurationBackoff":       c.OpenDurationBackoff == 0 || s.OpenDurationBackoff == c.OpenDurationBackoff,
		"MaxOpenDuration":           c.MaxOpenDuration == 0 || s.MaxOpenDuration == c.MaxOpenDuration,
		"OpenDurationJitter":        s.OpenDurationJitter == c.OpenDurationJitter,
		"OpenDurationFunc":          (s.OpenDurationFunc == nil) == (c.OpenDurationFunc == nil),
	} {
		if !kept {
			fail(name + " was changed")
		}
	}
	switch f := s.OpenDurationBackoff; {
	case s.OpenDuration <= 0 || s.MaxOpenDuration < s.OpenDuration || s.MaxOpenDuration > core.MaxOpenDurationLimit:
		fail("open durations out of range")
	case math.IsNaN(f) || math.IsInf(f, 0) || f < 1:
		fail("backoff factor below 1")
	case f == 1 && s.MaxOpenDuration != s.OpenDuration && s.OpenDurationFunc == nil:
		fail("a maximum open duration without backoff or function")
	case s.OpenDurationFunc != nil && (f != 1 || c.MaxOpenDuration == 0):
		fail("an open-duration function with a backoff, or without its bound")
	}
	if s.OpenDurationFunc != nil {
		return // the function decides each duration, within the bound checked above
	}
	// R4's backoff, each re-open the last duration times the factor up to
	// the maximum, reaches the maximum within the 31 re-opens the state
	// word's 5-bit step counts (docs/design.md, Widths).
	d := s.OpenDuration
	for i := 0; d < s.MaxOpenDuration; i++ {
		if i == core.MaxBackoffSteps {
			fail("open duration below the maximum after " + strconv.Itoa(i) + " re-opens")
		}
		if next := float64(d) * s.OpenDurationBackoff; next >= float64(s.MaxOpenDuration) {
			d = s.MaxOpenDuration
		} else if d = time.Duration(next); d <= 0 {
			fail("open duration not positive")
		}
	}
}
