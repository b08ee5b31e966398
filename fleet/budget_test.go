package fleet

import (
	"testing"

	"github.com/casbreaker/casbreaker/core"
)

// TestProbeBudget: ten members of one fleet, a dependency that keeps
// failing. Once the fleet is open, each open period ends with at most the
// fleet's probe budget of probes across all ten members, where ten plain
// breakers send ten.
func TestProbeBudget(t *testing.T) {
	const n, periods = 10, 3
	srv := startRedis(t)
	f := newFleet(t, srv, n, func(int) Options { return Options{Quorum: 2, Probes: 1} })
	for i := range n {
		f.trip(i)
	}
	f.waitVersion(1)
	for period := range periods {
		version := f.members[0].Stats().Version
		f.advance(openDuration)
		probes := 0
		for range 5 {
			for _, m := range f.members {
				if call(m) {
					probes++
				}
			}
		}
		if probes != 1 {
			var storeErrors uint64
			for _, m := range f.members {
				storeErrors += m.Stats().StoreErrors
			}
			t.Fatalf("open period %d: %d probes across the fleet, want 1 (the budget); %d store errors", period, probes, storeErrors)
		}
		f.waitVersion(version + 1) // the probe's failure re-opened the fleet
		for i, m := range f.members {
			if !m.Stats().FleetOpen || m.State() != core.Open {
				t.Fatalf("open period %d: member %d is %v (fleet open %v) after the re-open", period, i, m.State(), m.Stats().FleetOpen)
			}
		}
	}

	// The same ten breakers without the fleet: every one probes.
	clock := core.NewManualClock(0)
	var plain []*core.Breaker
	for range n {
		b, err := core.New(testConfig(clock))
		if err != nil {
			t.Fatal(err)
		}
		for range 3 {
			p, _ := b.Allow()
			b.Done(p, errDown)
		}
		plain = append(plain, b)
	}
	for period := range periods {
		clock.Advance(openDuration)
		probes := 0
		for range 5 {
			for _, b := range plain {
				if p, err := b.Allow(); err == nil {
					probes++
					b.Done(p, errDown)
				}
			}
		}
		if probes != n {
			t.Fatalf("without the fleet, open period %d: %d probes, want %d", period, probes, n)
		}
	}
}
