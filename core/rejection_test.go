package core_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/casbreaker/casbreaker/core"
)

// reasons are the four rejection reasons.
var reasons = []error{core.ErrOpen, core.ErrHalfOpenFull, core.ErrForcedOpen, core.ErrRampingUp}

// rejectedFor asserts that err is a rejection for want and no other
// reason, and that it asks for wait, and returns err.
func rejectedFor(t *testing.T, err, want error, wait time.Duration, where string) {
	t.Helper()
	require.ErrorIs(t, err, core.ErrRejected, where)
	for _, r := range reasons {
		require.Equal(t, r == want, errors.Is(err, r), "%s: errors.Is(%v, %v)", where, err, r)
	}
	require.Equal(t, want.Error(), err.Error(), where)
	require.Equal(t, wait, core.RetryAfterOf(err), "%s: the rejection's wait", where)
	var h core.RetryAfterHint
	require.True(t, errors.As(err, &h), where)
}

// A rejection says when to try again, through Allow and through Do, for
// every reason: the error's RetryAfter is the Permit's Wait at the same
// reading, and errors.Is still tells the reasons apart.
func TestRejectionSaysWhen(t *testing.T) {
	forEachImpl(t, func(t *testing.T, mk maker) {
		ctx := context.Background()
		call := func(context.Context) (int, error) { return 1, nil }
		r := mk.build(t, core.Config{ConsecutiveFailures: 1, OpenDuration: 10 * time.Second, RampUpDuration: time.Minute})
		r.X(core.Failure) // closed -> open at 0

		r.At(4)
		p, err := r.B.Allow()
		require.Equal(t, 6*time.Second, p.RetryAfter)
		rejectedFor(t, err, core.ErrOpen, 6*time.Second, "open, Allow")
		_, err = core.Do(ctx, r.B, call)
		rejectedFor(t, err, core.ErrOpen, 6*time.Second, "open, Do")
		// The wait is read when asked: an error kept for later still tells
		// the truth.
		r.At(9.5)
		require.Equal(t, 500*time.Millisecond, core.RetryAfterOf(err))

		r.At(10)
		probe := r.A()
		p, err = r.B.Allow()
		// The default half-open-full wait: a tenth of the open duration.
		require.Equal(t, time.Second, p.RetryAfter)
		rejectedFor(t, err, core.ErrHalfOpenFull, time.Second, "half-open full, Allow")
		_, err = core.Do(ctx, r.B, call)
		rejectedFor(t, err, core.ErrHalfOpenFull, time.Second, "half-open full, Do")

		// Once the verdict is in, the kept error says: now.
		r.D(probe, core.Success)
		require.Zero(t, core.RetryAfterOf(err))

		// Ramping up: a shed call may try again at once.
		shed := 0
		for i := range 1000 {
			r.Clock.Set(10*time.Second + time.Duration(i)*time.Microsecond)
			if p, err := r.B.Allow(); err != nil {
				shed++
				require.Zero(t, p.RetryAfter)
				rejectedFor(t, err, core.ErrRampingUp, 0, "ramping up")
			} else {
				r.D(p, core.Success)
			}
		}
		require.Positive(t, shed)

		require.NoError(t, r.B.ForceOpen(0))
		p, err = r.B.Allow()
		require.Zero(t, p.RetryAfter)
		rejectedFor(t, err, core.ErrForcedOpen, 0, "forced open")
	})
}

// A half-open-full rejection asks for HalfOpenFullWait, or for what is left
// of the max wait when that is shorter, and for HalfOpenFullWait with
// WaitForever: never zero, so a worker that waits as told does not spin.
func TestHalfOpenFullWait(t *testing.T) {
	for _, tc := range []struct {
		name    string
		maxWait time.Duration
		at      time.Duration // after the open -> half-open at 1 s
		want    time.Duration
	}{
		{"configured", 0, time.Second, 250 * time.Millisecond},
		// A max wait of 3 s is kept in units of 3 ms: from 1 s it ends at
		// ceil(4000/3) = 1334 units = 4.002 s.
		{"bounded by the max wait's time left", 3 * time.Second, 3900 * time.Millisecond, 102 * time.Millisecond},
		{"WaitForever", core.WaitForever, 100 * 24 * time.Hour, 250 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			forEachImpl(t, func(t *testing.T, mk maker) {
				r := mk.build(t, core.Config{ConsecutiveFailures: 1, OpenDuration: time.Second,
					MaxWaitInHalfOpen: tc.maxWait, HalfOpenFullWait: 250 * time.Millisecond})
				r.X(core.Failure)
				r.At(1)
				r.A() // the probe, never reported
				r.Clock.Set(tc.at)
				p, err := r.B.Allow()
				require.Equal(t, tc.want, p.RetryAfter)
				rejectedFor(t, err, core.ErrHalfOpenFull, tc.want, tc.name)
			})
		})
	}
}

// Two rejections from one breaker for one reason are equal errors; from
// two breakers, or for two reasons, they are not.
func TestRejectionEquality(t *testing.T) {
	forEachImpl(t, func(t *testing.T, mk maker) {
		cfg := core.Config{ConsecutiveFailures: 1}
		a, b := mk.build(t, cfg), mk.build(t, cfg)
		a.X(core.Failure)
		b.X(core.Failure)
		_, e1 := a.B.Allow()
		_, e2 := a.B.Allow()
		_, e3 := b.B.Allow()
		require.True(t, e1 == e2)
		require.False(t, e1 == e3)
		require.NoError(t, a.B.ForceOpen(0))
		_, e4 := a.B.Allow()
		require.False(t, e1 == e4)
	})
}
