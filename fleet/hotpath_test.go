package fleet

import (
	"context"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/casbreaker/casbreaker/core"
)

// scriptCalls is how many scripts the server has run (EVAL and EVALSHA).
func scriptCalls(t *testing.T, srv *redisServer) int {
	t.Helper()
	info, err := srv.client(t).Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	total := 0
	for _, m := range regexp.MustCompile(`cmdstat_eval(?:sha)?:calls=(\d+)`).FindAllStringSubmatch(info, -1) {
		n, _ := strconv.Atoi(m[1])
		total += n
	}
	return total
}

// TestHotPathNoStoreCall: closed and open, a member's Allow and Done make
// no store call (the server runs no script for ten thousand calls; the
// member polls once an hour here), and allocate nothing.
func TestHotPathNoStoreCall(t *testing.T) {
	srv := startRedis(t)
	// Loaded first, so that each member's first read is one EVALSHA (not
	// a failed one and an EVAL) and two calls mean both members read.
	if err := readScript.Load(context.Background(), srv.client(t)).Err(); err != nil {
		t.Fatal(err)
	}
	f := newFleet(t, srv, 2, func(int) Options { return Options{Quorum: 2, PollInterval: time.Hour} })
	m := f.members[0]
	eventually(t, "each member's first read of the state", func() bool { return scriptCalls(t, srv) >= 2 })

	before := scriptCalls(t, srv)
	for range 10000 {
		p, err := m.Allow()
		if err != nil {
			t.Fatal(err)
		}
		m.Done(p, nil)
	}
	if after := scriptCalls(t, srv); after != before {
		t.Fatalf("ten thousand closed calls ran %d store scripts, want none", after-before)
	}
	if a := testing.AllocsPerRun(1000, func() {
		p, _ := m.Allow()
		m.Done(p, nil)
	}); a != 0 {
		t.Fatalf("closed Allow and Done allocate %v times a call, want 0", a)
	}

	f.trip(0)
	f.trip(1)
	f.waitVersion(1)
	before = scriptCalls(t, srv)
	for range 10000 {
		if _, err := m.Allow(); err == nil {
			t.Fatal("an open member admitted a call")
		}
	}
	if after := scriptCalls(t, srv); after != before {
		t.Fatalf("ten thousand open rejections ran %d store scripts, want none", after-before)
	}
	if a := testing.AllocsPerRun(1000, func() { _, _ = m.Allow() }); a != 0 {
		t.Fatalf("open Allow allocates %v times a call, want 0", a)
	}
	if m.State() != core.Open {
		t.Fatalf("member is %v, want open", m.State())
	}
}

// TestClosedMember: after Close a member is a plain local breaker: its
// half-open probe goes out without asking the store, and Close is
// idempotent.
func TestClosedMember(t *testing.T) {
	srv := startRedis(t)
	f := newFleet(t, srv, 1, func(int) Options { return Options{Quorum: 1} })
	m := f.members[0]
	f.trip(0)
	f.waitVersion(1)
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	before := scriptCalls(t, srv)
	f.advance(openDuration)
	p, err := m.Allow()
	if err != nil || !p.Probe {
		t.Fatalf("the closed member's half-open Allow: %+v, %v; want a local probe", p, err)
	}
	m.Done(p, nil)
	if after := scriptCalls(t, srv); after != before {
		t.Fatalf("a closed member ran %d store scripts, want none", after-before)
	}
	if s := m.Stats(); !s.Local {
		t.Fatalf("a closed member's Stats: %+v, want Local", s)
	}
	if m.State() != core.Closed {
		t.Fatalf("the closed member is %v after its probe succeeded, want closed", m.State())
	}
}
