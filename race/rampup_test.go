package race_test

// Contention tests of the ramp-up after closing.

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/casbreaker/casbreaker/core"
	"github.com/casbreaker/casbreaker/internal/breakers"
)

// tickClock gives every reading its own value: each Now moves it 1 ns on
// first, and counts itself.
type tickClock struct{ now, reads atomic.Int64 }

func (c *tickClock) Now() time.Duration {
	c.reads.Add(1)
	return time.Duration(c.now.Add(1))
}

func (c *tickClock) Set(t time.Duration) { c.now.Store(int64(t)) }

// Ramp-up under contention (Config.RampUpDuration, R13). A breaker with a
// 4 ms ramp (units of 1 ms) and only the consecutive-failures rule, at its
// highest threshold (so it never trips), is forced open, probed and closed:
// it ramps. Its clock hands every reading its own value, 1 ns apart, so
// each ramping Allow decides on a reading of its own, and which readings
// admit is a function of the reading alone (docs/design.md, Ramp-up after
// close). An oracle, a second breaker of the same implementation closed at
// the same reading on a manual clock, is asked sequentially at each reading.
//
//   - Phase 1, at the start of the ramp: G goroutines make K1 calls each,
//     recording successes and failures. Every Allow reads the clock exactly
//     once, so the admitted calls are exactly the readings that the oracle
//     admits, whatever the interleaving.
//   - One sequential success resets the run of failures.
//   - Phase 2: the clock is set G*K2/4 readings before the end of the ramp,
//     and G goroutines make K2 calls each and record every admitted one as
//     a failure: the ramp ends a quarter of the way in, and the Allow that
//     clears the ramp flag (closed -> closed in the same generation, a CAS
//     in the lock-free word) races the Records incrementing the run of
//     consecutive failures in the same word. A ramping Allow that finds
//     the word moved after its reading (here: the flag cleared) decides
//     again from the new word, so its reading, if before the end, is
//     decided by no one: the rejections are the oracle's for the readings
//     before the end, less at most one per other goroutine (each has at
//     most one Allow in flight across the clear), and never more; the run of
//     consecutive failures ends at exactly the failures recorded (no
//     increment lost to the flag clear, none counted twice); the generation
//     is unchanged; and the flag is cleared for good: afterwards Allow reads
//     no clock and admits everything.
//   - Metrics: admitted, ramp rejections, successes and failures are exactly
//     what the callers saw and recorded; nothing dropped; three transitions.
func TestRampUpUnderContention(t *testing.T) {
	procs(t, 8)
	const g = 8
	rounds, k1, k2 := size(2000, 40), 50, 200
	forEachImpl(t, func(t *testing.T, newB newFunc) {
		workers := newGang(g)
		defer workers.stop()
		var admitted, rejected, failures int
		for round := range rounds {
			a, r, f := rampRound(t, newB, workers, g, k1, k2, round)
			admitted, rejected, failures = admitted+a, rejected+r, failures+f
		}
		t.Logf("%d rounds x %d calls: %d admitted, %d shed by the ramp; %d concurrent consecutive failures across the ramp's end, all counted",
			rounds, g*(k1+k2), admitted, rejected, failures)
	})
}

// rampRig is one round of TestRampUpUnderContention: a breaker closed
// through a probe, so that it ramps, on a tickClock; the oracle, the same
// ramp closed at the same reading on a manual clock; and the tallies of the
// phase now running.
type rampRig struct {
	t       *testing.T
	round   int
	pct     int // the ramp's start percent
	b       breakers.Breaker
	clk     *tickClock
	rec     *transitions
	end     time.Duration // the first reading at which the ramp is over
	oracle  breakers.Breaker
	oclk    *core.ManualClock
	workers *gang
	counts  [][4]int // per goroutine: admitted, shed, failures recorded, other errors
}

// newRampRig builds round's breaker and oracle and closes both, at the same
// reading, through a probe after ForceOpen.
func newRampRig(t *testing.T, newB newFunc, workers *gang, g, round int) *rampRig {
	r := &rampRig{t: t, round: round, pct: []int{10, 50, 90}[round%3], clk: &tickClock{}, rec: &transitions{},
		workers: workers, counts: make([][4]int, g)}
	cfg := core.Config{
		ConsecutiveFailures: core.MaxConsecutiveFailures,
		OpenDuration:        time.Second,
		RampUpDuration:      4 * time.Millisecond, RampUpStartPercent: r.pct,
		CollectMetrics: true,
		Clock:          r.clk, OnStateChange: r.rec.listen,
	}
	r.b = mustNew(t, newB, cfg)
	if err := r.b.ForceOpen(time.Second); err != nil {
		t.Fatal(err)
	}
	r.clk.Set(2 * time.Second)
	p, err := r.b.Allow()
	if err != nil || !p.Probe {
		t.Fatalf("round %d: %+v %v, want the probe", round, p, err)
	}
	r.b.Record(p, core.Success)
	trs := r.rec.get()
	if len(trs) != 3 || trs[2].From != core.HalfOpen || trs[2].To != core.Closed {
		t.Fatalf("round %d: notifications %+v, want C->O, O->H, H->C", round, trs)
	}
	// With units of 1 ms, the first whole millisecond at or after the close
	// plus the ramp-up (Config.MaxWaitInHalfOpen's rounding).
	r.end = (trs[2].At + cfg.RampUpDuration + time.Millisecond - 1).Truncate(time.Millisecond)

	r.oclk = core.NewManualClock(0)
	ocfg := cfg
	ocfg.Clock, ocfg.OnStateChange = r.oclk, nil
	r.oracle = mustNew(t, newB, ocfg)
	if err := r.oracle.ForceOpen(time.Second); err != nil {
		t.Fatal(err)
	}
	r.oclk.Set(trs[2].At)
	if op, err := r.oracle.Allow(); err != nil || !op.Probe {
		t.Fatalf("round %d: oracle %+v %v, want the probe", round, op, err)
	} else {
		r.oracle.Record(op, core.Success)
	}
	if c := r.oracle.Counts(); c.State != core.Closed || c.Generation != 3 {
		t.Fatalf("round %d: oracle %+v, want closed at generation 3", round, c)
	}
	return r
}

// expect is how many of the n readings after from the ramp sheds. A
// ramping Allow that is admitted or shed changes nothing, so the oracle
// answers each reading as the ramp would at it; it stops before the end,
// whose Allow would end its ramp.
func (r *rampRig) expect(from time.Duration, n int) (shed int) {
	for at := from + 1; at <= from+time.Duration(n) && at < r.end; at++ {
		r.oclk.Set(at)
		switch _, err := r.oracle.Allow(); breakers.Reason(err) {
		case nil:
		case core.ErrRampingUp:
			shed++
		default:
			r.t.Fatalf("round %d: oracle at %v: %v", r.round, at, err)
		}
	}
	return shed
}

// phase has every goroutine make k calls, recording outcome(goroutine,
// call) for each admitted one, and returns the calls admitted, shed, and
// recorded as failures.
func (r *rampRig) phase(k int, outcome func(i, j int) core.Outcome) (admitted, shed, failures int) {
	for i := range r.counts {
		r.counts[i] = [4]int{}
	}
	r.workers.run(func(i int) {
		for j := range k {
			p, err := r.b.Allow()
			switch breakers.Reason(err) {
			case nil:
				r.counts[i][0]++
				o := outcome(i, j)
				if o == core.Failure {
					r.counts[i][2]++
				}
				r.b.Record(p, o)
			case core.ErrRampingUp:
				r.counts[i][1]++
			default:
				r.counts[i][3]++
			}
		}
	})
	for _, c := range r.counts {
		if c[3] != 0 {
			r.t.Fatalf("round %d: %d calls refused with an error other than ErrRampingUp", r.round, c[3])
		}
		admitted, shed, failures = admitted+c[0], shed+c[1], failures+c[2]
	}
	return admitted, shed, failures
}

// succeedOnce calls until one call is admitted and records it as a success,
// which resets the run of failures, and returns the calls admitted (one) and
// shed.
func (r *rampRig) succeedOnce() (admitted, shed int) {
	for {
		p, err := r.b.Allow()
		if errors.Is(err, core.ErrRampingUp) {
			shed++
			continue
		}
		if err != nil {
			r.t.Fatalf("round %d: %v", r.round, err)
		}
		r.b.Record(p, core.Success)
		return 1, shed
	}
}

// checkRampOver checks that the ramp flag is cleared for good: Allow reads
// no clock and admits everything, in the same generation, with no further
// notification.
func (r *rampRig) checkRampOver() {
	t, round := r.t, r.round
	reads := r.clk.reads.Load()
	for i := range 16 {
		if p, err := r.b.Allow(); err != nil || p.Generation != 3 {
			t.Fatalf("round %d: call %d after the ramp: %+v %v", round, i, p, err)
		}
	}
	if n := r.clk.reads.Load() - reads; n != 0 {
		t.Fatalf("round %d: Allow after the end of the ramp read the clock %d times: the ramp flag is still set", round, n)
	}
	if n := len(r.rec.get()); n != 3 {
		t.Fatalf("round %d: %d notifications, want 3", round, n)
	}
}

func rampRound(t *testing.T, newB newFunc, workers *gang, g, k1, k2, round int) (admitted, rejected, phase2 int) {
	r := newRampRig(t, newB, workers, g, round)
	pct, clk := r.pct, r.clk

	// Phase 1: the start of the ramp.
	from, reads := clk.now.Load(), clk.reads.Load()
	a1, r1, f1 := r.phase(k1, func(i, j int) core.Outcome {
		if (i+j)%3 == 0 {
			return core.Failure
		}
		return core.Success
	})
	if n := clk.reads.Load() - reads; n != int64(g*k1) {
		t.Fatalf("round %d: %d ramping calls read the clock %d times, want once each", round, g*k1, n)
	}
	if want := r.expect(time.Duration(from), g*k1); r1 != want || a1+r1 != g*k1 {
		t.Fatalf("round %d (start %d%%): phase 1 admitted %d and shed %d of %d calls; the ramp sheds exactly %d of their readings", round, pct, a1, r1, g*k1, want)
	}

	// One success in between: the run of failures starts at zero.
	sepA, sepR := r.succeedOnce()
	if c := r.b.Counts(); c.State != core.Closed || c.Generation != 3 || c.ConsecutiveFailures != 0 {
		t.Fatalf("round %d: counts %+v after a success, want closed generation 3 with no failures in a row", round, c)
	}

	// Phase 2: across the end of the ramp, failures only.
	before := g * k2 / 4
	clk.Set(r.end - time.Duration(before))
	reads = clk.reads.Load()
	a2, r2, f2 := r.phase(k2, func(int, int) core.Outcome { return core.Failure })
	if want := r.expect(r.end-time.Duration(before), before); r2 > want || r2 < want-(g-1) || a2+r2 != g*k2 || f2 != a2 {
		t.Fatalf("round %d (start %d%%): phase 2 admitted %d and shed %d of %d calls; the ramp sheds %d of the readings before its end, less at most the %d Allows that can be in flight across the clear", round, pct, a2, r2, g*k2, want, g-1)
	}
	if n := clk.reads.Load() - reads; n < int64(before) {
		t.Fatalf("round %d: %d clock readings in phase 2, fewer than the %d to the end of the ramp", round, n, before)
	}
	c := r.b.Counts()
	if c.State != core.Closed || c.Generation != 3 || c.ConsecutiveFailures != uint64(f2) {
		t.Fatalf("round %d: counts %+v after %d failures recorded across the end of the ramp, want closed generation 3 with %d consecutive failures", round, c, f2, f2)
	}
	m := r.b.Metrics()
	wantM := core.Metrics{
		Admitted:       uint64(1 + a1 + sepA + a2),
		RejectedRampUp: uint64(r1 + sepR + r2),
		Successes:      uint64(1 + a1 - f1 + sepA),
		Failures:       uint64(f1 + f2),
	}
	wantM.Transitions[core.Closed][core.Open] = 1
	wantM.Transitions[core.Open][core.HalfOpen] = 1
	wantM.Transitions[core.HalfOpen][core.Closed] = 1
	if m != wantM {
		t.Fatalf("round %d: metrics\n%+v, want\n%+v", round, m, wantM)
	}
	r.checkRampOver()
	return a1 + a2, r1 + r2, f2
}
