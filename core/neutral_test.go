package core_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/casbreaker/casbreaker/core"
)

// localLimit is an error of a local limit (a full bulkhead, say): it opts
// into ErrNeutral with its Is method.
type localLimit struct{}

func (localLimit) Error() string        { return "local limit reached" }
func (localLimit) Is(target error) bool { return target == core.ErrNeutral }

func TestDefaultClassifierNeutral(t *testing.T) {
	require.Equal(t, core.Ignored, core.DefaultClassifier(core.ErrNeutral))
	require.Equal(t, core.Ignored, core.DefaultClassifier(localLimit{}))
	require.Equal(t, core.Ignored, core.DefaultClassifier(fmt.Errorf("wrapped: %w", localLimit{})))
	require.Equal(t, core.Failure, core.DefaultClassifier(errFail))
}

// TestNeutralErrorNotCounted: with the default classifier an error matching
// ErrNeutral is not counted in closed state, and a half-open probe that ends
// with one returns its slot, in both implementations, with Classifier unset
// (each implementation's own default) and set to DefaultClassifier.
func TestNeutralErrorNotCounted(t *testing.T) {
	forEachImpl(t, func(t *testing.T, mk maker) {
		for _, classifier := range []func(error) core.Outcome{nil, core.DefaultClassifier} {
			neutralRun(t, mk.build(t, core.Config{
				WindowSize: 2, FailureRateThreshold: 50, OpenDuration: time.Second,
				Classifier: classifier,
			}))
		}
	})
}

func neutralRun(t *testing.T, r *rig) {
	for range 10 {
		p := r.A()
		r.B.Done(p, localLimit{})
	}
	r.Is(core.Closed)
	r.Cnt(0, 0, 0, 0)

	r.B.Done(r.A(), errFail)
	r.B.Done(r.A(), errFail)
	r.Is(core.Open)
	r.Clock.Advance(time.Second)
	probe := r.A()
	require.True(t, probe.Probe)
	r.Reject(core.ErrHalfOpenFull)
	r.B.Done(probe, fmt.Errorf("bulkhead: %w", localLimit{}))
	r.Is(core.HalfOpen)
	again := r.A()
	require.True(t, again.Probe, "the neutral probe's slot was not returned")
	r.B.Done(again, nil)
	r.Is(core.Closed)
}

// A breaker's rejection, seen by a breaker around it (one per target
// around one per method), is neutral: the refused call never left the
// process, and counting it would open the outer breaker on the inner one's
// refusals.
func TestInnerRejectionIsNeutral(t *testing.T) {
	forEachImpl(t, func(t *testing.T, mk maker) {
		inner := mk.build(t, core.Config{ConsecutiveFailures: 1, OpenDuration: time.Minute})
		inner.B.Done(inner.A(), errFail)
		inner.Is(core.Open)
		_, rejected := inner.B.Allow()
		require.ErrorIs(t, rejected, core.ErrNeutral)
		require.ErrorIs(t, rejected, core.ErrOpen)
		require.Equal(t, core.Ignored, core.DefaultClassifier(rejected))
		outer := mk.build(t, core.Config{ConsecutiveFailures: 1})
		outer.B.Done(outer.A(), rejected)
		outer.Is(core.Closed)
		outer.Cnt(0, 0, 0, 0)
	})
}
