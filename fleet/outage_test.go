package fleet

import (
	"errors"
	"syscall"
	"testing"
	"time"

	"github.com/casbreaker/casbreaker/core"
)

// storeTimeout is the outage tests' store deadline: short, but long
// enough that a loaded machine does not miss it while the store answers.
const storeTimeout = 200 * time.Millisecond

// outageOptions keep a member quick to fall back and to come back.
func outageOptions(int) Options {
	return Options{Quorum: 2, StoreTimeout: storeTimeout, MinBackoff: 5 * time.Millisecond, MaxBackoff: 20 * time.Millisecond}
}

// blockBound is the longest a test lets a call take while the store is
// down or hung: the store deadline plus room for a shared machine's
// scheduling under the race detector. The figure each run measured is
// logged.
const blockBound = time.Second

// TestStoreKilled: redis-server killed (SIGKILL) while the fleet is open.
// The half-open probes ask for their lease, fail at once and go out as
// local probes (every member probes: the fleet's budget needs the store),
// no call blocks past the store deadline, every member runs as a local
// breaker; after the restart (an empty store) every member rejoins, and
// their re-opens form the quorum again.
func TestStoreKilled(t *testing.T) {
	outage(t, func(srv *redisServer) { srv.kill() }, func(srv *redisServer) { srv.restart() })
}

// TestStoreHung: redis-server stopped (SIGSTOP) while the fleet is open:
// connections are accepted and never answered. As with a dead store, no
// call blocks past the store deadline and every member falls back to
// local; after SIGCONT every member rejoins.
func TestStoreHung(t *testing.T) {
	outage(t, func(srv *redisServer) { srv.signal(syscall.SIGSTOP) }, func(srv *redisServer) { srv.signal(syscall.SIGCONT) })
}

func outage(t *testing.T, down, up func(*redisServer)) {
	const n = 3
	srv := startRedis(t)
	f := newFleet(t, srv, n, outageOptions)
	f.trip(0)
	f.trip(1)
	f.waitVersion(1)

	down(srv)
	f.advance(openDuration)
	var longest time.Duration
	probes := 0
	for range 3 {
		for i, m := range f.members {
			start := time.Now()
			p, err := m.Allow()
			longest = max(longest, time.Since(start))
			if err != nil {
				if !errors.Is(err, core.ErrOpen) {
					t.Fatalf("member %d with the store down: %v", i, err)
				}
				continue
			}
			probes++
			m.Done(p, errDown)
		}
	}
	t.Logf("the longest Allow with the store down took %v (store deadline %v)", longest, storeTimeout)
	if longest > blockBound {
		t.Fatalf("an Allow took %v with the store down, past the store deadline of %v", longest, storeTimeout)
	}
	if probes != n {
		t.Fatalf("%d probes with the store down, want %d: every member probes as a local breaker", probes, n)
	}
	eventually(t, "every member to run as a local breaker", func() bool {
		for _, m := range f.members {
			if !m.Stats().Local {
				return false
			}
		}
		return true
	})

	up(srv)
	eventually(t, "every member to rejoin", func() bool {
		for _, m := range f.members {
			if m.Stats().Local {
				return false
			}
		}
		return true
	})
	// Every member is open from its local probe's failure, a re-open it
	// could not publish while the store was out of reach (or that the
	// restarted store lost): published on rejoining, they form the quorum
	// again, or find the fleet still open (SIGSTOP kept its state).
	eventually(t, "every member to adopt the fleet's open state again", func() bool {
		for _, m := range f.members {
			if !m.Stats().FleetOpen || m.State() != core.Open {
				return false
			}
		}
		return true
	})
	// The next half-open period has the fleet's probe budget again,
	// unless a store call missed its short deadline (a loaded machine):
	// then members probed as local breakers, as they should, and the
	// period says nothing about the budget.
	storeErrors := func() (n uint64) {
		for _, m := range f.members {
			n += m.Stats().StoreErrors
		}
		return n
	}
	v, before := f.members[0].Stats().Version, storeErrors()
	f.advance(openDuration)
	probes = 0
	for _, m := range f.members {
		if call(m) {
			probes++
		}
	}
	if storeErrors() != before {
		t.Logf("the half-open period after rejoining had store calls past their deadline and %d probes: no budget to check", probes)
		return
	}
	if probes != 1 {
		t.Fatalf("%d probes in the first half-open period after rejoining, want 1 (the budget)", probes)
	}
	f.waitVersion(v + 1)
	for i, m := range f.members {
		if !m.Stats().FleetOpen || m.State() != core.Open {
			t.Fatalf("member %d is %v (fleet open %v) after the fleet re-opened", i, m.State(), m.Stats().FleetOpen)
		}
	}
}

// TestFailClosed: with FailClosed, a half-open probe of a fleet open
// period is refused while the store cannot be reached, with
// ErrStoreUnavailable; once the store is back (empty) the member probes.
func TestFailClosed(t *testing.T) {
	srv := startRedis(t)
	f := newFleet(t, srv, 1, func(int) Options {
		o := outageOptions(0)
		o.Quorum, o.FailClosed = 1, true
		return o
	})
	m := f.members[0]
	f.trip(0)
	f.waitVersion(1)
	srv.kill()
	f.advance(openDuration)
	for range 3 {
		p, err := m.Allow()
		if !errors.Is(err, ErrStoreUnavailable) || !errors.Is(err, core.ErrHalfOpenFull) || p.RetryAfter <= 0 {
			t.Fatalf("a probe with the store down and FailClosed: %+v, %v; want ErrStoreUnavailable with a wait", p, err)
		}
	}
	srv.restart()
	eventually(t, "the member to rejoin the empty store", func() bool { s := m.Stats(); return !s.Local && !s.FleetOpen })
	if !call(m) {
		t.Fatal("the member refused its probe after the store came back empty")
	}
}

// TestStoreKilledMidLease: redis-server killed while a member holds the
// fleet's one probe lease. The holder's report cannot reach the store
// (dropped, counted) but the holder's breaker takes the outcome and gives
// its slot back, and the member forgets the lease; the other member's
// probe asks the dead store, fails at once and goes out as a local
// probe. After the restart (an empty store) both rejoin, and a trip and
// a half-open period later the fleet's budget of one probe holds again.
func TestStoreKilledMidLease(t *testing.T) {
	srv := startRedis(t)
	f := newFleet(t, srv, 2, func(int) Options {
		o := outageOptions(0)
		// A dead store refuses connections at once; a live one gets a
		// generous deadline, so that a loaded machine does not make a
		// member local in the parts about the lease.
		o.Quorum, o.StoreTimeout = 1, 5*time.Second
		return o
	})
	holder, other := f.members[0], f.members[1]
	f.trip(0)
	f.waitVersion(1)
	f.advance(openDuration)
	p, err := holder.Allow()
	if err != nil || !p.Probe {
		t.Fatalf("the fleet's one probe: %+v, %v", p, err)
	}
	if _, err := other.Allow(); !errors.Is(err, ErrLeaseRefused) {
		t.Fatalf("a second probe with the lease held: %v", err)
	}
	srv.kill()
	holder.Done(p, nil)
	if c := holder.Counts(); c.ProbesInFlight != 0 || holder.State() != core.Closed {
		t.Fatalf("the holder after its probe's success with the store dead: %v, %+v", holder.State(), c)
	}
	holder.mu.Lock()
	leases := len(holder.leases)
	holder.mu.Unlock()
	if leases != 0 {
		t.Fatalf("the holder keeps %d leases after its probe's report", leases)
	}
	eventually(t, "the holder's report dropped, the store dead", func() bool { return holder.Stats().DroppedReports == 1 })
	// other's refusal's wait is its own: past it, it asks the dead store.
	f.clocks[1].Advance(time.Minute)
	q, err := other.Allow()
	if err != nil || !q.Probe {
		t.Fatalf("a probe with the store dead: %+v, %v; want a local probe", q, err)
	}
	other.Done(q, errDown)
	if c := other.Counts(); c.ProbesInFlight != 0 || other.State() != core.Open {
		t.Fatalf("the other member after its local probe failed: %v, %+v", other.State(), c)
	}

	srv.restart()
	eventually(t, "both members to rejoin", func() bool { return !holder.Stats().Local && !other.Stats().Local })
	eventually(t, "the other member's re-open adopted by both", func() bool {
		return holder.Stats().FleetOpen && other.Stats().FleetOpen && holder.State() == core.Open
	})
	f.advance(time.Hour)
	probes := 0
	for _, m := range f.members {
		if call(m) {
			probes++
		}
	}
	if probes != 1 {
		t.Fatalf("%d probes in the half-open period after the restart, want 1 (the budget)", probes)
	}
}

// TestFailClosedAfterClose: a FailClosed member closed while its fleet is
// open goes on as a plain local breaker, as Close says: its half-open
// probes go out and decide, rather than being refused for want of a store
// it no longer asks.
func TestFailClosedAfterClose(t *testing.T) {
	srv := startRedis(t)
	f := newFleet(t, srv, 1, func(int) Options { return Options{Quorum: 1, FailClosed: true} })
	m := f.members[0]
	f.trip(0)
	f.waitVersion(1)
	m.Close()
	f.advance(openDuration)
	p, err := m.Allow()
	if err != nil || !p.Probe {
		t.Fatalf("a closed member's probe: %+v, %v; want a local probe", p, err)
	}
	m.Done(p, nil)
	if s := m.State(); s != core.Closed {
		t.Fatalf("a closed member after its probe's success: %v, want closed", s)
	}
}
