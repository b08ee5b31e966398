package core_test

import (
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/casbreaker/casbreaker/core"
)

// A transition storm (1 ms open duration, every failure trips, callers move
// the clock) with more goroutines than processors, so a publisher is often
// descheduled between its CAS and its publish while hundreds of later
// transitions commit. Every notification must arrive, exactly once, in
// order, and nobody may hang. (Two ways a lock-free dispatcher can fail
// here: a later generation taking the slot of a descheduled earlier one,
// and a deliverer's normal return clearing the busy bit of the next
// deliverer.)
func TestNotificationStormDeliversEveryEventInOrder(t *testing.T) {
	old := runtime.GOMAXPROCS(4)
	defer runtime.GOMAXPROCS(old)
	forEachImpl(t, func(t *testing.T, mk maker) {
		var delivered, disorder atomic.Int64
		var last atomic.Uint64
		r := mk.build(t, core.Config{ConsecutiveFailures: 1, OpenDuration: time.Millisecond}, func(tr core.Transition) {
			if tr.Generation != last.Load()+1 {
				disorder.Add(1)
			}
			last.Store(tr.Generation)
			delivered.Add(1)
		})
		done := make(chan struct{})
		go func() {
			defer close(done)
			var wg sync.WaitGroup
			for g := range 16 {
				wg.Go(func() {
					for i := range rounds(10000, 2000) {
						p, err := r.B.Allow()
						if err != nil {
							r.Clock.Advance(time.Millisecond)
							continue
						}
						r.B.Record(p, []core.Outcome{S, F}[(i+g)%2])
					}
				})
			}
			wg.Wait()
		}()
		select {
		case <-done:
		case <-time.After(2 * time.Minute): // a watchdog, not a timing assertion: a hang never ends
			t.Fatalf("hang: %d delivered, generation %d", delivered.Load(), r.B.Counts().Generation)
		}
		gen := r.B.Counts().Generation
		require.Zero(t, disorder.Load())
		require.EqualValues(t, gen, delivered.Load())
		require.Greater(t, delivered.Load(), int64(1000), "the storm was too calm to test anything")
	})
}
