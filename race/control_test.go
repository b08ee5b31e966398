package race_test

// Contention tests of the manual controls: ForceOpen, Disable, MetricsOnly,
// Reset and HalfOpen racing traffic.

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

// Manual controls racing traffic (ForceOpen, Disable, MetricsOnly, Reset,
// HalfOpen; R8, R12). Per round, six goroutines hammer Allow and Done with
// a mix of failures, successes and cancellations (consecutive-failures
// rule, a 4 ms open duration backed off to 16 ms, two probes, a half-open
// max wait and a ramp-up), goroutines 0 and 1 moving the clock 1 ms per
// call, so the breaker trips, probes, restarts, re-opens, closes and ramps;
// a third of the permits are held for a while first. Meanwhile the test
// goroutine issues manual controls in a random order: ForceOpen(0),
// ForceOpen(d) with d up to 16 ms, Disable, MetricsOnly, Reset and
// HalfOpen, each after letting the traffic make a few calls (a gate keeps
// the traffic goroutines within a few calls of each other and of the
// controls). Checked:
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

// controlRig is one round of TestManualControlsRaceTraffic: the breaker, its
// notifications as delivered, the gate that paces the traffic goroutines
// against the controls, and what the traffic saw and did.
type controlRig struct {
	t     *testing.T
	seed  uint64
	b     breakers.Breaker
	clock *core.ManualClock

	mu    sync.Mutex // guards got
	got   []core.Transition
	fault atomic.Pointer[string] // the first violation a traffic goroutine or the listener saw

	// pace: traffic goroutine i may have made gate calls, and is waiting at
	// the gate or moving to target (the controller waits for every one to
	// reach it); cond wakes either side.
	pace                sync.Mutex
	cond                *sync.Cond
	stop                bool
	gate, target        atomic.Int64
	ctlStarted, ctlDone atomic.Int64
	ops                 [ctlTraffic]atomic.Int64
	allows              [ctlTraffic][5]int64 // admitted, ErrOpen, ErrHalfOpenFull, ErrForcedOpen, ErrRampingUp
	outcomes, staleDone atomic.Int64
	traffic             sync.WaitGroup
}

func newControlRig(t *testing.T, newB newFunc, seed uint64) *controlRig {
	r := &controlRig{t: t, seed: seed, clock: core.NewManualClock(0)}
	r.cond = sync.NewCond(&r.pace)
	r.b = mustNew(t, newB, core.Config{
		ConsecutiveFailures: 4,
		OpenDuration:        ctlOpen, OpenDurationBackoff: 2, MaxOpenDuration: ctlMaxOpen,
		PermittedCallsInHalfOpen: 2, SuccessesToClose: 2,
		MaxWaitInHalfOpen: 6 * time.Millisecond,
		RampUpDuration:    8 * time.Millisecond, RampUpStartPercent: 50,
		MaxRetryAfter:  ctlHint,
		CollectMetrics: true,
		Clock:          r.clock, OnStateChange: r.listen,
	})
	return r
}

// fail keeps the first violation seen off the test goroutine, for it to
// report.
func (r *controlRig) fail(s string) { r.fault.CompareAndSwap(nil, &s) }

// listen records a notification, checking that it chains from the previous
// one (the first from closed) and carries the next generation.
func (r *controlRig) listen(tr core.Transition) {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := len(r.got)
	switch {
	case n == 0 && tr.From != core.Closed:
		r.fail(fmt.Sprintf("first notification %+v does not start from closed", tr))
	case n > 0 && r.got[n-1].To != tr.From:
		r.fail(fmt.Sprintf("notification %d %+v does not chain from %+v", n, tr, r.got[n-1]))
	case tr.Generation != uint64(n+1):
		r.fail(fmt.Sprintf("notification %d %+v has generation %d, want %d", n, tr, tr.Generation, n+1))
	}
	r.got = append(r.got, tr)
}

// run is traffic goroutine gid: it calls until stopped, as far as the gate
// lets it, and completes its held permits at the end.
func (r *controlRig) run(gid int) {
	rng := rand.New(rand.NewPCG(r.seed, uint64(gid)))
	var held []heldPermit
	for call := 0; r.pass(call); call++ {
		if gid < 2 {
			r.clock.Advance(time.Millisecond)
		}
		held = r.settle(rng, held, call)
		held = r.allow(rng, gid, call, held)
		if r.ops[gid].Add(1) == r.target.Load() {
			r.pace.Lock()
			r.cond.Broadcast()
			r.pace.Unlock()
		}
	}
	for _, h := range held {
		r.complete(rng, h.p)
	}
}

// pass waits at the gate until call may go, and reports false once the
// traffic is stopped.
func (r *controlRig) pass(call int) bool {
	if int64(call) < r.gate.Load() {
		return true
	}
	r.pace.Lock()
	defer r.pace.Unlock()
	for int64(call) >= r.gate.Load() && !r.stop {
		r.cond.Wait()
	}
	return !r.stop
}

// complete records a normal outcome for p: a failure, a success or a
// cancellation (Ignored), through Record or Done.
func (r *controlRig) complete(rng *rand.Rand, p core.Permit) {
	switch n := rng.IntN(20); {
	case n < 7:
		r.b.Record(p, core.Failure)
	case n < 15:
		r.b.Record(p, core.Success)
	case n < 17:
		r.b.Done(p, context.Canceled) // Ignored
	case n < 19:
		r.b.Done(p, errFail)
	default:
		r.b.Done(p, nil)
	}
	r.outcomes.Add(1)
}

// settle completes the held permits whose time has come and returns those
// still held. A permit granted before a control that has since returned is
// stale for good; a quarter of the time it is completed then, often with an
// hour's retry-after hint that must not be acted on.
func (r *controlRig) settle(rng *rand.Rand, held []heldPermit, call int) []heldPermit {
	kept := held[:0]
	for _, h := range held {
		switch {
		case r.ctlDone.Load() > h.before && rng.IntN(4) == 0:
			switch rng.IntN(4) {
			case 0, 1:
				r.b.RecordHint(h.p, ctlHint)
			case 2:
				r.b.Done(h.p, core.WithRetryAfter(errFail, ctlHint))
			default:
				r.b.Record(h.p, core.Outcome(rng.IntN(3)))
			}
			r.outcomes.Add(1)
			r.staleDone.Add(1)
		case call >= h.until:
			r.complete(rng, h.p)
		default:
			kept = append(kept, h)
		}
	}
	return kept
}

// allow makes goroutine gid's call, tallies its result by kind, and either
// completes an admitted permit at once or, a third of the time (up to four
// at once), holds it for a while; it returns the permits held.
func (r *controlRig) allow(rng *rand.Rand, gid, call int, held []heldPermit) []heldPermit {
	p, err := r.b.Allow()
	switch breakers.Reason(err) {
	case nil:
		r.allows[gid][0]++
		if len(held) < 4 && rng.IntN(3) == 0 {
			held = append(held, heldPermit{p: p, before: r.ctlStarted.Load(), until: call + 1 + rng.IntN(40)})
		} else {
			r.complete(rng, p)
		}
	case core.ErrOpen:
		r.allows[gid][1]++
		if p.RetryAfter > ctlMaxOpen+time.Millisecond {
			r.fail(fmt.Sprintf("Allow waits %v in open state, longer than any configured open duration: a stale retry-after hint (%v) was acted on", p.RetryAfter, ctlHint))
		}
	case core.ErrHalfOpenFull:
		r.allows[gid][2]++
	case core.ErrForcedOpen:
		r.allows[gid][3]++
	case core.ErrRampingUp:
		r.allows[gid][4]++
	default:
		r.fail(fmt.Sprintf("Allow: unexpected error %v", err))
	}
	return held
}

func (r *controlRig) stopTraffic() {
	r.pace.Lock()
	r.stop = true
	r.cond.Broadcast()
	r.pace.Unlock()
	r.traffic.Wait()
}

// waitOps lets the traffic on: it returns once every traffic goroutine has
// made at least extra calls more than the one furthest ahead had made when
// it began (so, with extra >= 1, every call that was in flight then has
// returned), and lets each go on to ctlLead calls beyond that, no further.
// The gate keeps the goroutines within ctlLead calls of each other at every
// control, so none runs far ahead of the controls, and it bounds a storm of
// transitions: a goroutine can stay inside one call for as long as others
// keep committing transitions, delivering their notifications (core's
// dispatcher, notify.go). Both sides block rather than spin: goroutines
// spinning on runtime.Gosched, 8 Ps on 2 cores, make the scheduler the
// bottleneck, a hundred times slower.
func (r *controlRig) waitOps(extra int64) {
	r.pace.Lock()
	defer r.pace.Unlock()
	var to int64
	for i := range r.ops {
		to = max(to, r.ops[i].Load())
	}
	to += extra
	r.target.Store(to)
	r.gate.Store(to + ctlLead)
	r.cond.Broadcast()
	for i := range r.ops {
		for r.ops[i].Load() < to {
			r.cond.Wait()
		}
	}
}

// ctlKinds is the number of kinds of control.
const ctlKinds = 6

// control issues control c, of the given kind (0 ForceOpen(0), 1
// ForceOpen(d) with d up to ctlMaxOpen, 2 Disable, 3 MetricsOnly, 4 Reset,
// 5 HalfOpen),
// and returns the state it leaves the breaker in for the two that only a
// control leaves, ForcedOpen and Disabled (ok false for the others).
func (r *controlRig) control(rng *rand.Rand, c, kind int) (want core.State, ok bool) {
	r.ctlStarted.Add(1)
	defer r.ctlDone.Add(1)
	switch kind {
	case 0:
		if err := r.b.ForceOpen(0); err != nil {
			r.t.Fatalf("seed %d control %d: ForceOpen(0): %v", r.seed, c, err)
		}
		return core.ForcedOpen, true
	case 1:
		if err := r.b.ForceOpen(time.Duration(1+rng.IntN(int(ctlMaxOpen/time.Millisecond))) * time.Millisecond); err != nil {
			r.t.Fatalf("seed %d control %d: ForceOpen(d): %v", r.seed, c, err)
		}
	case 2:
		r.b.Disable()
		return core.Disabled, true
	case 3:
		r.b.MetricsOnly()
	case 4:
		r.b.Reset()
	case 5:
		r.b.HalfOpen()
	}
	return 0, false
}

// checkQuiet checks the quiet window after control c moved the breaker to
// want (ForcedOpen or Disabled): only a control leaves them, and no outcome
// counts, so once the calls in flight at the control have returned, nothing
// the traffic does may show. It returns the stale completions inside the
// window.
func (r *controlRig) checkQuiet(rng *rand.Rand, c int, want core.State) (stale int64) {
	t, seed := r.t, r.seed
	r.waitOps(1)
	c1, m1 := r.b.Counts(), r.b.Metrics()
	if c1.State != want || c1.Calls != 0 || c1.ConsecutiveFailures != 0 || c1.ProbesInFlight != 0 {
		t.Fatalf("seed %d control %d: counts %+v right after the control to %v", seed, c, c1, want)
	}
	s0 := r.staleDone.Load()
	r.waitOps(int64(3 + rng.IntN(8)))
	c2, m2 := r.b.Counts(), r.b.Metrics()
	stale = r.staleDone.Load() - s0
	if c2 != c1 {
		t.Fatalf("seed %d control %d: traffic changed a %v breaker: counts %+v, then %+v", seed, c, want, c1, c2)
	}
	if m2.Successes != m1.Successes || m2.Failures != m1.Failures || m2.Ignored != m1.Ignored ||
		m2.SlowCalls != m1.SlowCalls || m2.Transitions != m1.Transitions {
		t.Fatalf("seed %d control %d: traffic was acted on in a %v breaker: metrics %+v, then %+v", seed, c, want, m1, m2)
	}
	if p := r.fault.Load(); p != nil {
		t.Fatalf("seed %d control %d: %s", seed, c, *p)
	}
	return stale
}

func controlRound(t *testing.T, newB newFunc, seed uint64, controls int, f *controlFigures) {
	r := newControlRig(t, newB, seed)
	for gid := range ctlTraffic {
		r.traffic.Go(func() { r.run(gid) })
	}
	defer r.stopTraffic()

	rng := rand.New(rand.NewPCG(seed, 1<<20))
	var issued [ctlKinds]int
	var quietStale, quietWin int64
	lastQuiet := false
	for c := range controls {
		r.waitOps(int64(1 + rng.IntN(12)))
		kind := rng.IntN(ctlKinds)
		issued[kind]++
		want, quiet := r.control(rng, c, kind)
		lastQuiet = quiet
		if quiet {
			quietStale += r.checkQuiet(rng, c, want)
			quietWin++
		}
	}
	r.stopTraffic()
	if p := r.fault.Load(); p != nil {
		t.Fatalf("seed %d: %s", seed, *p)
	}

	r.mu.Lock()
	trs := append([]core.Transition(nil), r.got...)
	r.mu.Unlock()
	cnt := r.b.Counts()
	r.checkNotifications(trs, cnt, controls, issued, lastQuiet, f)
	calls, admitted := r.checkMetrics(trs, cnt)
	f.calls += calls
	f.admitted += admitted
	f.notes += int64(len(trs))
	f.stale += r.staleDone.Load()
	f.quietStale += quietStale
	f.quiet += quietWin
}

// checkNotifications checks the round's notifications trs against the final
// counts cnt and the controls issued (by kind): one per generation, the last
// one matching State(), and as many to and from ForcedOpen and Disabled as
// controls could cause (lastQuiet: the round ended in one of them). It tallies
// the kinds of transition into f.
func (r *controlRig) checkNotifications(trs []core.Transition, cnt core.Counts, controls int, issued [ctlKinds]int, lastQuiet bool, f *controlFigures) {
	t, seed := r.t, r.seed
	if int(cnt.Generation) != len(trs) || len(trs) < controls {
		t.Fatalf("seed %d: %d notifications for generation %d after %d controls", seed, len(trs), cnt.Generation, controls)
	}
	last := trs[len(trs)-1].To
	if st := r.b.State(); st != last && (last != core.Open || st != core.HalfOpen) {
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
}

// checkMetrics checks Metrics at the end of the round: every Allow counted
// once by the kind the callers saw, every outcome once as acted on or
// dropped (the stale ones dropped), and the transitions equal to the
// notifications trs and the generation in cnt. It returns the calls made
// and admitted.
func (r *controlRig) checkMetrics(trs []core.Transition, cnt core.Counts) (calls, admitted int64) {
	t, seed := r.t, r.seed
	m := r.b.Metrics()
	var sum [5]int64
	for gid := range r.allows {
		for k := range sum {
			sum[k] += r.allows[gid][k]
		}
	}
	calls = sum[0] + sum[1] + sum[2] + sum[3] + sum[4]
	gotAllow := [5]uint64{m.Admitted, m.RejectedOpen, m.RejectedHalfOpenFull, m.RejectedForcedOpen, m.RejectedRampUp}
	for k := range sum {
		if gotAllow[k] != uint64(sum[k]) {
			t.Fatalf("seed %d: metrics count Allow results %v, the callers saw %v (admitted, open, half-open full, forced open, ramping up)", seed, gotAllow, sum)
		}
	}
	if acted := m.Successes + m.Failures + m.Ignored + m.Dropped; acted != uint64(r.outcomes.Load()) || m.Dropped < uint64(r.staleDone.Load()) {
		t.Fatalf("seed %d: %d outcomes (%d known stale) recorded, metrics %+v count %d, %d dropped", seed, r.outcomes.Load(), r.staleDone.Load(), m, acted, m.Dropped)
	}
	if m.Transitions != pairsOf(trs) || transitionsSum(m) != uint64(cnt.Generation) {
		t.Fatalf("seed %d: metrics transitions %v, notifications %v, generation %d", seed, m.Transitions, pairsOf(trs), cnt.Generation)
	}
	return calls, sum[0]
}
