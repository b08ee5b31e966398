package fleet

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/casbreaker/casbreaker/core"
)

// TestLeaseReclaim: a probe lease whose holder never reports is dropped
// after its TTL on the store's clock, and another member's probe then
// gets one, so the fleet does not wedge in half-open; its verdict
// (close) is followed by every member, the silent holder included.
func TestLeaseReclaim(t *testing.T) {
	const ttl = 200 * time.Millisecond
	srv := startRedis(t)
	f := newFleet(t, srv, 3, func(int) Options { return Options{Quorum: 1, LeaseTTL: ttl} })
	f.trip(0)
	f.waitVersion(1)
	f.advance(openDuration)

	holder := f.members[0]
	if _, err := holder.Allow(); err != nil { // a probe that never reports: its holder hangs
		t.Fatalf("the first probe of the fleet's half-open period: %v", err)
	}
	other, clock := f.members[1], f.clocks[1]
	p, err := other.Allow()
	for _, want := range []error{ErrLeaseRefused, core.ErrHalfOpenFull, core.ErrRejected, core.ErrIgnored} {
		if !errors.Is(err, want) {
			t.Fatalf("a second probe with the lease held: %v, which does not match %v", err, want)
		}
	}
	if p.RetryAfter <= 0 || p.RetryAfter > ttl || core.RetryAfterOf(err) != p.RetryAfter {
		t.Fatalf("the refusal's wait is %v (error's %v), want within (0, %v]", p.RetryAfter, core.RetryAfterOf(err), ttl)
	}
	// Come back after each refusal's wait (on the member's clock), and
	// poll the store until the TTL has passed on its clock.
	granted := false
	for i := 0; i < 5000 && !granted; i++ {
		clock.Advance(p.RetryAfter)
		if p, err = other.Allow(); err == nil {
			granted = true
			break
		}
		if !errors.Is(err, ErrLeaseRefused) {
			t.Fatalf("waiting for the lease: %v", err)
		}
		time.Sleep(2 * time.Millisecond) // the lease runs out on the store's clock
	}
	if !granted || !p.Probe {
		t.Fatalf("no probe lease after the silent holder's TTL (granted %v, permit %+v)", granted, p)
	}
	version := other.Stats().Version
	other.Done(p, nil)
	f.waitVersion(version + 1)
	for i, m := range f.members {
		if m.State() != core.Closed || m.Stats().FleetOpen {
			t.Fatalf("member %d is %v (fleet open %v) after the reclaimed lease's probe succeeded", i, m.State(), m.Stats().FleetOpen)
		}
	}
	if g := holder.Stats().LeasesGranted + other.Stats().LeasesGranted; g != 2 {
		t.Fatalf("%d leases granted, want 2 (the lost one and its reclaim)", g)
	}
}

// TestVerdictFenced: a probe outcome reported for an open period the
// fleet has left changes nothing: the store fences verdicts by version.
func TestVerdictFenced(t *testing.T) {
	srv := startRedis(t)
	f := newFleet(t, srv, 2, func(int) Options { return Options{Quorum: 1} })
	f.trip(0)
	f.waitVersion(1)
	m := f.members[0]
	ctx := context.Background()
	// A report for version 1 from a holder that has no lease.
	st, err := m.call(ctx, doneScript, []string{m.keys[0], m.keys[1], m.keys[3]}, 1, "nobody/1", "s", 1, 1, m.openMs, m.channel)
	if err != nil {
		t.Fatal(err)
	}
	if st.version != 1 || !st.open {
		t.Fatalf("a report without a lease moved the fleet to version %d (open %v)", st.version, st.open)
	}
	// A lease asked for a version that is not the open one is refused
	// with no wait: the member reads the state instead.
	st, err = m.call(ctx, leaseScript, []string{m.keys[0], m.keys[3]}, 7, "late/1", 1, 1000, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if st.extra != [2]string{"0", "0"} {
		t.Fatalf("a lease for a version the fleet is not in: %v, want refused with no wait", st.extra)
	}
}

// TestLeaseStorm: two members of a fleet with a budget of one probe, four
// goroutines each asking for probes and giving each back as ignored (the
// half-open period goes on), each refused one coming back after the
// refusal's wait on its member's clock. The fleet never has more than one
// leased probe out; once all returned, no member holds a probe slot or a
// lease it has not reported, and the store holds no lease: every probe
// let go reached the store's report once.
func TestLeaseStorm(t *testing.T) {
	srv := startRedis(t)
	f := newFleet(t, srv, 2, func(int) Options { return Options{Quorum: 1, Probes: 1, LeaseTTL: time.Minute} })
	f.trip(0)
	f.waitVersion(1)
	f.advance(openDuration)
	n := 200
	if testing.Short() {
		n = 50
	}
	var out, most, letGo atomic.Int64
	var wg sync.WaitGroup
	for i, m := range f.members {
		for range 4 {
			wg.Go(func() {
				for range n {
					p, err := m.Allow()
					if err != nil {
						switch {
						case errors.Is(err, ErrLeaseRefused):
							f.clocks[i].Advance(p.RetryAfter)
						case !errors.Is(err, core.ErrHalfOpenFull): // the member's own slot is taken
							t.Errorf("member %d: %v", i, err)
							return
						}
						continue
					}
					letGo.Add(1)
					o := out.Add(1)
					for v := most.Load(); o > v && !most.CompareAndSwap(v, o); v = most.Load() {
					}
					out.Add(-1)
					m.Record(p, core.Ignored)
				}
			})
		}
	}
	wg.Wait()
	if most.Load() > 1 {
		t.Fatalf("%d leased probes out at once, budget 1", most.Load())
	}
	refused := f.members[0].Stats().LeasesRefused + f.members[1].Stats().LeasesRefused
	t.Logf("%d probes let go, %d refused for want of a lease", letGo.Load(), refused)
	if letGo.Load() == 0 {
		t.Fatal("the storm let no probe go")
	}
	var dropped uint64
	for i, m := range f.members {
		m.mu.Lock()
		leases := len(m.leases)
		m.mu.Unlock()
		if c := m.Counts(); c.ProbesInFlight != 0 || leases != 0 {
			t.Fatalf("member %d after the storm: %+v, %d leases unreported", i, c, leases)
		}
		dropped += m.Stats().DroppedReports
	}
	if dropped > 0 {
		t.Logf("%d reports dropped (a full queue): their leases run out at their TTL; no store check", dropped)
		return
	}
	c := srv.client(t)
	eventually(t, "the store to hold no lease", func() bool {
		n, err := c.ZCard(context.Background(), f.members[0].keys[3]).Result()
		return err == nil && n == 0
	})
}
