package core_test

import (
	"testing"
	"time"

	"github.com/casbreaker/casbreaker/core"
	"github.com/stretchr/testify/require"
)

// Fixed (it was a known limit): A's failure fills a 2-call count window with
// failures (100% >= 100%, trip); before A commits the trip, B records a
// success. B used to evict a failure (window [F,S], 50%) and return, a
// Counts call then saw closed, 1 failure in 2 calls, and A tripped the
// breaker on its stale snapshot: no sequential order of A, B and that Counts
// ends open after such a Counts. Now A's swap closes the window with the
// trip (atomicring.RecordTrip): B finds it closed, is stale, and commits A's
// trip before returning, so the Counts in between already sees open.
func TestAdv_TripOnStaleWindowSnapshot(t *testing.T) {
	hc := &hookClock{}
	b, err := core.New(core.Config{
		WindowSize: 2, MinimumNumberOfCalls: 2, FailureRateThreshold: 100,
		OpenDuration: time.Second,
		Clock:        hc,
	})
	require.NoError(t, err)
	p, _ := b.Allow()
	b.Record(p, core.Success)
	p, _ = b.Allow()
	b.Record(p, core.Failure) // window [S, F]: 50%
	pa, _ := b.Allow()
	pb, _ := b.Allow()
	entered, release := hc.blockAt(1) // A's only clock read: the trip time
	done := make(chan struct{})
	go func() { defer close(done); b.Record(pa, core.Failure) }()
	<-entered
	b.Record(pb, core.Success)
	mid := b.Counts()
	close(release)
	<-done
	after := b.Counts()
	t.Logf("between: %+v\nafter: %+v", mid, after)
	require.Equal(t, core.Open, mid.State, "B returned after A's window tripped: the breaker must be open for every later call")
	require.Equal(t, mid, after, "the trip happened once, before B returned")
}
