package race_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/casbreaker/casbreaker/core"
)

// Exact probe admission (R6, R4, R12; scenario S3, eight callers;
// regressions B01, B03, B04, B12). For N permitted half-open calls and G
// goroutines: trip the breaker, set the manual clock to the exact expiry
// instant, release all G through a start barrier, each calling Allow once.
// Every round must admit exactly min(N, G) probes, all of the new generation,
// commit exactly one open -> half-open transition (one notification), leave
// exactly min(N, G) probes in flight, and refuse the rest with
// ErrHalfOpenFull. One probe too many in one round fails the test.
func TestProbeAdmissionIsExact(t *testing.T) {
	procs(t, 8)
	for _, n := range []int{1, 3, 64} {
		for _, g := range []int{2, 8, 64, 512} {
			t.Run(fmt.Sprintf("N=%d/G=%d", n, g), func(t *testing.T) {
				forEachImpl(t, func(t *testing.T, newB newFunc) {
					admissionRounds(t, newB, n, g, size(10_000, admissionShort(g)))
				})
			})
		}
	}
}

// admissionShort keeps the -short run to about the same number of Allow
// calls per combination, whatever G is.
func admissionShort(g int) int { return max(8, 1600/g) }

func admissionRounds(t *testing.T, newB newFunc, n, g, rounds int) {
	const open = time.Second
	want := min(n, g)
	workers := newGang(g)
	defer workers.stop()
	permits := make([]core.Permit, g)
	errs := make([]error, g)
	for round := range rounds {
		clock := core.NewManualClock(0)
		var rec transitions
		b := mustNew(t, newB, core.Config{
			ConsecutiveFailures:      1,
			OpenDuration:             open,
			PermittedCallsInHalfOpen: n,
			Clock:                    clock,
			OnStateChange:            rec.listen,
		})
		tripWithOneFailure(t, b, round)
		clock.Set(open) // the exact expiry instant (R4: inclusive)

		workers.run(func(i int) { permits[i], errs[i] = b.Allow() })

		admitted := 0
		for i := range g {
			switch {
			case errs[i] == nil:
				admitted++
				if !permits[i].Probe || permits[i].Generation != 2 {
					t.Fatalf("round %d: caller %d got %+v, want a probe of generation 2", round, i, permits[i])
				}
			case !errors.Is(errs[i], core.ErrHalfOpenFull) || !errors.Is(errs[i], core.ErrRejected):
				t.Fatalf("round %d: caller %d: %v, want ErrHalfOpenFull", round, i, errs[i])
			}
		}
		if admitted != want {
			t.Fatalf("round %d: %d of %d callers admitted with %d permitted probes, want exactly %d", round, admitted, g, n, want)
		}
		c := b.Counts()
		if c.State != core.HalfOpen || c.Generation != 2 || c.ProbesInFlight != want || c.ProbeSuccesses != 0 {
			t.Fatalf("round %d: counts %+v, want half-open generation 2 with %d probes in flight", round, c, want)
		}
		trs := rec.get()
		if len(trs) != 2 || trs[1].From != core.Open || trs[1].To != core.HalfOpen || trs[1].Generation != 2 || trs[1].At != open {
			t.Fatalf("round %d: notifications %+v, want C->O then exactly one O->H at generation 2, t=1s", round, trs)
		}
	}
}
