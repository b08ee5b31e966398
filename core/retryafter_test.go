package core_test

// Behavioural tests of retry-after hints (core.WithRetryAfter, RecordHint,
// MaxRetryAfter): every expected value is worked out from the doc comments
// (the spec), and every test runs against both implementations. Time moves
// only on the manual clock.

import (
	"context"
	"errors"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/casbreaker/casbreaker/core"
	"github.com/casbreaker/casbreaker/internal/breakers"
)

// The retry-after tests' own open duration, and their bound on hints
// (MaxRetryAfter).
const (
	hintOpen  = 5 * time.Second
	hintLimit = 60 * time.Second
)

// hintCfg is a rate rule with a ten-call minimum: a plain failure alone
// never trips.
var hintCfg = core.Config{WindowSize: 10, FailureRateThreshold: 50, OpenDuration: hintOpen, MaxRetryAfter: hintLimit}

func TestFeatureRetryAfterHint(t *testing.T) {
	t.Run("scenario", hintScenario)
	t.Run("closed trip lasts max(OpenDuration, min(hint, MaxRetryAfter))", hintClosedTrip)
	t.Run("half-open probe re-opens for max(backoff step, hint)", hintHalfOpenBackoff)
	t.Run("hint re-opens half-open with several probes; the others are stale", hintSeveralProbes)
	t.Run("hints off: a hinted failure is a plain failure", hintOff)
	t.Run("zero or negative hint: a plain failure", hintNotPositive)
	t.Run("hint found anywhere in the error tree", hintErrorTree)
	t.Run("WithRetryAfter wraps", hintWraps)
	t.Run("classifier decides first: Ignored and Success never trip", hintClassifierFirst)
	t.Run("stale permit with hint changes nothing", hintStalePermit)
	t.Run("metrics-only: a hint is a would-have-opened, never a rejection", hintMetricsOnly)
	t.Run("disabled and forced-open ignore hints", hintDisabledForcedOpen)
}

// hintScenario is TestFeatureRetryAfterHint's subtest "scenario".
func hintScenario(t *testing.T) {
	// The scenario: a dependency answers 429 with Retry-After: 30 s. The
	// breaker opens at once and stays open for the hint, not its own 5 s.
	forEachImpl(t, func(t *testing.T, mk maker) {
		r := mk.build(t, hintCfg)
		r.At(1)
		r.X(core.Success)
		r.Cnt(1, 0, 0, 0)
		p := r.A()
		r.B.Done(p, core.WithRetryAfter(errFail, 30*time.Second))
		r.Is(core.Open)
		ftCBs(r, "C>O@1")
		require.Equal(t, uint64(1), ftGen(r))
		ftWait(r, 30*time.Second)
		ftSet(r, 31*time.Second-time.Millisecond)
		ftWait(r, time.Millisecond)
		r.Is(core.Open)
		ftSet(r, 31*time.Second)
		r.Is(core.HalfOpen)
		q := r.A()
		require.True(t, q.Probe)
		r.D(q, core.Success)
		r.Is(core.Closed)
		ftCBs(r, "C>O@1", "O>H@31", "H>C@31")
	})
}

// hintClosedTrip is TestFeatureRetryAfterHint's subtest "closed trip lasts
// max(OpenDuration, min(hint, MaxRetryAfter))".
func hintClosedTrip(t *testing.T) {
	for _, tc := range []struct {
		hint, want time.Duration
	}{
		{time.Nanosecond, hintOpen},
		{2 * time.Second, hintOpen},
		{hintOpen, hintOpen},
		{hintOpen + time.Millisecond, hintOpen + time.Millisecond},
		{30 * time.Second, 30 * time.Second},
		{hintLimit, hintLimit},
		{hintLimit + time.Nanosecond, hintLimit},
		{100 * 365 * 24 * time.Hour, hintLimit},
		{time.Duration(math.MaxInt64), hintLimit},
	} {
		t.Run(tc.hint.String(), func(t *testing.T) {
			forEachImpl(t, func(t *testing.T, mk maker) {
				for _, via := range []string{"Done", "RecordHint"} {
					r := mk.build(t, hintCfg)
					r.At(2)
					p := r.A()
					require.NotPanics(t, func() {
						if via == "Done" {
							r.B.Done(p, core.WithRetryAfter(errFail, tc.hint))
						} else {
							r.B.RecordHint(p, tc.hint)
						}
					}, via)
					ftCBs(r, "C>O@2")
					ftWait(r, tc.want)
					// The exact reopen instant: the first whole millisecond
					// at or after 2 s + the open duration.
					end := 2*time.Second + tc.want
					end = (end + time.Millisecond - 1) / time.Millisecond * time.Millisecond
					ftSet(r, end-time.Nanosecond)
					r.Is(core.Open)
					r.Reject(core.ErrOpen)
					ftSet(r, end)
					r.Is(core.HalfOpen)
					r.A()
					ftCBs(r, "C>O@2", fmt.Sprintf("O>H@%g", end.Seconds()))
				}
			})
		})
	}
}

// hintHalfOpenBackoff is TestFeatureRetryAfterHint's subtest "half-open probe
// re-opens for max(backoff step, hint)".
func hintHalfOpenBackoff(t *testing.T) {
	c := core.Config{ConsecutiveFailures: 1, OpenDuration: hintOpen, OpenDurationBackoff: 2,
		MaxOpenDuration: 40 * time.Second, MaxRetryAfter: hintLimit}
	// Backoff table: 5 s, 10 s, 20 s, 40 s, 40 s ...
	forEachImpl(t, func(t *testing.T, mk maker) {
		r := mk.build(t, c)
		r.X(core.Failure) // step 0: 5 s
		ftWait(r, 5*time.Second)
		r.At(5)
		p := r.A()
		r.B.Done(p, core.WithRetryAfter(errFail, 8*time.Second)) // step 1: max(10 s, 8 s)
		r.Is(core.Open)
		ftWait(r, 10*time.Second)
		r.At(15)
		p = r.A()
		r.B.Done(p, core.WithRetryAfter(errFail, 30*time.Second)) // step 2: max(20 s, 30 s)
		ftWait(r, 30*time.Second)
		ftSet(r, 45*time.Second-time.Millisecond)
		ftWait(r, time.Millisecond)
		r.At(45)
		p = r.A()
		r.B.Done(p, errFail) // plain: step 3, 40 s: the hint did not disturb the steps
		ftWait(r, 40*time.Second)
		r.At(85)
		p = r.A()
		r.B.RecordHint(p, 50*time.Second) // step 3 (the last): max(40 s, 50 s)
		ftWait(r, 50*time.Second)
		r.At(135)
		p = r.A()
		r.B.RecordHint(p, 90*time.Second) // bounded: max(40 s, min(90 s, 60 s))
		ftWait(r, 60*time.Second)
		r.At(195)
		p = r.A()
		r.D(p, core.Success)
		r.Is(core.Closed)
		r.X(core.Failure) // closing reset the backoff
		ftWait(r, 5*time.Second)
		ftCBs(r, "C>O@0", "O>H@5", "H>O@5", "O>H@15", "H>O@15", "O>H@45", "H>O@45",
			"O>H@85", "H>O@85", "O>H@135", "H>O@135", "O>H@195", "H>C@195", "C>O@195")
	})
}

// hintSeveralProbes is TestFeatureRetryAfterHint's subtest "hint re-opens
// half-open with several probes; the others are stale".
func hintSeveralProbes(t *testing.T) {
	c := core.Config{ConsecutiveFailures: 1, OpenDuration: hintOpen, PermittedCallsInHalfOpen: 3, MaxRetryAfter: hintLimit}
	forEachImpl(t, func(t *testing.T, mk maker) {
		r := mk.build(t, c)
		r.X(core.Failure)
		r.At(5)
		p1, p2, p3 := r.A(), r.A(), r.A()
		r.D(p1, core.Success)
		r.B.Done(p2, core.WithRetryAfter(errFail, 20*time.Second))
		ftCBs(r, "C>O@0", "O>H@5", "H>O@5")
		ftWait(r, 20*time.Second)
		ftNoChange(r, "stale probe", func() { r.D(p3, core.Success) })
		ftNoChange(r, "stale probe hint", func() { r.B.RecordHint(p3, 40*time.Second) })
		ftWait(r, 20*time.Second)
	})
}

// hintOff is TestFeatureRetryAfterHint's subtest "hints off: a hinted failure
// is a plain failure".
func hintOff(t *testing.T) {
	c := core.Config{ConsecutiveFailures: 3, OpenDuration: hintOpen, PermittedCallsInHalfOpen: 1}
	forEachImpl(t, func(t *testing.T, mk maker) {
		r := mk.build(t, c)
		p := r.A()
		r.B.Done(p, core.WithRetryAfter(errFail, 30*time.Second))
		r.Is(core.Closed)
		require.Equal(t, uint64(1), r.B.Counts().ConsecutiveFailures)
		p = r.A()
		r.B.Done(p, ftErrAfter{30 * time.Second})
		require.Equal(t, uint64(2), r.B.Counts().ConsecutiveFailures)
		ftCBs(r)
		p = r.A()
		r.B.RecordHint(p, 30*time.Second) // the third failure trips on the rule
		ftCBs(r, "C>O@0")
		ftWait(r, hintOpen)
		r.At(5)
		p = r.A()
		r.B.Done(p, core.WithRetryAfter(errFail, 30*time.Second))
		ftWait(r, hintOpen) // no backoff configured, and the hint is ignored
	})
}

// hintNotPositive is TestFeatureRetryAfterHint's subtest "zero or negative
// hint: a plain failure".
func hintNotPositive(t *testing.T) {
	c := core.Config{ConsecutiveFailures: 3, OpenDuration: hintOpen, MaxRetryAfter: hintLimit}
	forEachImpl(t, func(t *testing.T, mk maker) {
		r := mk.build(t, c)
		consec := func(want uint64) {
			t.Helper()
			r.Is(core.Closed)
			require.Equal(t, want, r.B.Counts().ConsecutiveFailures)
		}
		p := r.A()
		r.B.Done(p, core.WithRetryAfter(errFail, 0))
		consec(1)
		p = r.A()
		r.B.Done(p, core.WithRetryAfter(errFail, -time.Second))
		consec(2)
		r.X(core.Success)
		consec(0)
		p = r.A()
		r.B.Done(p, fmt.Errorf("call: %w", ftErrAfter{-time.Hour}))
		consec(1)
		p = r.A()
		r.B.RecordHint(p, 0)
		consec(2)
		r.X(core.Success)
		p = r.A()
		r.B.RecordHint(p, -time.Nanosecond)
		consec(1)
		p = r.A()
		r.B.RecordHint(p, time.Duration(math.MinInt64))
		consec(2)
		ftCBs(r)
		p = r.A()
		r.B.RecordHint(p, 0)
		ftCBs(r, "C>O@0")
		ftWait(r, hintOpen)
	})
}

// hintErrorTree is TestFeatureRetryAfterHint's subtest "hint found anywhere
// in the error tree".
func hintErrorTree(t *testing.T) {
	c := core.Config{ConsecutiveFailures: 2, OpenDuration: hintOpen, MaxRetryAfter: hintLimit}
	for _, tc := range []struct {
		name string
		err  error
		hint time.Duration // RetryAfterOf; 0: a plain failure
	}{
		{"WithRetryAfter", core.WithRetryAfter(errFail, 30*time.Second), 30 * time.Second},
		{"custom type", ftErrAfter{20 * time.Second}, 20 * time.Second},
		{"custom wrapped %w", fmt.Errorf("GET /x: %w", ftErrAfter{20 * time.Second}), 20 * time.Second},
		{"custom in errors.Join", errors.Join(errors.New("other"), ftErrAfter{25 * time.Second}), 25 * time.Second},
		{"first positive, depth first", fmt.Errorf("x: %w", errors.Join(ftErrAfter{0}, fmt.Errorf("y: %w", ftErrAfter{40 * time.Second}), ftErrAfter{10 * time.Second})), 40 * time.Second},
		{"outer zero hint, inner positive", core.WithRetryAfter(ftErrAfter{15 * time.Second}, 0), 15 * time.Second},
		{"outer hint wins", core.WithRetryAfter(ftErrAfter{15 * time.Second}, 12*time.Second), 12 * time.Second},
		{"multiple %w", fmt.Errorf("%w and %w", errFail, core.WithRetryAfter(errFail, 12*time.Second)), 12 * time.Second},
		{"hint bounded", fmt.Errorf("x: %w", ftErrAfter{1000 * time.Hour}), 1000 * time.Hour},
		{"no positive hint", errors.Join(ftErrAfter{-time.Second}, ftErrAfter{0}), 0},
		{"plain error", errFail, 0},
		{"deadline exceeded", context.DeadlineExceeded, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.hint, core.RetryAfterOf(tc.err))
			forEachImpl(t, func(t *testing.T, mk maker) {
				r := mk.build(t, c)
				r.At(1)
				p := r.A()
				r.B.Done(p, tc.err)
				if tc.hint == 0 {
					r.Is(core.Closed)
					require.Equal(t, uint64(1), r.B.Counts().ConsecutiveFailures)
					ftCBs(r)
					return
				}
				ftCBs(r, "C>O@1")
				ftWait(r, min(tc.hint, hintLimit))
			})
		})
	}
}

// hintWraps is TestFeatureRetryAfterHint's subtest "WithRetryAfter wraps".
func hintWraps(t *testing.T) {
	forEachImpl(t, func(t *testing.T, mk maker) {
		require.NoError(t, core.WithRetryAfter(nil, time.Second))
		require.Zero(t, core.RetryAfterOf(nil))
		e := core.WithRetryAfter(ftErrAfter{time.Minute}, time.Second)
		require.ErrorIs(t, e, e)
		var ea ftErrAfter
		require.ErrorAs(t, e, &ea)
		require.Equal(t, time.Minute, ea.d)
		w := core.WithRetryAfter(errFail, time.Second)
		require.ErrorIs(t, w, errFail)
		require.Equal(t, errFail.Error(), w.Error())
		var h core.RetryAfterHint
		require.ErrorAs(t, w, &h)
		require.Equal(t, time.Second, h.RetryAfter())

		// Done with a nil error that went through WithRetryAfter is a success.
		r := mk.build(t, core.Config{ConsecutiveFailures: 1, MaxRetryAfter: hintLimit})
		p := r.A()
		r.B.Done(p, core.WithRetryAfter(nil, time.Hour))
		r.Is(core.Closed)
		ftCBs(r)
	})
}

// hintClassifierFirst is TestFeatureRetryAfterHint's subtest "classifier
// decides first: Ignored and Success never trip".
func hintClassifierFirst(t *testing.T) {
	c := core.Config{WindowSize: 10, FailureRateThreshold: 100, ConsecutiveFailures: 1, OpenDuration: hintOpen,
		MaxRetryAfter: hintLimit, Classifier: ftClassify}
	forEachImpl(t, func(t *testing.T, mk maker) {
		r := mk.build(t, c)
		p := r.A()
		r.B.Done(p, core.WithRetryAfter(errIgnored, 30*time.Second))
		r.Is(core.Closed)
		r.Cnt(0, 0, 0, 0)
		p = r.A()
		r.B.Done(p, fmt.Errorf("call: %w", core.WithRetryAfter(context.Canceled, 30*time.Second)))
		r.Cnt(0, 0, 0, 0)
		p = r.A()
		r.B.Done(p, core.WithRetryAfter(errFtOK, 30*time.Second))
		r.Cnt(1, 0, 0, 0)
		p = r.A()
		r.B.Done(p, errors.Join(errFtOK, ftErrAfter{30 * time.Second}))
		r.Cnt(2, 0, 0, 0)
		ftCBs(r)

		// In half-open an Ignored hinted outcome returns the slot, and a
		// Success one closes.
		r.X(core.Failure)
		ftCBs(r, "C>O@0")
		r.At(5)
		p = r.A()
		r.B.Done(p, core.WithRetryAfter(errIgnored, 30*time.Second))
		r.Is(core.HalfOpen)
		require.Equal(t, 0, r.B.Counts().ProbesInFlight)
		p = r.A()
		r.B.Done(p, core.WithRetryAfter(errFtOK, 30*time.Second))
		r.Is(core.Closed)
		ftCBs(r, "C>O@0", "O>H@5", "H>C@5")
	})
}

// hintStalePermit is TestFeatureRetryAfterHint's subtest "stale permit with
// hint changes nothing".
func hintStalePermit(t *testing.T) {
	c := core.Config{ConsecutiveFailures: 1, OpenDuration: hintOpen, PermittedCallsInHalfOpen: 2, MaxRetryAfter: hintLimit}
	forEachImpl(t, func(t *testing.T, mk maker) {
		r := mk.build(t, c)
		old := r.A()
		r.X(core.Failure) // open until 5 s
		ftNoChange(r, "stale closed permit, RecordHint", func() { r.B.RecordHint(old, 30*time.Second) })
		ftNoChange(r, "stale closed permit, Done", func() { r.B.Done(old, core.WithRetryAfter(errFail, 30*time.Second)) })
		ftWait(r, hintOpen) // openedAt untouched (R4)
		r.At(5)
		p1, p2 := r.A(), r.A()
		ftNoChange(r, "stale closed permit in half-open", func() { r.B.RecordHint(old, 30*time.Second) })
		require.Equal(t, 2, r.B.Counts().ProbesInFlight)
		r.D(p1, core.Failure) // re-open at 5 s for 5 s
		ftNoChange(r, "stale probe, Done", func() { r.B.Done(p2, core.WithRetryAfter(errFail, 30*time.Second)) })
		ftWait(r, hintOpen)
		r.At(10)
		q1, q2 := r.A(), r.A()
		ftNoChange(r, "stale probe in the next half-open", func() { r.B.RecordHint(p2, 30*time.Second) })
		require.Equal(t, 2, r.B.Counts().ProbesInFlight)
		r.D(q1, core.Success)
		r.D(q2, core.Success) // SuccessesToClose defaults to the 2 permitted
		r.Is(core.Closed)
		ftCBs(r, "C>O@0", "O>H@5", "H>O@5", "O>H@10", "H>C@10")
	})
}

// hintMetricsOnly is TestFeatureRetryAfterHint's subtest "metrics-only: a
// hint is a would-have-opened, never a rejection".
func hintMetricsOnly(t *testing.T) {
	c := core.Config{WindowSize: 10, FailureRateThreshold: 100, ConsecutiveFailures: 3, OpenDuration: hintOpen, MaxRetryAfter: hintLimit}
	forEachImpl(t, func(t *testing.T, mk maker) {
		r := mk.build(t, c)
		r.At(1)
		r.B.MetricsOnly()
		r.X(core.Success)
		r.X(core.Failure)
		r.Cnt(2, 1, 0, 0)
		require.Equal(t, uint64(1), r.B.Counts().ConsecutiveFailures)
		g := ftGen(r)
		p := r.A()
		r.B.Done(p, core.WithRetryAfter(errFail, 30*time.Second))
		ftCBs(r, "C>M@1", "M>M@1")
		r.Is(core.MetricsOnly)
		require.Equal(t, g+1, ftGen(r))
		r.Cnt(0, 0, 0, 0) // a fresh window
		require.Zero(t, r.B.Counts().ConsecutiveFailures)
		r.X(core.Success)
		r.At(20)
		r.X(core.Success)
		p = r.A()
		r.B.RecordHint(p, time.Hour)
		r.A()
		r.At(100)
		r.A()
		ftCBs(r, "C>M@1", "M>M@1", "M>M@20")
	})
}

// hintDisabledForcedOpen is TestFeatureRetryAfterHint's subtest "disabled and
// forced-open ignore hints".
func hintDisabledForcedOpen(t *testing.T) {
	c := core.Config{ConsecutiveFailures: 1, OpenDuration: hintOpen, MaxRetryAfter: hintLimit}
	forEachImpl(t, func(t *testing.T, mk maker) {
		r := mk.build(t, c)
		r.B.Disable()
		p := r.A()
		ftNoChange(r, "disabled", func() { r.B.Done(p, core.WithRetryAfter(errFail, 30*time.Second)) })
		p = r.A()
		ftNoChange(r, "disabled", func() { r.B.RecordHint(p, 30*time.Second) })
		r.Is(core.Disabled)
		require.NoError(t, r.B.ForceOpen(0))
		ftNoChange(r, "forced open", func() { r.B.RecordHint(p, 30*time.Second) })
		ftNoChange(r, "forced open, zero permit", func() { r.B.RecordHint(core.Permit{}, 30*time.Second) })
		r.Reject(core.ErrForcedOpen)
		ftCBs(r, "C>D@0", "D>F@0")
	})
}

// panicHint is a dependency error whose RetryAfter method panics (a buggy
// error type, or one built from a half-parsed response).
type panicHint struct{}

func (panicHint) Error() string             { return "throttled" }
func (panicHint) RetryAfter() time.Duration { panic("RetryAfter exploded") }

// ptrHint is an error type whose RetryAfter has a pointer receiver that
// reads a field: a typed nil *ptrHint returned as an error (the classic Go
// gotcha) is a non-nil error whose RetryAfter dereferences nil.
type ptrHint struct{ after time.Duration }

func (e *ptrHint) Error() string { return "throttled" }
func (e *ptrHint) RetryAfter() time.Duration {
	if e == nil {
		// What reading e.after would do, as an explicit panic: under the
		// qemu-user emulation of the GOARCH=386 run, a nil dereference is
		// a fatal signal instead of a recoverable panic.
		panic("runtime error: invalid memory address or nil pointer dereference")
	}
	return e.after
}

// In both implementations, a panic inside RetryAfterOf (a user error's
// RetryAfter or Unwrap method) runs in Done's error path, after the
// classifier returned Failure and before the outcome is recorded, so unless
// Done releases the permit as it unwinds, a half-open probe's slot leaks and,
// without a max wait in half-open, the breaker rejects every call with
// ErrHalfOpenFull forever (R10: no path leaks a probe slot; resilience4j
// leaked the same way from a throwing classifier, docs/regressions.md B07).
// Done releases it. The test asks for WaitForever because the default max
// wait would admit the call at 1000 s even with the slot leaked.
func TestPanickingRetryAfterReleasesProbe(t *testing.T) {
	var typedNil *ptrHint
	for name, bad := range map[string]error{"panicking RetryAfter": panicHint{}, "typed nil pointer": typedNil} {
		t.Run(name, func(t *testing.T) {
			forEachImpl(t, func(t *testing.T, mk maker) {
				r := mk.build(t, core.Config{ConsecutiveFailures: 1, OpenDuration: time.Second, MaxRetryAfter: time.Minute,
					MaxWaitInHalfOpen: core.WaitForever})
				r.X(core.Failure)
				r.Is(core.Open)
				r.At(1)
				p := r.A()
				require.True(t, p.Probe)
				require.Panics(t, func() { r.B.Done(p, bad) })
				// The probe's slot must have been released.
				require.Equal(t, 0, r.B.Counts().ProbesInFlight, "probe slot leaked")
				r.At(1000)
				_, err := r.B.Allow()
				require.NoError(t, err, "the breaker must admit a new probe")
			})
		})
	}
}

// Hints at the extremes give both implementations the same open deadline,
// exactly max(open duration at the step, min(hint, MaxRetryAfter)) rounded
// up to the millisecond; a hint of zero or less is a plain failure.
func TestHintExtremesAgree(t *testing.T) {
	hints := []time.Duration{math.MinInt64, -1, 0, 1, time.Millisecond - 1, time.Millisecond + 1,
		2 * time.Second, 5*time.Second - 1, 5 * time.Second, 5*time.Second + 1, math.MaxInt64}
	for _, start := range []time.Duration{0, 1234567, -5 * time.Second, math.MaxInt64 - 10*time.Minute} {
		for _, h := range hints {
			name := fmt.Sprintf("start=%d/hint=%d", start, h)
			cfg := core.Config{WindowSize: 10, MinimumNumberOfCalls: 10, FailureRateThreshold: 50,
				OpenDuration: time.Second, OpenDurationBackoff: 2, MaxOpenDuration: 4 * time.Second,
				MaxRetryAfter: 5 * time.Second, CollectMetrics: true, Classifier: classify}
			lf, mu := rigPair(t, cfg, start)
			for _, r := range []*rig{lf, mu} {
				r.B.Done(r.A(), core.WithRetryAfter(errFail, h)) // closed: trips at once when hinted
				if r.B.State() == core.Closed {
					require.LessOrEqual(t, h, time.Duration(0), name)
					require.Equal(t, uint64(1), r.B.Counts().Failures, name)
					require.NoError(t, r.B.ForceOpen(time.Second))
				}
				// Re-open from half-open with the hint: step 1 (2 s).
				r.Clock.Advance(10 * time.Second)
				r.B.Done(r.A(), core.WithRetryAfter(errFail, h))
				_, err := r.B.Allow()
				require.ErrorIs(t, err, core.ErrOpen, name)
			}
			_, e1 := lf.B.Allow()
			_, e2 := mu.B.Allow()
			require.True(t, breakers.SameError(e1, e2), "%s: lock-free %v, mutex %v", name, e1, e2)
			pl, _ := lf.B.Allow()
			pm, _ := mu.B.Allow()
			require.Equal(t, pm, pl, name)
			d := 2 * time.Second
			if h > d {
				d = min(h, 5*time.Second)
			}
			at := max(lf.Clock.Now(), 0) // the re-open's clock reading
			ms := time.Millisecond
			want := at/ms*ms + d/ms*ms + (at%ms+d%ms+ms-1)/ms*ms - at
			require.Equal(t, want, pl.RetryAfter, name)
			require.Equal(t, mu.CBs(), lf.CBs(), name)
			require.Equal(t, mu.B.Metrics(), lf.B.Metrics(), name)
		}
	}
}
