package fuzz_test

import (
	"errors"
	"testing"
	"time"

	"github.com/casbreaker/casbreaker/core"
	"github.com/casbreaker/casbreaker/internal/breakers"
)

// TestForgedProbePermit is the case FuzzDifferential leaves out: a probe
// outcome for a probe that is no longer in flight (a second Done for the
// same permit, or a permit built by hand, which core.Permit's doc says is
// treated as a permit of the generation it names). Two probes are permitted;
// one is taken and its outcome recorded twice as ignored. Whatever the
// second call means, it must not hand out a slot nobody holds: afterwards
// at most two probes may be admitted (R6, R10: no path leaks or invents a
// probe slot), and the two implementations must agree.
//
// Both implementations ignore a probe outcome when no probe is in flight.
// (A baseline that decremented its in-flight count to -1 would then admit
// three probes.)
func TestForgedProbePermit(t *testing.T) {
	for _, im := range breakers.All {
		t.Run("impl="+im.Name, func(t *testing.T) {
			clk := core.NewManualClock(0)
			b, err := im.New(core.Config{ConsecutiveFailures: 1, OpenDuration: time.Second, PermittedCallsInHalfOpen: 2, Clock: clk})
			if err != nil {
				t.Fatal(err)
			}
			p, _ := b.Allow()
			b.Record(p, core.Failure)
			clk.Set(time.Second)
			probe, err := b.Allow()
			if err != nil || !probe.Probe {
				t.Fatalf("Allow at expiry: %+v %v", probe, err)
			}
			b.Record(probe, core.Ignored) // the slot comes back
			b.Record(probe, core.Ignored) // again: there is no slot to return
			admitted := 0
			for range 4 {
				if _, err := b.Allow(); err == nil {
					admitted++
				} else if !errors.Is(err, core.ErrHalfOpenFull) {
					t.Fatalf("Allow: %v, want ErrHalfOpenFull", err)
				}
			}
			if admitted != 2 {
				t.Fatalf("%d probes admitted after a repeated probe outcome, want 2 (counts %+v)", admitted, b.Counts())
			}
		})
	}
}
