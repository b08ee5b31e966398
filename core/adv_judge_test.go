package core_test

// ADVERSARIAL FINDING (branch adv-windows), expected to FAIL (it is
// nondeterministic: it needs two outcomes to interleave inside the time
// window's judgement, see window/buckets/adv_judge_test.go). A closed
// breaker with a time window takes concurrent outcomes; once they have all
// returned, this goroutine alone records failures one at a time. After
// each, a window that trips the rule must leave the breaker open (R1:
// the record's trip follows it before Record returns). A judgement
// installed from a Snapshot that missed a concurrent, completed outcome
// grants one failure too much slack, so a sequential failure that brings
// the window to the threshold returns with the breaker still closed.

import (
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/casbreaker/casbreaker/core"
)

func TestAdvJudge_SequentialFailureAfterConcurrentLoadTrips(t *testing.T) {
	prev := runtime.GOMAXPROCS(max(4, runtime.NumCPU()))
	defer runtime.GOMAXPROCS(prev)
	deadline := time.Now().Add(4 * time.Second)
	for round := 0; time.Now().Before(deadline); round++ {
		clk := core.NewManualClock(100 * time.Millisecond)
		b, err := core.New(core.Config{
			WindowType: core.TimeBased, WindowSize: 4,
			MinimumNumberOfCalls: 1, FailureCountThreshold: 30,
			OpenDuration: time.Minute, Clock: clk,
		})
		require.NoError(t, err)
		p, _ := b.Allow()
		b.Record(p, core.Failure) // second 0: the window is unclean
		clk.Advance(time.Second)  // second 1: a bucket with no judgement yet
		var wg sync.WaitGroup
		start := make(chan struct{})
		for g := range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				for k := range 10 {
					p, err := b.Allow()
					if err != nil {
						return
					}
					o := core.Success
					if (k+g)%3 == 0 {
						o = core.Failure
					}
					b.Record(p, o)
				}
			}()
		}
		close(start)
		wg.Wait()
		for range 40 {
			p, err := b.Allow()
			if err != nil {
				break // open: tripped
			}
			b.Record(p, core.Failure)
			c := b.Counts()
			if c.State == core.Closed && c.Failures >= 30 {
				t.Fatalf("round %d: sequential failure returned with the breaker closed on a window that trips: %+v", round, c)
			}
		}
	}
}
