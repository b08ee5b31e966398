package fleet

import (
	"strings"
	"testing"

	"github.com/casbreaker/casbreaker/core"
	"github.com/casbreaker/casbreaker/observe"
)

// TestObserve: a member is an observe.Breaker and an observe.FleetMember,
// so the exporters read its breaker's series and the fleet's: the state
// follows the fleet's adoption, and the fleet series count the trip it
// published, the states it adopted, the lease it was granted and the one
// it was refused, and show it local once the store is gone.
func TestObserve(t *testing.T) {
	srv := startRedis(t)
	f := newFleet(t, srv, 2, func(int) Options { return Options{Quorum: 2, Probes: 1} })
	// The members share a breaker name: a reader each.
	readers := make([]*observe.Reader, len(f.members))
	for i, m := range f.members {
		r, err := observe.NewReader(mustBreakers(t, m), nil)
		if err != nil {
			t.Fatal(err)
		}
		readers[i] = r
	}
	read := func(i int) (core.State, map[string]uint64) {
		t.Helper()
		var state core.State
		series := map[string]uint64{}
		if err := readers[i].Read(func(s observe.Sample) {
			state = s.State
			s.Each(func(m *observe.Metric, labels []string, v observe.Point) {
				if strings.HasPrefix(m.Name, "fleet_") {
					series[m.Name+"{"+strings.Join(labels, ",")+"}"] = v.Count
				}
			})
		}); err != nil {
			t.Fatal(err)
		}
		return state, series
	}
	check := func(i int, want map[string]uint64) {
		t.Helper()
		_, got := read(i)
		for k, v := range want {
			if got[k] != v {
				t.Errorf("member %d: %s is %d, want %d (all: %v)", i, k, got[k], v, got)
			}
		}
		if len(got) != 9 {
			t.Errorf("member %d has %d fleet series, want 9: %v", i, len(got), got)
		}
	}

	f.trip(0)
	f.trip(1)
	f.waitVersion(1)
	if state, _ := read(0); state != core.Open {
		t.Fatalf("the reader saw member 0 %v, want open", state)
	}
	eventually(t, "both trips to be recorded", func() bool {
		return f.members[0].Stats().Published+f.members[1].Stats().Published == 2
	})
	for i := range f.members {
		check(i, map[string]uint64{"fleet_mode{fleet}": 1, "fleet_mode{local}": 0, "fleet_published_trips{}": 1,
			"fleet_adoptions{open}": 1, "fleet_adoptions{closed}": 0, "fleet_leases{granted}": 0, "fleet_leases{refused}": 0,
			"fleet_store_errors{}": 0, "fleet_dropped_reports{}": 0})
	}

	// The open period ends: member 0 is granted the one lease, member 1
	// refused; member 0's probe succeeds, and the fleet closes.
	f.advance(openDuration)
	p, err := f.members[0].Allow()
	if err != nil || !p.Probe {
		t.Fatalf("member 0's half-open Allow: %+v, %v; want a leased probe", p, err)
	}
	if _, err := f.members[1].Allow(); err == nil {
		t.Fatal("member 1 was admitted with the fleet's one lease taken")
	}
	f.members[0].Done(p, nil)
	f.waitVersion(2)
	check(0, map[string]uint64{"fleet_leases{granted}": 1, "fleet_leases{refused}": 0, "fleet_adoptions{closed}": 1})
	check(1, map[string]uint64{"fleet_leases{granted}": 0, "fleet_leases{refused}": 1, "fleet_adoptions{closed}": 1})

	srv.kill()
	eventually(t, "member 0 to run local", func() bool { return f.members[0].Stats().Local })
	_, got := read(0)
	if got["fleet_mode{local}"] != 1 || got["fleet_mode{fleet}"] != 0 || got["fleet_store_errors{}"] == 0 {
		t.Fatalf("member 0 with the store gone: %v, want local mode and store errors", got)
	}
}

func mustBreakers(t *testing.T, bs ...observe.Breaker) observe.Source {
	t.Helper()
	src, err := observe.Breakers(bs...)
	if err != nil {
		t.Fatal(err)
	}
	return src
}
