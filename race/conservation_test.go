package race_test

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/casbreaker/casbreaker/core"
	"github.com/casbreaker/casbreaker/internal/breakers"
)

// checkSnapshot reports what is wrong with a snapshot read while writers run:
// R2's invariants, which every read must keep however it interleaves.
func checkSnapshot(c core.Counts, maxCalls uint64) string {
	switch {
	case c.Failures > c.Calls:
		return "failures > calls"
	case c.SlowCalls > c.Calls:
		return "slow > calls"
	case c.SlowFailures > min(c.SlowCalls, c.Failures):
		return "slow failures > min(slow, failures)"
	case c.Calls > maxCalls:
		return fmt.Sprintf("calls > %d", maxCalls)
	}
	return ""
}

// Conservation (R13, R2; regression B30 test 1). G goroutines record a known
// mix of outcomes (a failure where (g*per+i) mod 4 == 0) with the clock
// frozen, while a reader loops Counts and State. Afterwards the counts are
// exactly what was recorded: not one outcome lost or counted twice. Every
// read in between keeps 0 <= failures <= calls <= total and
// slowFailures <= min(slow, failures), and calls never decrease. No prefix of
// the recorded outcomes reaches 50 % failures once 1000 are in
// (at most n/4 + G failures among n), so the breaker must stay closed.
//
// The count window (200 calls, never a run of 200 failures, so it never
// trips) must be full afterwards, with every snapshot at most 200 calls.
// The time-window variant also runs with one writer moving the clock across
// 20 s of a 60 s window while the others record: outcomes land in many
// buckets, buckets are recycled under the writers, and still nothing is lost.
func TestConservationHammer(t *testing.T) {
	procs(t, 8)
	g, per := size(64, 16), size(10_000, 500)
	total := uint64(g * per)
	wantF := uint64(0)
	for i := range g * per {
		if i%4 == 0 {
			wantF++
		}
	}
	for _, tc := range []struct {
		name   string
		cfg    core.Config
		ticker bool
	}{
		{"time=10s/frozen", core.Config{WindowType: core.TimeBased, WindowSize: 10, FailureRateThreshold: 50, MinimumNumberOfCalls: 1000}, false},
		{"time=60s/ticking", core.Config{WindowType: core.TimeBased, WindowSize: 60, FailureRateThreshold: 50, MinimumNumberOfCalls: 1000}, true},
		{"count=200", core.Config{WindowSize: 200, FailureRateThreshold: 100, MinimumNumberOfCalls: 200}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			forEachImpl(t, func(t *testing.T, newB newFunc) {
				clock := core.NewManualClock(0)
				cfg := tc.cfg
				cfg.Clock = clock
				var rec transitions
				cfg.OnStateChange = rec.listen
				b := mustNew(t, newB, cfg)
				reads, bad := hammer(b, g, per, total, tc.ticker, clock, func(gid, i int) core.Outcome {
					if (gid*per+i)%4 == 0 {
						return core.Failure
					}
					return core.Success
				})
				if bad != "" {
					t.Fatal(bad)
				}
				c := b.Counts()
				wantN, wantF := total, wantF
				if cfg.WindowType == core.CountBased {
					// Which 200 are last depends on the interleaving: the
					// window must be full, and exact again after 200 more
					// calls made in a known order.
					if c.Calls != 200 {
						t.Fatalf("count window holds %d calls after %d, want 200", c.Calls, total)
					}
					for i := range 200 {
						p, _ := b.Allow()
						o := core.Success
						if i%5 == 0 {
							o = core.Failure
						}
						b.Record(p, o)
					}
					wantN, wantF = 200, 40
					c = b.Counts()
				}
				if c.State != core.Closed || c.Calls != wantN || c.Failures != wantF || c.SlowCalls != 0 || c.SlowFailures != 0 {
					t.Fatalf("final counts %+v, want closed with %d calls and %d failures", c, wantN, wantF)
				}
				if trs := rec.get(); len(trs) != 0 {
					t.Fatalf("notifications %+v, want none", trs)
				}
				t.Logf("%d outcomes recorded by %d goroutines, %d concurrent snapshots checked", total, g, reads)
			})
		})
	}
}

// hammer runs g goroutines that each make per calls with the outcome of
// outcome(gid, i), while a reader checks snapshots. If tick is set,
// goroutine 0 moves the clock 20s/per before each of its calls, so the
// clock crosses 20 s while the others record. It returns the number of
// snapshots read and the first problem found.
func hammer(b breakers.Breaker, g, per int, total uint64, tick bool, clock *core.ManualClock, outcome func(gid, i int) core.Outcome) (int, string) {
	var writers, helpers sync.WaitGroup
	stop := make(chan struct{})
	var reads int
	var bad atomic.Pointer[string]
	fail := func(s string) { bad.CompareAndSwap(nil, &s) }
	helpers.Go(func() {
		var last uint64
		for {
			select {
			case <-stop:
				return
			default:
			}
			c := b.Counts()
			_ = b.State()
			reads++
			if msg := checkSnapshot(c, total); msg != "" {
				fail(fmt.Sprintf("snapshot %+v: %s", c, msg))
				return
			}
			if c.Calls < last {
				fail(fmt.Sprintf("calls went down from %d to %d", last, c.Calls))
				return
			}
			last = c.Calls
		}
	})
	for gid := range g {
		writers.Go(func() {
			for i := range per {
				if tick && gid == 0 {
					clock.Advance(20 * time.Second / time.Duration(per))
				}
				p, err := b.Allow()
				if err != nil {
					fail(fmt.Sprintf("goroutine %d call %d refused: %v", gid, i, err))
					return
				}
				b.Record(p, outcome(gid, i))
			}
		})
	}
	writers.Wait()
	close(stop)
	helpers.Wait()
	if p := bad.Load(); p != nil {
		return reads, *p
	}
	return reads, ""
}

// Exactly-once accounting on the state word: with consecutive failures as
// the only rule and a threshold above the total, G goroutines each record
// per failures; the run of consecutive failures, a CAS-incremented field of
// the lock-free word, must end at exactly G*per (no lost increment, no
// double count), and nothing trips.
func TestConsecutiveFailuresConserved(t *testing.T) {
	procs(t, 8)
	g, per := size(64, 16), size(1_000, 300) // at most MaxConsecutiveFailures in all
	forEachImpl(t, func(t *testing.T, newB newFunc) {
		b := mustNew(t, newB, core.Config{ConsecutiveFailures: core.MaxConsecutiveFailures, Clock: core.NewManualClock(0)})
		reads, bad := hammer(b, g, per, uint64(g*per), false, nil, func(int, int) core.Outcome { return core.Failure })
		if bad != "" {
			t.Fatal(bad)
		}
		if c := b.Counts(); c.State != core.Closed || c.ConsecutiveFailures != uint64(g*per) {
			t.Fatalf("counts %+v, want closed with %d consecutive failures", c, g*per)
		}
		t.Logf("%d failures, %d snapshots", g*per, reads)
	})
}

// The trip happens exactly once (R12, R8; regression B30 test 2). A full
// count window of 255 calls at a 100 % threshold: G goroutines each try 100
// failing calls at once. Exactly one closed -> open notification, the
// breaker ends open at generation 1 (so no late failure of generation 0
// started a second transition), and every call after the trip is refused.
// The count window variant also checks each concurrent snapshot: calls
// never exceed the window size W.
func TestTripHappensExactlyOnce(t *testing.T) {
	procs(t, 8)
	g := 64
	rounds := size(200, 10)
	forEachImpl(t, func(t *testing.T, newB newFunc) {
		for round := range rounds {
			var rec transitions
			b := mustNew(t, newB, core.Config{WindowSize: 255, FailureRateThreshold: 100, MinimumNumberOfCalls: 255,
				Clock: core.NewManualClock(0), OnStateChange: rec.listen})
			var admitted, refused atomic.Int64
			var badRead atomic.Pointer[string]
			parallel(g, func(i int) {
				for range 100 {
					p, err := b.Allow()
					if err != nil {
						refused.Add(1)
						continue
					}
					admitted.Add(1)
					b.Record(p, core.Failure)
					if i%8 == 0 {
						if msg := checkSnapshot(b.Counts(), 255); msg != "" {
							badRead.CompareAndSwap(nil, &msg)
						}
					}
				}
			})
			if p := badRead.Load(); p != nil {
				t.Fatalf("round %d: snapshot: %s", round, *p)
			}
			trs := rec.get()
			if len(trs) != 1 || trs[0].From != core.Closed || trs[0].To != core.Open || trs[0].Generation != 1 {
				t.Fatalf("round %d: notifications %+v, want exactly one C->O at generation 1", round, trs)
			}
			if c := b.Counts(); c.State != core.Open || c.Generation != 1 {
				t.Fatalf("round %d: counts %+v, want open at generation 1", round, c)
			}
			if admitted.Load() < 255 || admitted.Load()+refused.Load() != int64(g*100) {
				t.Fatalf("round %d: %d admitted, %d refused", round, admitted.Load(), refused.Load())
			}
		}
	})
}
