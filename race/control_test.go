package race_test

// Contention tests of the manual controls: ForceOpen, Disable, MetricsOnly
// and Reset racing traffic.

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/casbreaker/casbreaker/core"
	"github.com/casbreaker/casbreaker/internal/breakers"
)

// Manual controls racing traffic (ForceOpen, Disable, MetricsOnly, Reset;
// R8, R12). Per round, six goroutines hammer Allow and Done with a mix of
// failures, successes and cancellations (consecutive-failures rule, a 4 ms
// open duration backed off to 16 ms, two probes, a half-open max wait and a
// ramp-up), goroutines 0 and 1 moving the clock 1 ms per call, so the
// breaker trips, probes, restarts, re-opens, closes and ramps; a third of
// the permits are held for a while first. Meanwhile the test goroutine
// issues manual controls in a random order: ForceOpen(0), ForceOpen(d) with
// d up to 16 ms, Disable, MetricsOnly and Reset, each after letting the
// traffic make a few calls (a gate keeps the traffic goroutines within a
// few calls of each other and of the controls). Checked:
//
//   - notifications chain (each From is the previous To, the first from
//     closed), generations run 1, 2, 3, ..., their number is the final
//     generation, and the last To is State() (or open, reported half-open
//     once its deadline passed); notifications to ForcedOpen and to Disabled
//     number exactly the ForceOpen(0) and Disable calls, and those from them
//     exactly the controls that followed them (only a control leaves them);
//   - a permit granted before a control began and completed after it
//     returned is stale: it is completed, among other ways, with a
//     retry-after hint of an hour, which would hold the breaker open for an
//     hour if it were acted on; no caller may ever see an open wait longer
//     than the longest configured open duration;
//   - after each ForceOpen(0) and Disable, once every call in flight at the
//     control has returned, the traffic (current and stale permits alike)
//     changes nothing: Counts stays the same, and no success, failure,
//     ignored outcome or transition is counted in Metrics;
//   - Metrics at the end: every Allow counted once as admitted or rejected
//     (by kind, as the callers saw it), every outcome once as acted on or
//     dropped, stale ones dropped, and Transitions equal the notifications.
func TestManualControlsRaceTraffic(t *testing.T) {
	procs(t, 8)
	rounds, controls := size(2000, 40), size(60, 30)
	forEachImpl(t, func(t *testing.T, newB newFunc) {
		var f controlFigures
		f.kinds = map[string]int{}
		for round := range rounds {
			controlRound(t, newB, uint64(round), controls, &f)
		}
		t.Logf("%d rounds x %d controls: %d calls, %d admitted, %d notifications (%s); %d stale completions, %d of them in %d quiet windows after ForceOpen(0)/Disable",
			rounds, controls, f.calls, f.admitted, f.notes, sortedKinds(f.kinds), f.stale, f.quietStale, f.quiet)
		for i, k := range []string{"C>O", "O>H", "H>O", "H>C", "H>H", "MO>MO", "FO>C", "D>MO"} {
			if f.kinds[k] == 0 && (i < 5 || !testing.Short()) {
				t.Fatalf("the rounds never reached %s (%s): too tame to prove anything", k, sortedKinds(f.kinds))
			}
		}
		if f.stale == 0 || f.quietStale == 0 {
			t.Fatalf("no stale permit completed (%d, %d in quiet windows): too tame", f.stale, f.quietStale)
		}
	})
}

type controlFigures struct {
	calls, admitted, notes, stale, quietStale, quiet int64
	kinds                                            map[string]int
}

const (
	ctlOpen    = 4 * time.Millisecond
	ctlMaxOpen = 16 * time.Millisecond
	ctlHint    = time.Hour
	ctlTraffic = 6
	ctlLead    = 6
)

type heldPermit struct {
	p      core.Permit
	before int64 // controls begun when Allow had returned
	until  int   // complete normally at this call, if not known stale earlier
}

func controlRound(t *testing.T, newB newFunc, seed uint64, controls int, f *controlFigures) {
	clock := core.NewManualClock(0)
	var (
		mu    sync.Mutex
		got   []core.Transition
		fault atomic.Pointer[string]
	)
	fail := func(s string) { fault.CompareAndSwap(nil, &s) }
	listen := func(tr core.Transition) {
		mu.Lock()
		defer mu.Unlock()
		n := len(got)
		switch {
		case n == 0 && tr.From != core.Closed:
			fail(fmt.Sprintf("first notification %+v does not start from closed", tr))
		case n > 0 && got[n-1].To != tr.From:
			fail(fmt.Sprintf("notification %d %+v does not chain from %+v", n, tr, got[n-1]))
		case tr.Generation != uint64(n+1):
			fail(fmt.Sprintf("notification %d %+v has generation %d, want %d", n, tr, tr.Generation, n+1))
		}
		got = append(got, tr)
	}
	b := mustNew(t, newB, core.Config{
		ConsecutiveFailures: 4,
		OpenDuration:        ctlOpen, OpenDurationBackoff: 2, MaxOpenDuration: ctlMaxOpen,
		PermittedCallsInHalfOpen: 2, SuccessesToClose: 2,
		MaxWaitInHalfOpen: 6 * time.Millisecond,
		RampUpDuration:    8 * time.Millisecond, RampUpStartPercent: 50,
		MaxRetryAfter:  ctlHint,
		CollectMetrics: true,
		Clock:          clock, OnStateChange: listen,
	})

	var (
		// pace: traffic goroutine i may have made gate calls, and is
		// waiting at the gate or moving to target (the controller waits
		// for every one to reach it); cond wakes either side.
		pace                 sync.Mutex
		cond                 = sync.NewCond(&pace)
		stop                 bool
		gate, target         atomic.Int64
		ctlStarted, ctlDone  atomic.Int64
		ops                  [ctlTraffic]atomic.Int64
		allows               [ctlTraffic][5]int64 // admitted, ErrOpen, ErrHalfOpenFull, ErrForcedOpen, ErrRampingUp
		outcomes, staleDone  atomic.Int64
		traffic              sync.WaitGroup
		quietStale, quietWin int64
	)
	for gid := range ctlTraffic {
		traffic.Go(func() {
			rng := rand.New(rand.NewPCG(seed, uint64(gid)))
			var held []heldPermit
			normal := func(p core.Permit) {
				switch r := rng.IntN(20); {
				case r < 7:
					b.Record(p, core.Failure)
				case r < 15:
					b.Record(p, core.Success)
				case r < 17:
					b.Done(p, context.Canceled) // Ignored
				case r < 19:
					b.Done(p, errFail)
				default:
					b.Done(p, nil)
				}
				outcomes.Add(1)
			}
			for call := 0; ; call++ {
				if int64(call) >= gate.Load() {
					pace.Lock()
					for int64(call) >= gate.Load() && !stop {
						cond.Wait()
					}
					done := stop
					pace.Unlock()
					if done {
						break
					}
				}
				if gid < 2 {
					clock.Advance(time.Millisecond)
				}
				kept := held[:0]
				for _, h := range held {
					switch {
					case ctlDone.Load() > h.before && rng.IntN(4) == 0:
						// A control began after this permit was granted and
						// has returned: the permit is stale for good.
						switch rng.IntN(4) {
						case 0, 1:
							b.RecordHint(h.p, ctlHint)
						case 2:
							b.Done(h.p, core.WithRetryAfter(errFail, ctlHint))
						default:
							b.Record(h.p, core.Outcome(rng.IntN(3)))
						}
						outcomes.Add(1)
						staleDone.Add(1)
					case call >= h.until:
						normal(h.p)
					default:
						kept = append(kept, h)
					}
				}
				held = kept
				p, err := b.Allow()
				switch breakers.Reason(err) {
				case nil:
					allows[gid][0]++
					if len(held) < 4 && rng.IntN(3) == 0 {
						held = append(held, heldPermit{p: p, before: ctlStarted.Load(), until: call + 1 + rng.IntN(40)})
					} else {
						normal(p)
					}
				case core.ErrOpen:
					allows[gid][1]++
					if p.Wait > ctlMaxOpen+time.Millisecond {
						fail(fmt.Sprintf("Allow waits %v in open state, longer than any configured open duration: a stale retry-after hint (%v) was acted on", p.Wait, ctlHint))
					}
				case core.ErrHalfOpenFull:
					allows[gid][2]++
				case core.ErrForcedOpen:
					allows[gid][3]++
				case core.ErrRampingUp:
					allows[gid][4]++
				default:
					fail(fmt.Sprintf("Allow: unexpected error %v", err))
				}
				if ops[gid].Add(1) == target.Load() {
					pace.Lock()
					cond.Broadcast()
					pace.Unlock()
				}
			}
			for _, h := range held {
				normal(h.p)
			}
		})
	}
	stopTraffic := func() {
		pace.Lock()
		stop = true
		cond.Broadcast()
		pace.Unlock()
		traffic.Wait()
	}
	defer stopTraffic()
	// waitOps lets the traffic on: it returns once every traffic goroutine
	// has made at least extra calls more than the one furthest ahead had
	// made when it began (so, with extra >= 1, every call that was in flight
	// then has returned), and lets each go on to ctlLead calls beyond that,
	// no further. The gate keeps the goroutines within ctlLead calls of each
	// other at every control, so none runs far ahead of the controls, and it
	// bounds a storm of transitions: a goroutine can stay inside one call
	// for as long as others keep committing transitions, delivering their
	// notifications (core's dispatcher, notify.go). Both sides block rather
	// than spin: goroutines spinning on runtime.Gosched, 8 Ps on 2 cores,
	// make the scheduler the bottleneck, a hundred times slower.
	waitOps := func(extra int64) {
		pace.Lock()
		defer pace.Unlock()
		var to int64
		for i := range ops {
			to = max(to, ops[i].Load())
		}
		to += extra
		target.Store(to)
		gate.Store(to + ctlLead)
		cond.Broadcast()
		for i := range ops {
			for ops[i].Load() < to {
				cond.Wait()
			}
		}
	}

	rng := rand.New(rand.NewPCG(seed, 1<<20))
	var issued [5]int
	lastQuiet := false
	for c := range controls {
		waitOps(int64(1 + rng.IntN(12)))
		kind := rng.IntN(5)
		issued[kind]++
		ctlStarted.Add(1)
		var want core.State
		switch kind {
		case 0:
			if err := b.ForceOpen(0); err != nil {
				t.Fatalf("seed %d control %d: ForceOpen(0): %v", seed, c, err)
			}
			want = core.ForcedOpen
		case 1:
			if err := b.ForceOpen(time.Duration(1+rng.IntN(int(ctlMaxOpen/time.Millisecond))) * time.Millisecond); err != nil {
				t.Fatalf("seed %d control %d: ForceOpen(d): %v", seed, c, err)
			}
		case 2:
			b.Disable()
			want = core.Disabled
		case 3:
			b.MetricsOnly()
		case 4:
			b.Reset()
		}
		ctlDone.Add(1)
		lastQuiet = kind == 0 || kind == 2
		if !lastQuiet {
			continue
		}
		// ForcedOpen and Disabled: only a control leaves them, and no outcome
		// counts. Once the calls in flight at the control have returned,
		// nothing the traffic does may show.
		waitOps(1)
		c1, m1 := b.Counts(), b.Metrics()
		if c1.State != want || c1.Calls != 0 || c1.ConsecutiveFailures != 0 || c1.ProbesInFlight != 0 {
			t.Fatalf("seed %d control %d: counts %+v right after the control to %v", seed, c, c1, want)
		}
		s0 := staleDone.Load()
		waitOps(int64(3 + rng.IntN(8)))
		c2, m2 := b.Counts(), b.Metrics()
		quietStale += staleDone.Load() - s0
		quietWin++
		if c2 != c1 {
			t.Fatalf("seed %d control %d: traffic changed a %v breaker: counts %+v, then %+v", seed, c, want, c1, c2)
		}
		if m2.Successes != m1.Successes || m2.Failures != m1.Failures || m2.Ignored != m1.Ignored ||
			m2.SlowCalls != m1.SlowCalls || m2.Transitions != m1.Transitions {
			t.Fatalf("seed %d control %d: traffic was acted on in a %v breaker: metrics %+v, then %+v", seed, c, want, m1, m2)
		}
		if p := fault.Load(); p != nil {
			t.Fatalf("seed %d control %d: %s", seed, c, *p)
		}
	}
	stopTraffic()
	if p := fault.Load(); p != nil {
		t.Fatalf("seed %d: %s", seed, *p)
	}

	mu.Lock()
	trs := append([]core.Transition(nil), got...)
	mu.Unlock()
	cnt := b.Counts()
	if int(cnt.Generation) != len(trs) || len(trs) < controls {
		t.Fatalf("seed %d: %d notifications for generation %d after %d controls", seed, len(trs), cnt.Generation, controls)
	}
	last := trs[len(trs)-1].To
	if st := b.State(); st != last && (last != core.Open || st != core.HalfOpen) {
		t.Fatalf("seed %d: last notification says %v, State() says %v", seed, last, st)
	}
	var toFO, toD, fromQuiet int
	for _, tr := range trs {
		f.kinds[pairName(tr.From, tr.To)]++
		switch tr.To {
		case core.ForcedOpen:
			toFO++
		case core.Disabled:
			toD++
		}
		if tr.From == core.ForcedOpen || tr.From == core.Disabled {
			fromQuiet++
		}
	}
	wantFrom := issued[0] + issued[2]
	if lastQuiet {
		wantFrom--
	}
	if toFO != issued[0] || toD != issued[2] || fromQuiet != wantFrom {
		t.Fatalf("seed %d: %d notifications to forced-open, %d to disabled, %d from either; want %d, %d and %d (controls issued %v)",
			seed, toFO, toD, fromQuiet, issued[0], issued[2], wantFrom, issued)
	}

	m := b.Metrics()
	var sum [5]int64
	for gid := range allows {
		for k := range sum {
			sum[k] += allows[gid][k]
		}
	}
	calls := sum[0] + sum[1] + sum[2] + sum[3] + sum[4]
	gotAllow := [5]uint64{m.Admitted, m.RejectedOpen, m.RejectedHalfOpenFull, m.RejectedForcedOpen, m.RejectedRampUp}
	for k := range sum {
		if gotAllow[k] != uint64(sum[k]) {
			t.Fatalf("seed %d: metrics count Allow results %v, the callers saw %v (admitted, open, half-open full, forced open, ramping up)", seed, gotAllow, sum)
		}
	}
	if acted := m.Successes + m.Failures + m.Ignored + m.Dropped; acted != uint64(outcomes.Load()) || m.Dropped < uint64(staleDone.Load()) {
		t.Fatalf("seed %d: %d outcomes (%d known stale) recorded, metrics %+v count %d, %d dropped", seed, outcomes.Load(), staleDone.Load(), m, acted, m.Dropped)
	}
	if m.Transitions != pairsOf(trs) || transitionsSum(m) != uint64(cnt.Generation) {
		t.Fatalf("seed %d: metrics transitions %v, notifications %v, generation %d", seed, m.Transitions, pairsOf(trs), cnt.Generation)
	}
	f.calls += calls
	f.admitted += sum[0]
	f.notes += int64(len(trs))
	f.stale += staleDone.Load()
	f.quietStale += quietStale
	f.quiet += quietWin
}
