package fleet

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/casbreaker/casbreaker/core"
	"github.com/casbreaker/casbreaker/registry"
)

// TestKeys: two replicas, each a registry whose Extension is a Keys, over
// the keys "a" and "b": the trips of key a on both open key a on both
// (key b stays closed); once the open duration has passed one probe goes
// out across both registries and its success closes key a on both; a key
// the registry evicts loses its member; a name with braces is a valid Key.
func TestKeys(t *testing.T) {
	srv := startRedis(t)
	var regs []*registry.Registry[string]
	var keys []*Keys
	var clocks []*core.ManualClock
	for range 2 {
		clock := core.NewManualClock(time.Hour)
		k, err := NewKeys(Options{Client: srv.client(t), Key: t.Name(), Quorum: 2, Probes: 1, StoreTimeout: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { k.Close() })
		r, err := registry.New(registry.Options[string]{Config: testConfig(clock), Extension: k, MaxBreakers: 2})
		if err != nil {
			t.Fatal(err)
		}
		regs, keys, clocks = append(regs, r), append(keys, k), append(clocks, clock)
	}
	get := func(i int, key string) *registry.Breaker {
		t.Helper()
		b, err := regs[i].Get(key)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	members := func(key string) *fleet {
		f := &fleet{t: t, srv: srv, clocks: clocks}
		for i, k := range keys {
			get(i, key)
			m, ok := k.Member("dep/" + key)
			if !ok {
				t.Fatalf("replica %d: no member for key %s", i, key)
			}
			f.members = append(f.members, m)
		}
		f.waitSubscribed()
		return f
	}
	a, _ := members("a"), members("b")
	for i := range 2 {
		b := get(i, "a")
		for range 3 {
			p, err := b.Allow()
			if err != nil {
				t.Fatalf("replica %d: %v before the trip", i, err)
			}
			b.Done(p, errDown)
		}
	}
	a.waitVersion(1)
	for i := range 2 {
		if sa, sb := get(i, "a").State(), get(i, "b").State(); sa != core.Open || sb != core.Closed {
			t.Fatalf("replica %d: key a %v, key b %v; want open and closed", i, sa, sb)
		}
	}

	// One probe across both registries: the second replica's is refused
	// for want of a lease, with a wait, as a full half-open breaker's.
	a.advance(openDuration)
	p, err := get(0, "a").Allow()
	if err != nil || !p.Probe {
		t.Fatalf("replica 0's probe: %+v, %v", p, err)
	}
	if q, err := get(1, "a").Allow(); !errors.Is(err, ErrLeaseRefused) || !errors.Is(err, core.ErrHalfOpenFull) || q.RetryAfter <= 0 {
		t.Fatalf("replica 1's probe while replica 0 holds the lease: %+v, %v", q, err)
	}
	get(0, "a").Done(p, nil)
	a.waitVersion(2)
	for i := range 2 {
		if s := get(i, "a").State(); s != core.Closed {
			t.Fatalf("replica %d: key a %v after the fleet's verdict, want closed", i, s)
		}
	}

	// At the bound of two, a new key evicts one of a and b on replica 0,
	// and its member goes with it.
	get(0, "c")
	if _, ok := keys[0].Member("dep/c"); !ok {
		t.Fatal("no member for key c")
	}
	_, hasA := keys[0].Member("dep/a")
	_, hasB := keys[0].Member("dep/b")
	if hasA == hasB {
		t.Fatalf("after an eviction at the bound: members of a %v, of b %v; want one of them", hasA, hasB)
	}

	// A name with braces (a key the registry names "dep/{x}") makes a
	// fleet whose Key has them escaped.
	get(1, "{x}")
	if m, ok := keys[1].Member("dep/{x}"); !ok || m.o.Key != t.Name()+":dep/%7Bx%7D" {
		t.Fatalf("the member of dep/{x}: %v", ok)
	}
}

// Keys refuses what New refuses, and a zero or nil Keys panics naming
// NewKeys; after Close the registry's new breakers are plain local ones.
func TestKeysMisuse(t *testing.T) {
	if _, err := NewKeys(Options{Key: "k"}); !errors.Is(err, ErrInvalidOptions) {
		t.Fatalf("NewKeys without a Client: %v", err)
	}
	srv := startRedis(t)
	k, err := NewKeys(Options{Client: srv.client(t), Key: t.Name()})
	if err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(core.NewManualClock(0))
	cfg.ProbeGate = (*probeGate)(nil)
	r, err := registry.New(registry.Options[string]{Config: cfg, Extension: k})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Get("a"); !errors.Is(err, ErrInvalidOptions) {
		t.Fatalf("a template with a ProbeGate: %v", err)
	}
	k.Close()
	r, err = registry.New(registry.Options[string]{Config: testConfig(core.NewManualClock(0)), Extension: k})
	if err != nil {
		t.Fatal(err)
	}
	if b, err := r.Get("a"); err != nil || b.Settings().ProbeGate != nil {
		t.Fatalf("Get after Close: %v", err)
	}
	if _, ok := k.Member("dep/a"); ok {
		t.Fatal("a member made after Close")
	}
	for name, f := range map[string]func(){
		"Member of a zero Keys": func() { (&Keys{}).Member("a") },
		"Close of a nil Keys":   func() { (*Keys)(nil).Close() },
	} {
		func() {
			defer func() {
				if r := recover(); r == nil || r != "fleet: Keys used without NewKeys: make one with fleet.NewKeys" {
					t.Errorf("%s: panic %v", name, r)
				}
			}()
			f()
		}()
	}
}

// Keys at scale on a real Redis: 300 keys through a registry of at most
// 100 breakers, each key's breaker a member with its loop and
// subscription. When Keys.Close returns, every member ever made, the 200
// evicted (closed in the background) included, has stopped its loop, and
// the server drops every subscription; goleak (TestMain) finds no
// goroutine left.
func TestKeysAtScale(t *testing.T) {
	srv := startRedis(t)
	client := srv.client(t)
	k, err := NewKeys(Options{Client: client, Key: t.Name(), StoreTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	r, err := registry.New(registry.Options[string]{Config: testConfig(core.NewManualClock(0)), Extension: k, MaxBreakers: 100})
	if err != nil {
		t.Fatal(err)
	}
	n := 300
	if testing.Short() {
		n = 120
	}
	var made []*Member
	for i := range n {
		key := fmt.Sprint(i)
		if _, err := r.Get(key); err != nil {
			t.Fatal(err)
		}
		m, ok := k.Member("dep/" + key)
		if !ok {
			t.Fatalf("no member for key %s", key)
		}
		made = append(made, m)
	}
	if l := r.Len(); l != 100 {
		t.Fatalf("%d breakers, want 100", l)
	}
	k.Close()
	running := 0
	for _, m := range made {
		select {
		case <-m.done:
		default:
			running++
		}
	}
	if running > 0 {
		t.Fatalf("%d of %d members' loops still running after Keys.Close", running, len(made))
	}
	eventually(t, "the server to drop every member's subscription", func() bool {
		chans, err := client.PubSubChannels(context.Background(), "casbreaker:"+t.Name()+":*").Result()
		return err == nil && len(chans) == 0
	})
}

// A member the registry evicts is closed in the background; Keys.Close
// waits for that close too. Here the evicted member's loop is stuck in a
// store call to a stopped server (SIGSTOP) until its StoreTimeout, and the
// registry holds no other breaker, so Close has no member of its own to
// wait for: when it returns, the evicted member's loop must have stopped.
func TestKeysCloseWaitsForEvicted(t *testing.T) {
	srv := startRedis(t)
	k, err := NewKeys(Options{Client: srv.client(t), Key: t.Name(), PollInterval: time.Millisecond, StoreTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	clock := core.NewManualClock(0)
	r, err := registry.New(registry.Options[string]{Config: testConfig(clock), Extension: k, IdleAfter: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Get("a"); err != nil {
		t.Fatal(err)
	}
	m, ok := k.Member("dep/a")
	if !ok {
		t.Fatal("no member for key a")
	}
	srv.signal(syscall.SIGSTOP)
	defer srv.signal(syscall.SIGCONT)
	eventually(t, "the member's loop in a store call to the stopped server", func() bool {
		buf := make([]byte, 1<<20)
		return strings.Contains(string(buf[:runtime.Stack(buf, true)]), "fleet.(*Member).call(")
	})
	clock.Advance(2 * time.Minute)
	if n := r.EvictIdle(); n != 1 {
		t.Fatalf("EvictIdle dropped %d breakers, want 1", n)
	}
	k.Close()
	select {
	case <-m.done:
	default:
		t.Fatal("the evicted member's loop still runs after Keys.Close returned")
	}
}

// Keys.Close racing Gets of new keys and evictions from four goroutines:
// when Close and the Gets have returned, every member Made started has
// stopped its loop (a member made after Close never starts), and goleak
// (TestMain) finds no goroutine left.
func TestKeysCloseRacingGets(t *testing.T) {
	srv := startRedis(t)
	k, err := NewKeys(Options{Client: srv.client(t), Key: t.Name(), StoreTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	r, err := registry.New(registry.Options[string]{Config: testConfig(core.NewManualClock(0)), Extension: k, MaxBreakers: 8})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var seen []*Member
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := range 40 {
				name := fmt.Sprintf("%d-%d", w, i)
				if _, err := r.Get(name); err != nil {
					t.Error(err)
					return
				}
				if m, ok := k.Member("dep/" + name); ok {
					mu.Lock()
					seen = append(seen, m)
					mu.Unlock()
				}
			}
		})
	}
	wg.Go(func() { k.Close() })
	wg.Wait()
	k.Close() // waits for the background closes of the evictions after the first
	for _, m := range seen {
		select {
		case <-m.done:
		default:
			t.Fatalf("member %s still runs after Close", m.o.Key)
		}
	}
}
