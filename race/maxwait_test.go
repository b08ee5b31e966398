package race_test

// Contention tests of the half-open max wait: its restart racing callers.

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/casbreaker/casbreaker/core"
)

// Half-open max wait under contention (Config.MaxWaitInHalfOpen, R6, R8,
// R12). A breaker with N permitted probes trips, goes half-open and hands
// out all N probes, which are lost: taken and never completed. One unit
// before the max wait has passed a call is still ErrHalfOpenFull. Then the
// clock is set to the instant the max wait has passed (or, every other
// round, some way past it) and G goroutines call Allow through a start
// barrier. Every round must commit exactly one half-open -> half-open
// restart (one notification, one Metrics transition), whose caller holds the
// first probe of the new generation; exactly min(N, G) callers hold probes,
// all of the new generation, and the rest get ErrHalfOpenFull (the new
// generation's own max wait has not passed). Afterwards the N lost probes
// complete, as failures among others, and change nothing: they are stale.
func TestMaxWaitRestartAdmitsExactlyOne(t *testing.T) {
	procs(t, 8)
	for _, n := range []int{1, 3, 64} {
		for _, g := range []int{2, 8, 64} {
			t.Run(fmt.Sprintf("N=%d/G=%d", n, g), func(t *testing.T) {
				forEachImpl(t, func(t *testing.T, newB newFunc) {
					rounds := size(3000, max(4, 400/g))
					maxWaitRounds(t, newB, n, g, rounds)
					t.Logf("%d rounds, each exactly one restart and %d probes", rounds, min(n, g))
				})
			})
		}
	}
}

func maxWaitRounds(t *testing.T, newB newFunc, n, g, rounds int) {
	// A max wait of 1 s is kept in units of 1 ms: the generation that starts
	// at 1 s has waited long enough at exactly 2 s.
	const open, maxWait = time.Second, time.Second
	want := min(n, g)
	workers := newGang(g)
	defer workers.stop()
	permits := make([]core.Permit, g)
	errs := make([]error, g)
	lost := make([]core.Permit, n)
	for round := range rounds {
		clock := core.NewManualClock(0)
		var rec transitions
		b := mustNew(t, newB, core.Config{
			ConsecutiveFailures:      1,
			OpenDuration:             open,
			PermittedCallsInHalfOpen: n,
			MaxWaitInHalfOpen:        maxWait,
			CollectMetrics:           true,
			Clock:                    clock,
			OnStateChange:            rec.listen,
		})
		tripWithOneFailure(t, b, round)
		clock.Set(open)
		for i := range n {
			var err error
			if lost[i], err = b.Allow(); err != nil || !lost[i].Probe || lost[i].Generation != 2 {
				t.Fatalf("round %d: probe %d of %d: %+v %v, want a probe of generation 2", round, i, n, lost[i], err)
			}
		}
		restart := open + maxWait
		clock.Set(restart - time.Millisecond) // one unit short of the max wait
		if _, err := b.Allow(); !errors.Is(err, core.ErrHalfOpenFull) {
			t.Fatalf("round %d: one unit before the max wait: %v, want ErrHalfOpenFull", round, err)
		}
		if round%2 == 1 {
			restart += time.Duration(1+round%7) * 100 * time.Millisecond // past it, within the next max wait
		}
		clock.Set(restart)

		workers.run(func(i int) { permits[i], errs[i] = b.Allow() })

		admitted := 0
		for i := range g {
			switch {
			case errs[i] == nil:
				admitted++
				if !permits[i].Probe || permits[i].Generation != 3 {
					t.Fatalf("round %d: caller %d got %+v, want a probe of generation 3", round, i, permits[i])
				}
			case !errors.Is(errs[i], core.ErrHalfOpenFull):
				t.Fatalf("round %d: caller %d: %v, want ErrHalfOpenFull", round, i, errs[i])
			}
		}
		if admitted != want {
			t.Fatalf("round %d: %d of %d callers admitted after the max wait with %d permitted probes, want exactly %d", round, admitted, g, n, want)
		}
		c := b.Counts()
		if c.State != core.HalfOpen || c.Generation != 3 || c.ProbesInFlight != want || c.ProbeSuccesses != 0 {
			t.Fatalf("round %d: counts %+v, want half-open generation 3 with %d probes in flight", round, c, want)
		}
		trs := rec.get()
		if len(trs) != 3 || trs[2].From != core.HalfOpen || trs[2].To != core.HalfOpen || trs[2].Generation != 3 || trs[2].At != restart {
			t.Fatalf("round %d: notifications %+v, want C->O, O->H, then exactly one H->H at generation 3, t=%v", round, trs, restart)
		}
		m := b.Metrics()
		if m.Transitions[core.HalfOpen][core.HalfOpen] != 1 || transitionsSum(m) != 3 ||
			m.Admitted != uint64(1+n+want) || m.RejectedHalfOpenFull != uint64(1+g-want) {
			t.Fatalf("round %d: metrics %+v, want 3 transitions (one H->H), %d admitted, %d rejected half-open full", round, m, 1+n+want, 1+g-want)
		}

		// The lost probes of generation 2 come back: stale, they change nothing.
		for i, p := range lost {
			b.Record(p, core.Outcome(i%3))
		}
		if c2 := b.Counts(); c2 != c {
			t.Fatalf("round %d: the lost probes' outcomes changed the counts from %+v to %+v", round, c, c2)
		}
		if m2 := b.Metrics(); m2.Dropped != uint64(n) || m2.Successes+m2.Ignored != 0 || m2.Failures != 1 || len(rec.get()) != 3 {
			t.Fatalf("round %d: after %d stale probe outcomes: metrics %+v, %d notifications; want them all dropped and only the trip's failure acted on", round, n, m2, len(rec.get()))
		}
	}
}
