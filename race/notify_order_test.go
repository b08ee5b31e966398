package race_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/casbreaker/casbreaker/core"
	"github.com/casbreaker/casbreaker/internal/breakers"
)

// Notification order (R12; regressions B12, B13 test 2, B29). Each round
// races transitions on a fresh breaker: 16 goroutines make calls that mostly
// fail while two of them move the clock, so the breaker trips, flips to
// half-open under 8 probes, re-opens and closes again and again, with
// several goroutines committing transitions at once. Per round:
//
//   - notifications arrive in commit order: each one's From is the previous
//     one's To, the first starts from closed, generations run 1, 2, 3, ...;
//   - none is lost or duplicated: their number is the final generation;
//   - the last one's To is the state the breaker is in afterwards (State is
//     time-aware, so an open breaker past its deadline may report half-open
//     with no transition committed; that is the only allowed difference).
//
// Listener variants: a recorder; a re-entrant one that calls State, Counts,
// Allow and Done(context.Canceled) on every notification (B13: that must
// neither deadlock nor reorder); and, in a few rounds, a slow one that
// sleeps 1 ms to widen the race windows (B12's variant).
func TestNotificationsChainInCommitOrder(t *testing.T) {
	procs(t, 8)
	for _, variant := range []string{"record", "reentrant", "slow"} {
		rounds := size(3000, 40)
		if variant == "slow" {
			rounds = size(150, 4)
		}
		t.Run("listener="+variant, func(t *testing.T) {
			forEachImpl(t, func(t *testing.T, newB newFunc) {
				total := 0
				for round := range rounds {
					total += notifyRound(t, newB, variant, round)
				}
				t.Logf("%d rounds, %d notifications checked", rounds, total)
			})
		})
	}
}

func notifyRound(t *testing.T, newB newFunc, variant string, round int) int {
	clock := core.NewManualClock(0)
	var (
		mu    sync.Mutex
		got   []core.Transition
		fault string
		b     breakers.Breaker
		ready = make(chan struct{})
	)
	listen := func(tr core.Transition) {
		mu.Lock()
		if n := len(got); fault == "" {
			switch {
			case n == 0 && tr.From != core.Closed:
				fault = fmt.Sprintf("first notification %+v does not start from closed", tr)
			case n > 0 && got[n-1].To != tr.From:
				fault = fmt.Sprintf("notification %d %+v does not chain from %+v", n, tr, got[n-1])
			case tr.Generation != uint64(n+1):
				fault = fmt.Sprintf("notification %d %+v has generation %d, want %d", n, tr, tr.Generation, n+1)
			}
		}
		got = append(got, tr)
		mu.Unlock()
		switch variant {
		case "reentrant":
			<-ready
			_ = b.State()
			_ = b.Counts()
			if p, err := b.Allow(); err == nil {
				b.Done(p, context.Canceled) // ignored: hands a probe slot back
			}
		case "slow":
			time.Sleep(time.Millisecond)
		}
	}
	b = mustNew(t, newB, core.Config{
		WindowSize: 10, FailureRateThreshold: 50, MinimumNumberOfCalls: 4,
		OpenDuration: time.Second, PermittedCallsInHalfOpen: 8, SuccessesToClose: 3,
		Clock: clock, OnStateChange: listen,
	})
	close(ready)
	ops := size(24, 16)
	parallel(16, func(i int) {
		for j := range ops {
			if i < 2 && j%3 == 0 {
				clock.Advance(400 * time.Millisecond)
			}
			p, err := b.Allow()
			if err != nil {
				continue
			}
			o := core.Failure
			if (i+j)%3 == 0 {
				o = core.Success
			}
			b.Record(p, o)
		}
	})
	mu.Lock()
	defer mu.Unlock()
	if fault != "" {
		t.Fatalf("round %d: %s", round, fault)
	}
	c := b.Counts()
	if int(c.Generation) != len(got) {
		t.Fatalf("round %d: %d notifications for generation %d", round, len(got), c.Generation)
	}
	if len(got) == 0 {
		return 0
	}
	last := got[len(got)-1].To
	if st := b.State(); st != last && (last != core.Open || st != core.HalfOpen) {
		t.Fatalf("round %d: last notification says %v, State() says %v", round, last, st)
	}
	return len(got)
}
