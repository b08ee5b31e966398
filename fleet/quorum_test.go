package fleet

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/casbreaker/casbreaker/core"
)

// adoptionBound is how long after the trip that makes the quorum every
// member may take to adopt the open state: the delivery bound the fleet
// promises over publish/subscribe (a few milliseconds on loopback, even
// under the race detector; docs/fleet.md has the measured spread).
const adoptionBound = 200 * time.Millisecond

// tripWithinBound trips member i, which makes the fleet's quorum, and
// fails unless every member adopts within adoptionBound, timed from
// before the tripping calls (they only lengthen what is measured).
func (f *fleet) tripWithinBound(i int) {
	f.t.Helper()
	start := time.Now()
	f.trip(i)
	f.waitVersion(1)
	took := time.Since(start)
	f.t.Logf("the quorum's trip reached all %d members over publish/subscribe in %v", len(f.members), took)
	if took > adoptionBound {
		f.t.Fatalf("the last of %d members adopted the quorum's trip %v after it, want within %v", len(f.members), took, adoptionBound)
	}
}

// TestQuorum: with a quorum of two, one member's trip opens only that
// member; the second member's trip opens all ten within adoptionBound,
// pushed over publish/subscribe (polling is off: a poll interval of an
// hour). The wall clock measures delivery through the store here, not
// the breakers' time, which stays on their manual clocks.
func TestQuorum(t *testing.T) {
	const n = 10
	srv := startRedis(t)
	f := newFleet(t, srv, n, func(int) Options { return Options{Quorum: 2, PollInterval: time.Hour} })
	c := srv.client(t)
	ctx := context.Background()

	f.trip(0)
	eventually(t, "member 0's trip to be recorded", func() bool { return f.members[0].Stats().Published == 1 })
	if v, err := c.HGet(ctx, f.members[0].keys[0], "v").Result(); err != nil || v != "0" {
		t.Fatalf("after one member's trip the shared version is %q (%v), want 0: the fleet opened below its quorum", v, err)
	}
	for i, m := range f.members[1:] {
		if m.State() != core.Closed || m.Stats().FleetOpen {
			t.Fatalf("member %d is %v (fleet open %v) after another member's lone trip", i+1, m.State(), m.Stats().FleetOpen)
		}
		p, err := m.Allow()
		if err != nil {
			t.Fatalf("member %d refused a call after another member's lone trip: %v", i+1, err)
		}
		m.Done(p, nil)
	}

	f.tripWithinBound(1)
	for i, m := range f.members {
		if m.State() != core.Open || !m.Stats().FleetOpen {
			t.Fatalf("member %d is %v (fleet open %v) after the quorum's trip", i, m.State(), m.Stats().FleetOpen)
		}
		if call(m) {
			t.Fatalf("member %d admitted a call in the fleet's open state", i)
		}
	}
}

// TestQuorumWindow: trips count towards the quorum only within the open
// duration on the store's clock, and a member's trip counts once however
// often it is published: two trips of one member are one member's.
func TestQuorumWindow(t *testing.T) {
	srv := startRedis(t)
	f := newFleet(t, srv, 2, func(int) Options { return Options{Quorum: 2} })
	f.trip(0)
	eventually(t, "member 0's trip to be recorded", func() bool { return f.members[0].Stats().Published == 1 })
	f.advance(openDuration)
	if !call(f.members[0]) { // the probe fails: open again, a trip from half-open, not from closed
		t.Fatal("member 0's probe was refused")
	}
	f.members[0].Reset()
	f.trip(0) // a second trip from closed: a new generation, the same member
	c := srv.client(t)
	ctx := context.Background()
	gen := strconv.FormatUint(f.members[0].Counts().Generation, 10)
	eventually(t, "member 0's second trip to be recorded", func() bool {
		g, err := c.HGet(ctx, f.members[0].keys[2], f.members[0].Name()+"|"+f.members[0].instance).Result()
		return err == nil && g == gen
	})
	if n, err := c.ZCard(ctx, f.members[0].keys[1]).Result(); err != nil || n != 1 {
		t.Fatalf("%d members with a trip (%v), want 1", n, err)
	}
	if v, _ := c.HGet(ctx, f.members[0].keys[0], "v").Result(); v != "0" {
		t.Fatalf("one member's two trips opened the fleet (version %s)", v)
	}
	// A trip outside the open duration is forgotten: age member 0's on the
	// store (the store's clock, not ours, decides).
	if err := c.ZAdd(ctx, f.members[0].keys[1], redisZ(1, f.members[0].Name())).Err(); err != nil {
		t.Fatal(err)
	}
	f.trip(1)
	eventually(t, "member 1's trip to be recorded", func() bool { return f.members[1].Stats().Published == 1 })
	if v, _ := c.HGet(ctx, f.members[0].keys[0], "v").Result(); v != "0" {
		t.Fatalf("a trip older than the open duration counted towards the quorum (version %s)", v)
	}
}

// TestLateJoiner: a member that starts while the fleet is open adopts the
// open state on its first read, for what is left of the open period on
// the store's clock, instead of sending full traffic until it trips too.
func TestLateJoiner(t *testing.T) {
	srv := startRedis(t)
	f := newFleet(t, srv, 2, func(int) Options { return Options{Quorum: 2} })
	f.trip(0)
	f.trip(1)
	f.waitVersion(1)
	late := newFleet(t, srv, 1, func(int) Options { return Options{Key: t.Name()} })
	late.waitVersion(1)
	m := late.members[0]
	if m.State() != core.Open || !m.Stats().FleetOpen {
		t.Fatalf("the late member is %v (fleet open %v), want open", m.State(), m.Stats().FleetOpen)
	}
	if left := m.RetryAfter(); left <= 0 || left > openDuration {
		t.Fatalf("the late member is open for %v more, want within (0, %v]", left, openDuration)
	}
}

// TestRestartedMember: a member restarted under the same name (a new
// instance, whose breaker generations start again) has its trips counted:
// the store fences generations per instance, not per name.
func TestRestartedMember(t *testing.T) {
	srv := startRedis(t)
	name := func(int) Options { return Options{Member: "replica-0", Quorum: 1, PollInterval: time.Hour} }
	first := newFleet(t, srv, 1, name)
	first.trip(0)
	first.waitVersion(1)
	// The fleet closes again (as a probe's success would), and the
	// replica restarts: its new breaker's trip has the first one's
	// generation.
	c := srv.client(t)
	ctx := context.Background()
	m := first.members[0]
	if err := c.HSet(ctx, m.keys[0], "s", "closed").Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.Del(ctx, m.keys[1]).Err(); err != nil { // a close forgets the trips
		t.Fatal(err)
	}
	m.Close()
	again := newFleet(t, srv, 1, name)
	again.trip(0)
	if g0, g1 := m.tripGen.Load(), again.members[0].tripGen.Load(); g0 != g1 {
		t.Fatalf("the instances tripped at generations %d and %d, want one generation", g0, g1)
	}
	eventually(t, "the restarted member's trip to open the fleet", func() bool {
		v, err := c.HGet(ctx, m.keys[0], "v").Result()
		return err == nil && v == "2"
	})
}

// TestOwnTripKept: a closed shared state the member has not seen (on its
// first read, say) leaves a breaker open by its own trip open; a closed
// state that ends a fleet period the member adopted closes it. The loop
// is stopped (Close) so that the test drives the adoption alone.
func TestOwnTripKept(t *testing.T) {
	srv := startRedis(t)
	f := newFleet(t, srv, 1, func(int) Options { return Options{Quorum: 2} })
	m := f.members[0]
	m.Close()
	f.trip(0)
	var s syncState
	m.adopt(&s, shared{inc: "i", version: 3})
	if m.State() != core.Open {
		t.Fatalf("a closed shared state moved a breaker open by its own trip to %v", m.State())
	}
	m.adopt(&s, shared{inc: "i", version: 4, open: true, until: 5000, now: 1000})
	if m.State() != core.Open || m.RetryAfter() != 4*time.Second {
		t.Fatalf("after adopting an open state with 4 s left: %v for %v", m.State(), m.RetryAfter())
	}
	m.adopt(&s, shared{inc: "i", version: 5})
	if m.State() != core.Closed {
		t.Fatalf("the fleet's close left the member %v", m.State())
	}
}

// TestPollingFallback: a change whose message never reaches the members
// (published on another channel here, as if their subscriptions were
// reconnecting) is adopted from the next poll.
func TestPollingFallback(t *testing.T) {
	srv := startRedis(t)
	f := newFleet(t, srv, 3, func(int) Options { return Options{Quorum: 1, PollInterval: 20 * time.Millisecond} })
	m := f.members[0]
	ctx := context.Background()
	if _, err := m.call(ctx, tripScript, m.keys[:], "elsewhere", "x", 1, m.openMs, 1, "nobody-listens"); err != nil {
		t.Fatal(err)
	}
	f.waitVersion(1)
	for i, m := range f.members {
		if m.State() != core.Open || !m.Stats().FleetOpen {
			t.Fatalf("member %d is %v (fleet open %v) after polling an open state", i, m.State(), m.Stats().FleetOpen)
		}
	}
}
