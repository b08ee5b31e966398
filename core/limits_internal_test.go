package core

// The known limits that need the package's internals to be shown (the
// others are in limits_test.go, which says how these tests work).

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/casbreaker/casbreaker/internal/window/atomicring"
)

// Limit: the window and the run of consecutive failures live in two words
// (the ring's and the breaker's state word), updated by separate CASes, so
// two concurrent closed-state outcomes can be ordered one way in the window
// and the other way in the run. Y, a failure, writes the 1-call window and
// is descheduled before its swap of the run; X, a success, replaces Y's
// failure in the window and, finding no run to end in the word Y loaded,
// writes nothing there; Y's swap then wins. The window holds X's success,
// the run Y's failure: no sequential order gives both. Nothing between the
// two CASes calls out of the breaker, so no clock or callback can pause Y
// there; the test takes record's steps for Y by hand (the word loaded
// before the window write, then the swap of the run on that word) and
// makes X's call whole. (With concurrent calls it shows in about one round
// in 200,000 on two cores.) The baseline has no such limit: one mutex
// holds both.
func TestLimit_ConsecutiveRunAndWindowDisagree(t *testing.T) {
	b, err := New(Config{
		WindowSize: 1, MinimumNumberOfCalls: 1,
		SlowCallRateThreshold: 100, SlowCallDurationThreshold: time.Hour,
		ConsecutiveFailures: MaxConsecutiveFailures, // a run that never trips
		Clock:               NewManualClock(0),
	})
	require.NoError(t, err)
	py, err := b.Allow()
	require.NoError(t, err)
	px, err := b.Allow()
	require.NoError(t, err)

	w := b.load() // Y, as record: the word, then the window
	trips, more := b.recordInRing(py, Failure, nil)
	require.False(t, trips)
	require.True(t, more, "a run of failures to keep")
	b.Record(px, Success) // X, whole
	swapped := b.cas(w, w.withConsec(w.consec()+1))
	c := b.Counts()
	if !swapped {
		t.Fatalf("limit fixed: X's success moved the state word that Y loaded before its window write, so Y's swap of the run fails and Y reloads (%+v); take the limit out of docs/design.md, Known limits, and make this a test of the rule", c)
	}
	require.Zero(t, c.Failures, "the window holds X's success")
	require.EqualValues(t, 1, c.ConsecutiveFailures, "the run holds Y's failure")
}

// Limit: a trip that another call commits on behalf of the call whose
// outcome decided it opens for OpenDuration, without OpenDurationFunc.
// Y's failure closes the count window (the ring's claim) and Y is
// descheduled before its claim of the state word; a Counts (or any
// transition, or another outcome of the generation) commits the trip it
// finds decided, and knows neither Y's error nor whether Y's function would
// be slow, so it calls no user code (docs/design.md, Open duration from a
// function, and jitter). The test takes Y's window write by hand; Y's own
// commit then finds the trip done. The baseline has no such limit: its
// trip is one step with the outcome.
func TestLimit_TripCommittedOnBehalfSkipsOpenDurationFunc(t *testing.T) {
	var calls atomic.Int64
	b, err := New(Config{
		WindowSize: 1, MinimumNumberOfCalls: 1, FailureRateThreshold: 100,
		OpenDuration: time.Second, MaxOpenDuration: time.Minute,
		OpenDurationFunc: func(int, error) time.Duration { calls.Add(1); return 30 * time.Second },
		Clock:            NewManualClock(0),
	})
	require.NoError(t, err)
	p, err := b.Allow()
	require.NoError(t, err)
	require.Equal(t, atomicring.Tripped, b.ring.Claim(uint32(p.Generation), true, false, &b.cfg.rule)) // Y's window write
	require.Equal(t, Open, b.Counts().State)                                                           // commits Y's trip
	b.finishTrip(p.Generation, true)                                                                   // Y, late: nothing left to do
	if d := b.RetryAfter(); d != time.Second || calls.Load() != 0 {
		t.Fatalf("limit fixed: the trip opened for %v after %d calls of the function; take the limit out of docs/design.md, Known limits, and make this a test of the rule", d, calls.Load())
	}
}
