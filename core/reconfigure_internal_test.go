package core

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// A Reconfigure descheduled right after its swap to moving holds up no
// one: the calls that find the word moving build the successor from the
// plan themselves, exactly one offer wins (one notification), and the
// reconfigurer, resuming, goes on with that one.
func TestReconfigureHalfDoneIsCompletedByCallers(t *testing.T) {
	var mu sync.Mutex
	var got []Transition
	c := Config{WindowSize: 10, MinimumNumberOfCalls: 10, FailureRateThreshold: 50, Clock: NewManualClock(0),
		OnStateChange: func(tr Transition) {
			mu.Lock()
			defer mu.Unlock()
			got = append(got, tr)
		}}
	b, err := New(c)
	require.NoError(t, err)
	for range 4 {
		p, err := b.Allow()
		require.NoError(t, err)
		b.Record(p, Failure)
	}
	c.WindowSize, c.MinimumNumberOfCalls = 3, 3
	s, changed, err := b.cfg.Reconfigured(c)
	require.NoError(t, err)
	// The reconfigurer's first step, and no more.
	w := b.load()
	b.plan.Store(&reconfiguration{set: s, changed: changed, from: w, gen: b.genOf(w)})
	require.True(t, b.cas(w, moving))

	var wg sync.WaitGroup
	successors := make([]*Breaker, 8)
	for i := range successors {
		wg.Go(func() {
			require.Equal(t, Counts{State: Closed, Calls: 3, Failures: 3}, b.Counts())
			successors[i] = b.next.Load()
		})
	}
	wg.Wait()
	for _, n := range successors {
		require.Same(t, successors[0], n, "one successor won")
	}
	require.Same(t, successors[0], b.successor(), "the reconfigurer resumes with the winner")
	require.Equal(t, 3, b.Settings().WindowSize)
	mu.Lock()
	require.Len(t, got, 1)
	require.Equal(t, Transition{From: Closed, To: Closed, Reason: ReasonReconfigured, Changed: "WindowSize,MinimumNumberOfCalls"}, got[0])
	mu.Unlock()
	p, err := b.Allow()
	require.NoError(t, err)
	b.Record(p, Failure)
	require.Equal(t, Open, b.State(), "the new rule judges the next outcome: 3 of 3 failed")
}
