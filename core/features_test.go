package core_test

// Behavioural tests for the issue-5 features: retry-after hints, manual
// control, the half-open max wait, ramp-up after close and metrics. Every
// expected value is worked out from the doc comments (the spec), and every
// test runs against both implementations. Time moves only on the manual
// clock.

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/casbreaker/casbreaker/core"
)

// ftErrAfter is a dependency error carrying its own retry-after hint (an HTTP
// 429 with a Retry-After header, say).
type ftErrAfter struct{ d time.Duration }

func (e ftErrAfter) Error() string             { return fmt.Sprintf("throttled, retry after %v", e.d) }
func (e ftErrAfter) RetryAfter() time.Duration { return e.d }

// errFtOK is an error the feature classifier calls a success.
var errFtOK = errors.New("a success by the classifier")

// ftClassify: errIgnored is Ignored, errFtOK is Success, the rest default.
func ftClassify(err error) core.Outcome {
	switch {
	case errors.Is(err, errIgnored):
		return core.Ignored
	case errors.Is(err, errFtOK):
		return core.Success
	}
	return core.DefaultClassifier(err)
}

// ftSet moves the rig's clock to an exact reading.
func ftSet(r *rig, d time.Duration) { r.Clock.Set(d) }

// ftWait is Allow that must be refused with ErrOpen and exactly Wait want.
func ftWait(r *rig, want time.Duration) {
	r.t.Helper()
	p, err := r.B.Allow()
	require.ErrorIs(r.t, err, core.ErrOpen, "Allow at %v", r.Clock.Now())
	require.ErrorIs(r.t, err, core.ErrRejected)
	require.Equal(r.t, core.Permit{Wait: want}, p, "Allow at %v", r.Clock.Now())
	require.Equal(r.t, want, core.RetryAfterOf(err), "the rejection's RetryAfter at %v", r.Clock.Now())
}

// ftHalfOpenFull is Allow that must be refused with ErrHalfOpenFull and
// exactly Wait want: the time left of the half-open max wait.
func ftHalfOpenFull(r *rig, want time.Duration) {
	r.t.Helper()
	p, err := r.B.Allow()
	require.ErrorIs(r.t, err, core.ErrHalfOpenFull, "Allow at %v", r.Clock.Now())
	require.ErrorIs(r.t, err, core.ErrRejected)
	require.Equal(r.t, core.Permit{Wait: want}, p, "Allow at %v", r.Clock.Now())
	require.Equal(r.t, want, core.RetryAfterOf(err), "the rejection's RetryAfter at %v", r.Clock.Now())
}

// ftGen is the current generation.
func ftGen(r *rig) uint64 { return r.B.Counts().Generation }

// ftCBs asserts the notifications so far.
func ftCBs(r *rig, want ...string) {
	r.t.Helper()
	if want == nil {
		want = []string{}
	}
	require.Equal(r.t, want, r.CBs())
}

// ftNoChange runs fn and asserts it changed neither the counts, nor the
// state, nor the notifications.
func ftNoChange(r *rig, what string, fn func()) {
	r.t.Helper()
	c, s, cbs := r.B.Counts(), r.B.State(), r.CBs()
	fn()
	require.Equal(r.t, c, r.B.Counts(), what)
	require.Equal(r.t, s, r.B.State(), what)
	require.Equal(r.t, cbs, r.CBs(), what)
}

// ---------------------------------------------------------------------------
// Retry-after hints

func TestFeatureRetryAfterHint(t *testing.T) {
	const (
		open  = 5 * time.Second
		limit = 60 * time.Second
	)
	// A rate rule with a ten-call minimum: a plain failure alone never trips.
	cfg := core.Config{WindowSize: 10, FailureRateThreshold: 50, OpenDuration: open, MaxRetryAfter: limit}

	// The scenario: a dependency answers 429 with Retry-After: 30 s. The
	// breaker opens at once and stays open for the hint, not its own 5 s.
	forEachImpl(t, func(t *testing.T, mk maker) {
		r := mk.build(t, cfg)
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

	t.Run("closed trip lasts max(OpenDuration, min(hint, MaxRetryAfter))", func(t *testing.T) {
		for _, tc := range []struct {
			hint, want time.Duration
		}{
			{time.Nanosecond, open},
			{2 * time.Second, open},
			{open, open},
			{open + time.Millisecond, open + time.Millisecond},
			{30 * time.Second, 30 * time.Second},
			{limit, limit},
			{limit + time.Nanosecond, limit},
			{100 * 365 * 24 * time.Hour, limit},
			{time.Duration(math.MaxInt64), limit},
		} {
			t.Run(tc.hint.String(), func(t *testing.T) {
				forEachImpl(t, func(t *testing.T, mk maker) {
					for _, via := range []string{"Done", "RecordHint"} {
						r := mk.build(t, cfg)
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
	})

	t.Run("half-open probe re-opens for max(backoff step, hint)", func(t *testing.T) {
		c := core.Config{ConsecutiveFailures: 1, OpenDuration: open, OpenDurationBackoff: 2,
			MaxOpenDuration: 40 * time.Second, MaxRetryAfter: limit}
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
	})

	t.Run("hint re-opens half-open with several probes; the others are stale", func(t *testing.T) {
		c := core.Config{ConsecutiveFailures: 1, OpenDuration: open, PermittedCallsInHalfOpen: 3, MaxRetryAfter: limit}
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
	})

	t.Run("hints off: a hinted failure is a plain failure", func(t *testing.T) {
		c := core.Config{ConsecutiveFailures: 3, OpenDuration: open, PermittedCallsInHalfOpen: 1}
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
			ftWait(r, open)
			r.At(5)
			p = r.A()
			r.B.Done(p, core.WithRetryAfter(errFail, 30*time.Second))
			ftWait(r, open) // no backoff configured, and the hint is ignored
		})
	})

	t.Run("zero or negative hint: a plain failure", func(t *testing.T) {
		c := core.Config{ConsecutiveFailures: 3, OpenDuration: open, MaxRetryAfter: limit}
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
			ftWait(r, open)
		})
	})

	t.Run("hint found anywhere in the error tree", func(t *testing.T) {
		c := core.Config{ConsecutiveFailures: 2, OpenDuration: open, MaxRetryAfter: limit}
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
					ftWait(r, min(tc.hint, limit))
				})
			})
		}
	})

	t.Run("WithRetryAfter wraps", func(t *testing.T) {
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
			r := mk.build(t, core.Config{ConsecutiveFailures: 1, MaxRetryAfter: limit})
			p := r.A()
			r.B.Done(p, core.WithRetryAfter(nil, time.Hour))
			r.Is(core.Closed)
			ftCBs(r)
		})
	})

	t.Run("classifier decides first: Ignored and Success never trip", func(t *testing.T) {
		c := core.Config{WindowSize: 10, FailureRateThreshold: 100, ConsecutiveFailures: 1, OpenDuration: open,
			MaxRetryAfter: limit, Classifier: ftClassify}
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
	})

	t.Run("stale permit with hint changes nothing", func(t *testing.T) {
		c := core.Config{ConsecutiveFailures: 1, OpenDuration: open, PermittedCallsInHalfOpen: 2, MaxRetryAfter: limit}
		forEachImpl(t, func(t *testing.T, mk maker) {
			r := mk.build(t, c)
			old := r.A()
			r.X(core.Failure) // open until 5 s
			ftNoChange(r, "stale closed permit, RecordHint", func() { r.B.RecordHint(old, 30*time.Second) })
			ftNoChange(r, "stale closed permit, Done", func() { r.B.Done(old, core.WithRetryAfter(errFail, 30*time.Second)) })
			ftWait(r, open) // openedAt untouched (R4)
			r.At(5)
			p1, p2 := r.A(), r.A()
			ftNoChange(r, "stale closed permit in half-open", func() { r.B.RecordHint(old, 30*time.Second) })
			require.Equal(t, 2, r.B.Counts().ProbesInFlight)
			r.D(p1, core.Failure) // re-open at 5 s for 5 s
			ftNoChange(r, "stale probe, Done", func() { r.B.Done(p2, core.WithRetryAfter(errFail, 30*time.Second)) })
			ftWait(r, open)
			r.At(10)
			q1, q2 := r.A(), r.A()
			ftNoChange(r, "stale probe in the next half-open", func() { r.B.RecordHint(p2, 30*time.Second) })
			require.Equal(t, 2, r.B.Counts().ProbesInFlight)
			r.D(q1, core.Success)
			r.D(q2, core.Success) // SuccessesToClose defaults to the 2 permitted
			r.Is(core.Closed)
			ftCBs(r, "C>O@0", "O>H@5", "H>O@5", "O>H@10", "H>C@10")
		})
	})

	t.Run("metrics-only: a hint is a would-have-opened, never a rejection", func(t *testing.T) {
		c := core.Config{WindowSize: 10, FailureRateThreshold: 100, ConsecutiveFailures: 3, OpenDuration: open, MaxRetryAfter: limit}
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
	})

	t.Run("disabled and forced-open ignore hints", func(t *testing.T) {
		c := core.Config{ConsecutiveFailures: 1, OpenDuration: open, MaxRetryAfter: limit}
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
	})
}

// ---------------------------------------------------------------------------
// Manual control

func TestFeatureManualControl(t *testing.T) {
	const open = 5 * time.Second
	cfg := core.Config{ConsecutiveFailures: 1, OpenDuration: open}

	// The scenario: an operator forces the breaker open for maintenance,
	// then disables it, watches it in metrics-only mode, and resets it.
	forEachImpl(t, func(t *testing.T, mk maker) {
		r := mk.build(t, core.Config{WindowSize: 4, FailureRateThreshold: 50, OpenDuration: open})
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

	// enter drives a fresh rig into a state at 1 s and returns a permit
	// granted there, if the state grants any.
	states := []struct {
		from  core.State
		enter func(r *rig) *core.Permit
	}{
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
	// then checks what the target state does afterwards.
	controls := []struct {
		name string
		to   core.State
		do   func(r *rig)
		then func(t *testing.T, r *rig)
	}{
		{"ForceOpen(0)", core.ForcedOpen, func(r *rig) { require.NoError(r.t, r.B.ForceOpen(0)) }, func(t *testing.T, r *rig) {
			for _, adv := range []time.Duration{0, open, 400 * 24 * time.Hour, 50 * 365 * 24 * time.Hour} {
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
			ftWait(r, open)
		}},
	}
	for _, st := range states {
		for _, ctl := range controls {
			t.Run(fmt.Sprintf("%v/%s", st.from, ctl.name), func(t *testing.T) {
				forEachImpl(t, func(t *testing.T, mk maker) {
					r := mk.build(t, cfg)
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
			})
		}
	}

	t.Run("open but due: the control's from is Open", func(t *testing.T) {
		// State reports half-open once the open duration has passed (R5),
		// but no transition into half-open has been committed.
		forEachImpl(t, func(t *testing.T, mk maker) {
			r := mk.build(t, cfg)
			r.X(core.Failure)
			r.At(10)
			r.Is(core.HalfOpen)
			r.B.Reset()
			ftCBs(r, "C>O@0", "O>C@10")
		})
	})

	t.Run("ForceOpen rejects bad durations and changes nothing", func(t *testing.T) {
		forEachImpl(t, func(t *testing.T, mk maker) {
			for _, st := range states {
				r := mk.build(t, core.Config{WindowSize: 10, FailureRateThreshold: 100, ConsecutiveFailures: 1, OpenDuration: open})
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
			r := mk.build(t, cfg)
			require.NoError(t, r.B.ForceOpen(core.MaxOpenDurationLimit))
			ftWait(r, core.MaxOpenDurationLimit)
			ftCBs(r, "C>O@0")
		})
	})

	t.Run("ForceOpen(d) resets the backoff step", func(t *testing.T) {
		c := core.Config{ConsecutiveFailures: 1, OpenDuration: open, OpenDurationBackoff: 2, MaxOpenDuration: 40 * time.Second}
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
	})

	t.Run("disabled admits everything, records nothing, never trips", func(t *testing.T) {
		c := core.Config{WindowSize: 10, MinimumNumberOfCalls: 1, FailureRateThreshold: 1, FailureCountThreshold: 1,
			ConsecutiveFailures: 1, OpenDuration: open, MaxRetryAfter: time.Minute}
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
	})

	t.Run("metrics-only counts, never rejects, would-have-opened restarts the window", func(t *testing.T) {
		c := core.Config{WindowSize: 4, MinimumNumberOfCalls: 4, FailureRateThreshold: 50, OpenDuration: open}
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
	})

	t.Run("metrics-only keeps the run of failures", func(t *testing.T) {
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
	})

	t.Run("reset: fresh window and no backoff", func(t *testing.T) {
		c := core.Config{WindowSize: 4, FailureRateThreshold: 50, OpenDuration: open, OpenDurationBackoff: 2,
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
	})
}

// ---------------------------------------------------------------------------
// Half-open max wait

func TestFeatureHalfOpenMaxWait(t *testing.T) {
	const open = 5 * time.Second
	cfg := core.Config{ConsecutiveFailures: 1, OpenDuration: open, MaxWaitInHalfOpen: 2 * time.Second}

	// The scenario: the only probe's caller dies. Without a max wait the
	// breaker would stay half-open and full forever; with it, the first call
	// after 2 s becomes the first probe of a new generation.
	forEachImpl(t, func(t *testing.T, mk maker) {
		r := mk.build(t, cfg)
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

	t.Run("lost probe's failure is stale too; restarts repeat every max wait", func(t *testing.T) {
		forEachImpl(t, func(t *testing.T, mk maker) {
			r := mk.build(t, cfg)
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
			ftWait(r, open)
			ftCBs(r, "C>O@0", "O>H@5", "H>H@7", "H>H@9", "H>O@9")
		})
	})

	t.Run("not-full half-open does not restart", func(t *testing.T) {
		c := cfg
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
	})

	t.Run("full by successes restarts with none counted", func(t *testing.T) {
		c := cfg
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
	})

	t.Run("restart keeps the backoff step", func(t *testing.T) {
		c := cfg
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
	})

	// The max wait is kept in coarse units of max(1 ms, ceil(d/1024 in ms));
	// the deadline is the first unit boundary at or after start + d.
	t.Run("coarse unit boundary", func(t *testing.T) {
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
				c := cfg
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
	})

	// The spec has no idle limit: once the max wait has passed, the next
	// call that finds half-open full restarts it, however long nobody called.
	t.Run("long idle: the max wait has still passed", func(t *testing.T) {
		// 2 s: units of 2 ms; the lost probe's generation expires at 7 s.
		// 2^19 units are 1048.576 s.
		for _, at := range []time.Duration{1000 * time.Second, 1056 * time.Second, time.Hour, 24 * time.Hour} {
			t.Run(at.String(), func(t *testing.T) {
				forEachImpl(t, func(t *testing.T, mk maker) {
					r := mk.build(t, cfg)
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
	})

	// Issue 11: a lost probe must not wedge a breaker whose config never
	// mentions the max wait. Zero is max(OpenDuration, 1 min), in the same
	// coarse units as a configured wait; the rejections before it carry the
	// time left (deadlines hand-computed below).
	t.Run("default: a lost probe ends after max(OpenDuration, 1 min)", func(t *testing.T) {
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
	})

	// WaitForever is the old default, now asked for by name: a lost probe
	// keeps the breaker half-open, whatever the clock says, until a manual
	// control; the rejections carry the half-open-full wait (a tenth of the
	// open duration by default), so callers back off instead of spinning.
	t.Run("WaitForever: a lost probe keeps it half-open", func(t *testing.T) {
		forEachImpl(t, func(t *testing.T, mk maker) {
			r := mk.build(t, core.Config{ConsecutiveFailures: 1, OpenDuration: open, MaxWaitInHalfOpen: core.WaitForever})
			r.X(core.Failure)
			r.At(5)
			r.A()
			for _, at := range []time.Duration{time.Hour, 400 * 24 * time.Hour, 50 * 365 * 24 * time.Hour} {
				ftSet(r, at)
				ftHalfOpenFull(r, open/10)
				r.Is(core.HalfOpen)
			}
			ftCBs(r, "C>O@0", "O>H@5")
			r.B.Reset()
			r.A()
		})
	})
}

// ---------------------------------------------------------------------------
// Ramp-up after close

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

func TestFeatureRampUp(t *testing.T) {
	const (
		closeAt = 100 * time.Second
		unit    = 10 * time.Millisecond // ceil(10 s / 1024) = 9.77 ms, rounded up
		span    = 1000                  // units in 10 s
	)

	// The scenario: after half-open -> closed the admitted share grows
	// linearly from 0 % to 100 % over 10 s; then everything is admitted.
	var patterns [][]bool
	forEachImpl(t, func(t *testing.T, mk maker) {
		r := mk.build(t, ftRampCfg(0))
		ftCloseAt(r, closeAt)
		var all []bool

		// Every reading of the first unit: share 0 %.
		n, pat := ftSample(r, closeAt, 1000, 10*time.Microsecond)
		require.Zero(t, n, "share 0 at the instant of closing")
		all = append(all, pat...)

		for _, sec := range []int{1, 5, 9} {
			from := closeAt + time.Duration(sec)*time.Second
			const samples, step = 2000, 50 * time.Microsecond // across 100 ms
			var want float64
			for i := range samples {
				elapsed := (from + time.Duration(i)*step - closeAt) / unit
				want += float64(elapsed) / span
			}
			want /= samples
			n, pat := ftSample(r, from, samples, step)
			all = append(all, pat...)
			got := float64(n) / samples
			require.InDelta(t, want, got, 0.05, "admitted share %d s after closing", sec)
			r.Is(core.Closed)
		}

		// The last unit before the end: share 99.9 %.
		ftSet(r, closeAt+10*time.Second-time.Nanosecond)
		r.Is(core.Closed)

		// From the end on, everything.
		n, pat = ftSample(r, closeAt+10*time.Second, 2000, 50*time.Microsecond)
		require.Equal(t, 2000, n)
		all = append(all, pat...)
		n, _ = ftSample(r, closeAt+20*time.Second, 100, time.Second)
		require.Equal(t, 100, n)
		ftCBs(r, "C>O@99", "O>H@100", "H>C@100")
		patterns = append(patterns, all)
	})
	for i := 1; i < len(patterns); i++ {
		require.Equal(t, patterns[0], patterns[i], "both implementations decide every reading alike")
	}

	t.Run("a reading decides: same reading, same answer", func(t *testing.T) {
		forEachImpl(t, func(t *testing.T, mk maker) {
			r := mk.build(t, ftRampCfg(0))
			ftCloseAt(r, closeAt)
			for i := range 200 {
				ftSet(r, closeAt+5*time.Second+time.Duration(i)*time.Millisecond)
				_, err := r.B.Allow()
				for range 5 {
					_, again := r.B.Allow()
					require.Equal(t, err, again)
				}
			}
		})
	})

	t.Run("start percent", func(t *testing.T) {
		for _, tc := range []struct {
			start int
			want  float64
		}{{50, 0.5}, {25, 0.25}, {100, 1}} {
			t.Run(fmt.Sprint(tc.start), func(t *testing.T) {
				forEachImpl(t, func(t *testing.T, mk maker) {
					r := mk.build(t, ftRampCfg(tc.start))
					ftCloseAt(r, closeAt)
					// 2000 readings within the first unit: the start share.
					n, _ := ftSample(r, closeAt, 2000, 5*time.Microsecond)
					if tc.start == 100 {
						require.Equal(t, 2000, n)
					} else {
						require.InDelta(t, tc.want, float64(n)/2000, 0.05)
					}
					// Halfway: start + (100 - start) / 2, within 100 ms of 5 s.
					n, _ = ftSample(r, closeAt+5*time.Second, 2000, 50*time.Microsecond)
					mid := (float64(tc.start) + float64(100-tc.start)*0.5045) / 100
					if tc.start == 100 {
						require.Equal(t, 2000, n)
					} else {
						require.InDelta(t, mid, float64(n)/2000, 0.05)
					}
				})
			})
		}
	})

	t.Run("reset closes without ramp", func(t *testing.T) {
		forEachImpl(t, func(t *testing.T, mk maker) {
			r := mk.build(t, ftRampCfg(0))
			ftCloseAt(r, closeAt)
			r.Rejected()
			r.B.Reset() // closed -> closed, no ramp
			n, _ := ftSample(r, closeAt, 1000, 10*time.Microsecond)
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
	})

	t.Run("a trip during ramp works, and the next close ramps again", func(t *testing.T) {
		forEachImpl(t, func(t *testing.T, mk maker) {
			r := mk.build(t, ftRampCfg(0))
			ftCloseAt(r, closeAt)
			at := closeAt + 5*time.Second
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
	})

	t.Run("ramp applies after a forced open closes through half-open", func(t *testing.T) {
		forEachImpl(t, func(t *testing.T, mk maker) {
			r := mk.build(t, ftRampCfg(0))
			require.NoError(t, r.B.ForceOpen(time.Second))
			ftSet(r, time.Second)
			r.D(r.A(), core.Success)
			n, _ := ftSample(r, time.Second, 100, time.Microsecond)
			require.Zero(t, n)
			ftCBs(r, "C>O@0", "O>H@1", "H>C@1")
		})
	})

	// The spec has no idle limit: once RampUpDuration has passed after the
	// close, every call is admitted, however long nobody called.
	t.Run("long idle after close: the ramp is over", func(t *testing.T) {
		// 10 s: units of 10 ms; 2^18 units are 43.7 minutes.
		for _, idle := range []time.Duration{time.Minute, 45 * time.Minute, time.Hour, 3 * time.Hour} {
			t.Run(idle.String(), func(t *testing.T) {
				forEachImpl(t, func(t *testing.T, mk maker) {
					r := mk.build(t, ftRampCfg(0))
					ftCloseAt(r, closeAt)
					// The ramp ended at 110 s; nobody called since.
					at := closeAt + 10*time.Second + idle
					n, _ := ftSample(r, at, 1000, 10*time.Microsecond)
					require.Equal(t, 1000, n, "calls %v after the ramp ended", idle)
					ftCBs(r, "C>O@99", "O>H@100", "H>C@100")
				})
			})
		}
	})

	t.Run("never after New", func(t *testing.T) {
		forEachImpl(t, func(t *testing.T, mk maker) {
			r := mk.build(t, ftRampCfg(0))
			n, _ := ftSample(r, 0, 1000, 10*time.Microsecond)
			require.Equal(t, 1000, n)
			n, _ = ftSample(r, time.Second, 2000, 5*time.Millisecond)
			require.Equal(t, 2000, n)
			ftCBs(r)
		})
	})

	t.Run("off by default: no shedding after close", func(t *testing.T) {
		forEachImpl(t, func(t *testing.T, mk maker) {
			r := mk.build(t, core.Config{ConsecutiveFailures: 1, OpenDuration: time.Second})
			ftCloseAt(r, closeAt)
			n, _ := ftSample(r, closeAt, 1000, 10*time.Microsecond)
			require.Equal(t, 1000, n)
		})
	})
}

// ---------------------------------------------------------------------------
// Metrics

func ftMetricsCfg(collect bool) core.Config {
	return core.Config{WindowSize: 4, MinimumNumberOfCalls: 4, FailureRateThreshold: 50,
		SlowCallDurationThreshold: time.Second, OpenDuration: 5 * time.Second,
		MaxWaitInHalfOpen: 2 * time.Second, RampUpDuration: 10 * time.Second, MaxRetryAfter: time.Minute,
		Classifier: classify, CollectMetrics: collect}
}

// ftMetricsScript touches every counter and several transitions.
func ftMetricsScript(t *testing.T, r *rig) {
	old := r.A()
	p := r.A()
	r.At(2)
	r.D(p, core.Success) // slow: 2 s > 1 s
	r.X(core.Ignored)
	r.X(core.Success)
	r.X(core.Failure)
	r.X(core.Failure) // 2 of 4: trip
	r.Is(core.Open)
	r.Reject(core.ErrOpen)
	r.Reject(core.ErrOpen)
	r.D(old, core.Failure) // stale
	r.At(7)
	q1 := r.A()
	r.Reject(core.ErrHalfOpenFull)
	r.At(9)
	q2 := r.A()           // max wait: restart
	r.D(q1, core.Success) // stale
	r.D(q2, core.Success) // closes, ramp from 0 %
	r.Is(core.Closed)
	r.Reject(core.ErrRampingUp)
	r.Reject(core.ErrRampingUp)
	r.At(19) // the ramp is over
	r.X(core.Success)
	p = r.A()
	r.B.Done(p, core.WithRetryAfter(errFail, 30*time.Second))
	r.Is(core.Open)
	require.NoError(t, r.B.ForceOpen(0))
	r.Reject(core.ErrForcedOpen)
	r.Reject(core.ErrForcedOpen)
	r.Reject(core.ErrForcedOpen)
	r.B.Disable()
	r.X(core.Failure) // dropped
	r.X(core.Success) // dropped
	r.X(core.Ignored) // dropped
	r.B.MetricsOnly()
	r.X(core.Failure)
	r.X(core.Failure)
	r.X(core.Success)
	r.X(core.Success) // would have opened
	p = r.A()
	r.At(21)
	r.D(p, core.Success) // slow, in metrics-only
	r.B.Reset()
	r.B.RecordHint(old, 10*time.Second) // stale
	ftCBs(r, "C>O@2", "O>H@7", "H>H@9", "H>C@9", "C>O@19", "O>F@19", "F>D@19", "D>M@19", "M>M@19", "M>C@21")
}

func TestFeatureMetrics(t *testing.T) {
	want := core.Metrics{
		Admitted:             18,
		RejectedOpen:         2,
		RejectedHalfOpenFull: 1,
		RejectedForcedOpen:   3,
		RejectedRampUp:       2,
		Successes:            7,
		Failures:             5,
		Ignored:              1,
		SlowCalls:            2,
		Dropped:              6,
	}
	want.Transitions[core.Closed][core.Open] = 2
	want.Transitions[core.Open][core.HalfOpen] = 1
	want.Transitions[core.HalfOpen][core.HalfOpen] = 1
	want.Transitions[core.HalfOpen][core.Closed] = 1
	want.Transitions[core.Open][core.ForcedOpen] = 1
	want.Transitions[core.ForcedOpen][core.Disabled] = 1
	want.Transitions[core.Disabled][core.MetricsOnly] = 1
	want.Transitions[core.MetricsOnly][core.MetricsOnly] = 1
	want.Transitions[core.MetricsOnly][core.Closed] = 1

	// The scenario: one history, every counter exact.
	forEachImpl(t, func(t *testing.T, mk maker) {
		r := mk.build(t, ftMetricsCfg(true))
		require.Equal(t, core.Metrics{}, r.B.Metrics())
		ftMetricsScript(t, r)
		require.Equal(t, want, r.B.Metrics())
		// Reads change nothing; controls never reset the counters.
		require.Equal(t, want, r.B.Metrics())
		r.B.Reset()
		w := want
		w.Transitions[core.Closed][core.Closed]++
		require.Equal(t, w, r.B.Metrics())
	})

	t.Run("off by default", func(t *testing.T) {
		forEachImpl(t, func(t *testing.T, mk maker) {
			r := mk.build(t, ftMetricsCfg(false))
			ftMetricsScript(t, r)
			require.Equal(t, core.Metrics{}, r.B.Metrics())
		})
	})

	t.Run("probe outcomes", func(t *testing.T) {
		c := core.Config{ConsecutiveFailures: 1, OpenDuration: time.Second, PermittedCallsInHalfOpen: 2,
			Classifier: classify, CollectMetrics: true}
		forEachImpl(t, func(t *testing.T, mk maker) {
			r := mk.build(t, c)
			r.X(core.Failure)
			r.At(1)
			p1, p2 := r.A(), r.A()
			r.D(p1, core.Ignored) // the slot returns: Ignored
			r.D(p2, core.Failure) // re-open: Failures
			r.D(p1, core.Success) // stale: Dropped
			r.B.Done(p2, errFail) // Dropped
			m := r.B.Metrics()
			require.Equal(t, [5]uint64{3, 0, 2, 1, 2}, [5]uint64{m.Admitted, m.Successes, m.Failures, m.Ignored, m.Dropped})
			require.Equal(t, uint64(1), m.Transitions[core.HalfOpen][core.Open])

			// A probe outcome with no probe in flight in its own generation
			// (a second record for one permit) is dropped.
			r.At(2)
			q := r.A()
			r.D(q, core.Ignored)
			r.D(q, core.Ignored)
			m = r.B.Metrics()
			require.Equal(t, [3]uint64{4, 2, 3}, [3]uint64{m.Admitted, m.Ignored, m.Dropped})
			require.Equal(t, 0, r.B.Counts().ProbesInFlight)
			r.Is(core.HalfOpen)
		})
	})

	t.Run("no allocations", func(t *testing.T) {
		forEachImpl(t, func(t *testing.T, mk maker) {
			c := ftMetricsCfg(true)
			c.SlowCallDurationThreshold = 0
			c.OpenDuration = time.Second
			c.ConsecutiveFailures = 1 // for ftCloseAt
			hinted := core.WithRetryAfter(errFail, 10*time.Second)
			r := mk.build(t, c)
			allocs := func(what string, fn func()) {
				t.Helper()
				require.Zero(t, testing.AllocsPerRun(200, fn), what)
			}
			stale := r.A()
			allocs("Metrics", func() { _ = r.B.Metrics() })

			require.NoError(t, r.B.ForceOpen(0))
			allocs("forced open", func() {
				_, _ = r.B.Allow()
				r.B.Done(stale, errFail)
				r.B.Done(core.Permit{}, nil)
			})
			allocs("stale RecordHint", func() { r.B.RecordHint(stale, 10*time.Second) })
			allocs("stale Done with a hint", func() { r.B.Done(stale, hinted) })

			r.B.Disable()
			allocs("disabled", func() {
				p, _ := r.B.Allow()
				r.B.Done(p, errFail)
				p, _ = r.B.Allow()
				r.B.Done(p, nil)
				p, _ = r.B.Allow()
				r.B.Done(p, hinted)
				p, _ = r.B.Allow()
				r.B.Record(p, core.Ignored)
			})

			r.B.MetricsOnly()
			allocs("metrics-only", func() {
				p, _ := r.B.Allow()
				r.B.Done(p, nil)
				p, _ = r.B.Allow()
				r.B.Record(p, core.Ignored)
				_ = r.B.Counts()
			})

			r.B.Reset()
			ftCloseAt(r, 100*time.Second)
			ftSet(r, 105*time.Second)
			allocs("ramping", func() {
				r.Clock.Advance(time.Microsecond)
				if p, err := r.B.Allow(); err == nil {
					r.B.Done(p, nil)
				}
			})
			r.Is(core.Closed)
			allocs("Metrics again", func() { _ = r.B.Metrics() })
		})
	})
}

// ---------------------------------------------------------------------------
// No clock on the closed success path

// ftCountingClock counts its readings.
type ftCountingClock struct {
	c *core.ManualClock
	n atomic.Int64
}

func (c *ftCountingClock) Now() time.Duration { c.n.Add(1); return c.c.Now() }

func TestFeaturesNoClockOnClosedPath(t *testing.T) {
	base := core.Config{WindowSize: 10, FailureRateThreshold: 50, OpenDuration: time.Second,
		CollectMetrics: true, MaxWaitInHalfOpen: 2 * time.Second, MaxRetryAfter: 10 * time.Second}
	withRamp := base
	withRamp.RampUpDuration = 10 * time.Second
	for name, c := range map[string]core.Config{"metrics+maxwait+hints": base, "with ramp-up": withRamp} {
		t.Run(name, func(t *testing.T) {
			forEachImpl(t, func(t *testing.T, mk maker) {
				mc := core.NewManualClock(0)
				cc := &ftCountingClock{c: mc}
				c.Clock = cc
				r := mk.build(t, c)
				r.Clock = mc
				cc.n.Store(0)
				const n = 1000
				for range n {
					p, err := r.B.Allow()
					require.NoError(t, err)
					r.B.Done(p, nil)
				}
				require.Zero(t, cc.n.Load(), "closed Allow+Done(nil) read the clock")
				// Failures below the threshold (1 in 5) read none either.
				for i := range n {
					p, err := r.B.Allow()
					require.NoError(t, err)
					if i%5 == 0 {
						r.B.Done(p, errFail)
					} else {
						r.B.Done(p, nil)
					}
				}
				require.Zero(t, cc.n.Load(), "closed failures read the clock")
				require.Equal(t, core.Closed, r.B.Counts().State)
				require.Equal(t, uint64(2*n), r.B.Metrics().Admitted)

				if c.RampUpDuration == 0 {
					return
				}
				// After a ramp has ended, the path is clock-free again.
				for r.B.Counts().State == core.Closed {
					p, _ := r.B.Allow()
					r.B.Done(p, errFail)
				}
				mc.Set(time.Second)
				r.D(r.A(), core.Success)
				mc.Set(11 * time.Second)
				r.D(r.A(), core.Success) // the first call after the ramp may read it
				cc.n.Store(0)
				for range n {
					p, err := r.B.Allow()
					require.NoError(t, err)
					r.B.Done(p, nil)
				}
				require.Zero(t, cc.n.Load(), "closed after the ramp read the clock")
			})
		})
	}
}

// ---------------------------------------------------------------------------
// Concurrency: the new paths keep their one-winner rules under contention.

func TestFeaturesConcurrent(t *testing.T) {
	const workers = 16

	t.Run("hinted failures racing: one trip, the rest stale", func(t *testing.T) {
		forEachImpl(t, func(t *testing.T, mk maker) {
			for range rounds(50, 10) {
				r := mk.build(t, core.Config{ConsecutiveFailures: 1000, OpenDuration: time.Second,
					MaxRetryAfter: time.Minute, CollectMetrics: true})
				permits := make([]core.Permit, workers)
				for i := range permits {
					permits[i] = r.A()
				}
				parallel(workers, func(i int) {
					r.B.Done(permits[i], core.WithRetryAfter(errFail, time.Duration(i+10)*time.Second))
				})
				require.Len(t, r.CBs(), 1)
				require.Equal(t, "C>O@0", r.CBs()[0])
				m := r.B.Metrics()
				require.Equal(t, [3]uint64{workers, 1, workers - 1}, [3]uint64{m.Admitted, m.Failures, m.Dropped})
				// The winner's hint, whichever it was: 10 s .. 25 s.
				p, err := r.B.Allow()
				require.ErrorIs(t, err, core.ErrOpen)
				require.GreaterOrEqual(t, p.Wait, 10*time.Second)
				require.LessOrEqual(t, p.Wait, 25*time.Second)
			}
		})
	})

	t.Run("max-wait restart racing: one new generation, one probe", func(t *testing.T) {
		forEachImpl(t, func(t *testing.T, mk maker) {
			for range rounds(50, 10) {
				r := mk.build(t, core.Config{ConsecutiveFailures: 1, OpenDuration: 5 * time.Second,
					MaxWaitInHalfOpen: 2 * time.Second, PermittedCallsInHalfOpen: 3, CollectMetrics: true})
				r.X(core.Failure)
				r.At(5)
				lost := []core.Permit{r.A(), r.A(), r.A()}
				r.At(7)
				var admitted, odd atomic.Int64
				parallel(workers, func(int) {
					switch p, err := r.B.Allow(); {
					case err == nil && p.Probe:
						admitted.Add(1)
					case !errors.Is(err, core.ErrHalfOpenFull):
						odd.Add(1)
					}
				})
				require.Zero(t, odd.Load(), "a non-probe permit or another rejection")
				require.EqualValues(t, 3, admitted.Load(), "the new generation's three slots")
				require.Equal(t, []string{"C>O@0", "O>H@5", "H>H@7"}, r.CBs())
				require.Equal(t, 3, r.B.Counts().ProbesInFlight)
				for _, p := range lost {
					r.D(p, core.Success)
				}
				require.Equal(t, 3, r.B.Counts().ProbesInFlight)
				m := r.B.Metrics()
				require.Equal(t, [3]uint64{1 + 3 + 3, workers - 3, 3}, [3]uint64{m.Admitted, m.RejectedHalfOpenFull, m.Dropped})
			}
		})
	})

	t.Run("controls racing: one notification each, in order", func(t *testing.T) {
		forEachImpl(t, func(t *testing.T, mk maker) {
			r := mk.build(t, core.Config{ConsecutiveFailures: 1, OpenDuration: time.Second, CollectMetrics: true})
			n := rounds(200, 50)
			parallel(workers, func(i int) {
				for j := range n {
					switch (i + j) % 5 {
					case 0:
						r.B.Reset()
					case 1:
						r.B.Disable()
					case 2:
						r.B.MetricsOnly()
					case 3:
						_ = r.B.ForceOpen(0)
					default:
						_ = r.B.ForceOpen(time.Second)
					}
					if p, err := r.B.Allow(); err == nil {
						r.B.Done(p, nil)
					}
				}
			})
			tr := r.Transitions()
			total := workers * n
			require.Len(t, tr, total) // successes never trip; probes need the clock to move
			prev := core.Closed
			for i, x := range tr {
				require.Equal(t, uint64(i+1), x.Generation)
				require.Equal(t, prev, x.From, "notification %d", i)
				prev = x.To
			}
			require.Equal(t, prev, r.B.Counts().State)
			var sum uint64
			m := r.B.Metrics()
			for _, row := range m.Transitions {
				for _, v := range row {
					sum += v
				}
			}
			require.EqualValues(t, total, sum)
		})
	})

	t.Run("metrics exact under contention", func(t *testing.T) {
		forEachImpl(t, func(t *testing.T, mk maker) {
			r := mk.build(t, core.Config{WindowSize: 100, FailureRateThreshold: 100, CollectMetrics: true, Classifier: classify})
			n := rounds(500, 100)
			var rejected atomic.Int64
			run := func() {
				parallel(workers, func(i int) {
					for j := range n {
						p, err := r.B.Allow()
						if err != nil {
							rejected.Add(1)
						}
						if (i+j)%4 == 0 {
							r.B.Done(p, errIgnored)
						} else {
							r.B.Done(p, nil)
						}
					}
				})
			}
			total := uint64(workers * n)
			run()
			r.B.Disable()
			run()
			r.B.MetricsOnly()
			run()
			require.Zero(t, rejected.Load())
			m := r.B.Metrics()
			ign := total / 4
			require.Equal(t, 3*total, m.Admitted)
			require.Equal(t, 2*(total-ign), m.Successes)
			require.Equal(t, 2*ign, m.Ignored)
			require.Equal(t, total, m.Dropped)
			require.Zero(t, m.Failures)
		})
	})
}
