package registry_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/casbreaker/casbreaker/core"
	"github.com/casbreaker/casbreaker/internal/breakers"
	"github.com/casbreaker/casbreaker/registry"
)

// Idle eviction drops a breaker without permits out after IdleAfter when it
// is closed, or half-open with no probe out (its open duration over and no
// call since), and never one that is open or has a permit out.
func TestEvictIdle(t *testing.T) {
	clock := core.NewManualClock(0)
	r, err := registry.New(registry.Options[string]{
		Config:    core.Config{ConsecutiveFailures: 1, OpenDuration: 2 * time.Minute, Clock: clock},
		IdleAfter: time.Minute,
	})
	require.NoError(t, err)
	idle := get(t, r, "idle")
	open := get(t, r, "open")
	open.Done(mustAllow(t, open), errFail)
	require.Equal(t, core.Open, open.State())
	busy := get(t, r, "busy")
	held := mustAllow(t, busy)

	clock.Set(59 * time.Second)
	require.Zero(t, r.EvictIdle(), "nothing is idle for a minute yet")
	clock.Set(90 * time.Second)
	require.Equal(t, 1, r.EvictIdle(), "idle goes; open and busy stay")
	require.Equal(t, 2, r.Len())
	require.NotSame(t, idle, get(t, r, "idle"), "a new breaker for the evicted key")
	require.Same(t, open, get(t, r, "open"))
	require.Same(t, busy, get(t, r, "busy"))

	clock.Set(4 * time.Minute)
	probe := mustAllow(t, open)
	require.True(t, probe.Probe)
	clock.Set(10 * time.Minute)
	require.Equal(t, 1, r.EvictIdle(), "idle's new breaker goes; the probe and the busy call keep theirs")
	open.Done(probe, errFail) // open again, for 4 minutes with backoff off: 2
	busy.Done(held, nil)
	clock.Set(12*time.Minute + time.Second)
	require.Equal(t, core.HalfOpen, open.State())
	require.Equal(t, 2, r.EvictIdle(), "busy, and open: half-open with no probe out")
	require.Zero(t, r.Len())

	// The late Done of an evicted breaker's permit changes nothing in the
	// registry, and the evicted breaker still works, alone.
	late := mustAllow(t, idle)
	idle.Done(late, errFail)
	require.Equal(t, core.Open, idle.State())
	require.Equal(t, core.Closed, get(t, r, "idle").State())
	require.Zero(t, registry.PermitsOut(idle))
}

// A Lookup is not a use: a breaker only looked up since its last Get is
// evicted as idle, where one got again is spared.
func TestLookupDoesNotKeepABreaker(t *testing.T) {
	clock := core.NewManualClock(0)
	r := newReg(t, clock, 0, time.Minute)
	looked, got := get(t, r, "looked"), get(t, r, "got")
	for tens := range 6 { // every 10 s until 50 s
		clock.Set(time.Duration(tens) * 10 * time.Second)
		_, ok := r.Lookup("looked")
		require.True(t, ok)
		get(t, r, "got")
		require.Zero(t, r.EvictIdle(), "at %v", clock.Now())
	}
	clock.Set(time.Minute)
	require.Equal(t, 1, r.EvictIdle(), "the breaker only looked up goes, a minute after its Get")
	_, ok := r.Lookup("looked")
	require.False(t, ok)
	b, ok := r.Lookup("got")
	require.True(t, ok)
	require.Same(t, got, b)
	require.NotSame(t, looked, get(t, r, "looked"))
}

// New keys drop idle breakers as they arrive, with no EvictIdle: each new
// key examines four breakers, so here ten new keys take the hand round
// past the ten idle ones; an open one stays.
func TestNewKeysDropIdleBreakers(t *testing.T) {
	clock := core.NewManualClock(0)
	r, err := registry.New(registry.Options[string]{
		Config:    core.Config{ConsecutiveFailures: 1, OpenDuration: time.Hour, Clock: clock},
		IdleAfter: time.Minute,
	})
	require.NoError(t, err)
	for i := range 10 {
		get(t, r, fmt.Sprint("old", i))
	}
	open := get(t, r, "open")
	open.Done(mustAllow(t, open), errFail)
	clock.Set(time.Minute - time.Nanosecond)
	get(t, r, "new0")
	require.Equal(t, 12, r.Len(), "nothing is idle for a minute yet")
	clock.Set(time.Minute) // the old ones: idle for exactly IdleAfter
	for i := 1; i <= 10; i++ {
		get(t, r, fmt.Sprint("new", i))
	}
	require.Equal(t, 12, r.Len(), "the ten old breakers made way for ten new ones")
	for k := range r.All() {
		require.NotContains(t, k, "old")
	}
	require.Same(t, open, get(t, r, "open"))
}

// A steady stream of keys, each used once, one a second, with IdleAfter
// 100 s: with no bound and no EvictIdle the registry holds at most about
// 4/3 of the 100 keys used within IdleAfter.
func TestIdleStreamStaysBounded(t *testing.T) {
	clock := core.NewManualClock(0)
	r := newReg(t, clock, 0, 100*time.Second)
	most := 0
	for i := range 2000 {
		clock.Advance(time.Second)
		get(t, r, fmt.Sprint(i))
		most = max(most, r.Len())
	}
	// 136 here: about 4/3 of 100; each new key examines four breakers, so
	// a turn of the hand takes a quarter as many new keys as there are
	// breakers, and the keys gone idle during the last turn are still held.
	require.LessOrEqual(t, most, 4*100/3+5)
	require.Greater(t, most, 100)
}

// At the bound a new key evicts by second chance: the hand passes the
// breakers in the order they were made, clearing the mark a Get of an
// existing breaker sets, and evicts the first unmarked one; a breaker
// looked up since the hand last passed is spared once, one made and never
// looked up again is not. When none may go, Get says the registry is full.
func TestMaxBreakers(t *testing.T) {
	r := newReg(t, core.NewManualClock(0), 3, 0)
	a, b, c := get(t, r, "a"), get(t, r, "b"), get(t, r, "c")
	keys := func() []string {
		var ks []string
		for k := range r.All() {
			ks = append(ks, k)
		}
		return ks
	}
	get(t, r, "d") // evicts a, never looked up again
	require.ElementsMatch(t, []string{"b", "c", "d"}, keys())
	require.Same(t, b, get(t, r, "b")) // marks b
	get(t, r, "e")                     // spares b, clearing its mark; evicts c
	require.ElementsMatch(t, []string{"b", "d", "e"}, keys())
	get(t, r, "d") // marks d
	get(t, r, "f") // spares d; evicts b, whose mark is spent
	require.ElementsMatch(t, []string{"d", "e", "f"}, keys())
	require.NotSame(t, a, get(t, r, "a"))
	require.NotSame(t, c, get(t, r, "c"))
	require.NotSame(t, b, get(t, r, "b"))
	require.Equal(t, 3, r.Len())

	for k := range r.All() {
		br := get(t, r, k)
		br.Done(mustAllow(t, br), errFail) // open: may not be evicted
	}
	_, err := r.Get("g")
	require.ErrorIs(t, err, registry.ErrFull)
	require.ErrorContains(t, err, "3 breakers")
	require.Equal(t, 3, r.Len())
}

// At the bound, a breaker with a permit out is passed over, and one whose
// permit has gone unreported, with no Get, for PermitTimeout is not.
func TestMaxBreakersPassesOverBusyBreakers(t *testing.T) {
	clock := core.NewManualClock(0)
	r, err := registry.New(registry.Options[string]{
		Config:      core.Config{ConsecutiveFailures: 1, Clock: clock},
		MaxBreakers: 2, PermitTimeout: time.Minute,
	})
	require.NoError(t, err)
	busy, idle := get(t, r, "busy"), get(t, r, "idle")
	mustAllow(t, busy) // never reported
	get(t, r, "c")
	require.Same(t, busy, get(t, r, "busy"))
	require.Equal(t, 0, countOf(r, idle))
	clock.Set(time.Minute - time.Nanosecond)
	get(t, r, "d") // evicts c
	require.Equal(t, 1, countOf(r, busy))
	clock.Set(2 * time.Minute)
	get(t, r, "e")
	require.Equal(t, 0, countOf(r, busy), "its permit is presumed lost after PermitTimeout without a Get")
}

// A full registry (every breaker open) answers each new key after a look
// at a few breakers, not all of them, and finds a breaker that may be
// evicted again within MaxBreakers/8 new keys; one of 4 or fewer
// breakers still looks at every one, so it finds it at the next new key.
func TestFullRegistryFindsARecoveredBreaker(t *testing.T) {
	for _, tc := range []struct{ bound, within int }{{4, 1}, {1000, 1000/8 + 1}} {
		t.Run(fmt.Sprint(tc.bound), func(t *testing.T) {
			r := newReg(t, core.NewManualClock(0), tc.bound, 0)
			var open []*registry.Breaker
			for k := range tc.bound {
				b := get(t, r, fmt.Sprint(k))
				b.Done(mustAllow(t, b), errFail)
				open = append(open, b)
			}
			for i := range 3 {
				_, err := r.Get(fmt.Sprint("new", i))
				require.ErrorIs(t, err, registry.ErrFull)
			}
			open[tc.bound/2].Reset() // closed: it may be evicted again
			n := 0
			for {
				n++
				_, err := r.Get(fmt.Sprint("late", n))
				if err == nil {
					break
				}
				require.ErrorIs(t, err, registry.ErrFull)
				require.Less(t, n, tc.within, "not found within %d new keys", tc.within)
			}
			require.Equal(t, tc.bound, r.Len())
			require.NotSame(t, open[tc.bound/2], get(t, r, fmt.Sprint(tc.bound/2)), "the recovered breaker was the one evicted")
		})
	}
}

// Once full, each new key looks at the next 8 breakers in the hand's
// order (the order they were made): a breaker that may be evicted again
// 8 places on is found by the second new key, not the first.
func TestFullRegistryLooksAtEightBreakersAKey(t *testing.T) {
	r := newReg(t, core.NewManualClock(0), 100, 0)
	var open []*registry.Breaker
	for k := range 100 {
		b := get(t, r, fmt.Sprint(k))
		b.Done(mustAllow(t, b), errFail)
		open = append(open, b)
	}
	_, err := r.Get("first")
	require.ErrorIs(t, err, registry.ErrFull, "twice round: full, the hand back where it started")
	open[8].Reset()
	_, err = r.Get("second")
	require.ErrorIs(t, err, registry.ErrFull, "breakers 0 to 7 only")
	get(t, r, "third")
	require.Equal(t, 0, countOf(r, open[8]))
}

// A new key's sweep drops a breaker idle for exactly IdleAfter, not one a
// nanosecond short of it.
func TestNewKeyDropsABreakerIdleForIdleAfter(t *testing.T) {
	clock := core.NewManualClock(0)
	r := newReg(t, clock, 0, time.Minute)
	a := get(t, r, "a")
	clock.Set(time.Minute - time.Nanosecond)
	get(t, r, "b")
	require.Equal(t, 1, countOf(r, a))
	clock.Set(time.Minute)
	get(t, r, "c")
	require.Equal(t, 0, countOf(r, a))
	require.Equal(t, 2, r.Len())
}

// A full registry is a local limit: a breaker around its caller, with the
// default classifier, does not count it, in both implementations.
func TestErrFullIsIgnored(t *testing.T) {
	r := newReg(t, core.NewManualClock(0), 1, 0)
	b := get(t, r, "a")
	b.Done(mustAllow(t, b), errFail) // open: the one breaker may not go
	_, err := r.Get("b")
	require.ErrorIs(t, err, registry.ErrFull)
	require.ErrorIs(t, err, core.ErrIgnored)
	require.NotErrorIs(t, err, core.ErrRejected)
	for _, impl := range breakers.All {
		t.Run(impl.Name, func(t *testing.T) {
			outer, err := impl.New(core.Config{ConsecutiveFailures: 3, Clock: core.NewManualClock(0)})
			require.NoError(t, err)
			for range 5 {
				_, err := core.Do(context.Background(), outer, func(context.Context) (*registry.Breaker, error) {
					return r.Get("b")
				})
				require.ErrorIs(t, err, registry.ErrFull)
			}
			require.Equal(t, core.Closed, outer.State())
			require.Zero(t, outer.Counts().ConsecutiveFailures)
		})
	}
}

// A Get reads no clock: it sets the key's mark, and the idle time starts
// when the hand (here EvictIdle) finds the mark. So a breaker goes no
// sooner than IdleAfter after its last Get, and no later than IdleAfter
// after the pass that saw it.
func TestIdleTimeStartsWhenTheHandSeesAGet(t *testing.T) {
	clock := &countingClock{}
	r, err := registry.New(registry.Options[string]{
		Config:    core.Config{ConsecutiveFailures: 1, Clock: clock},
		IdleAfter: 16 * time.Minute, MaxBreakers: 10,
	})
	require.NoError(t, err)
	get(t, r, "a")
	get(t, r, "b")
	clock.Set(time.Minute)
	before := clock.reads.Load()
	for range 100 {
		get(t, r, "a")
	}
	require.Equal(t, before, clock.reads.Load(), "a Get of a key that has a breaker reads no clock")

	clock.Set(16*time.Minute - time.Nanosecond)
	require.Zero(t, r.EvictIdle(), "b is idle a nanosecond short; a's Get is seen now")
	clock.Set(16 * time.Minute)
	require.Equal(t, 1, r.EvictIdle(), "b: made 16 minutes ago, never looked up since")
	clock.Set(32*time.Minute - 2*time.Nanosecond)
	require.Zero(t, r.EvictIdle(), "a: 16 minutes since the pass that saw its Get, less a nanosecond")
	clock.Set(32*time.Minute - time.Nanosecond)
	require.Equal(t, 1, r.EvictIdle())
	require.Zero(t, r.Len())
}

// With a bound and no IdleAfter, PermitTimeout counts from the hand's
// last pass that found the key looked up.
func TestPermitTimeoutAtTheBound(t *testing.T) {
	clock := core.NewManualClock(0)
	r, err := registry.New(registry.Options[string]{
		Config:      core.Config{ConsecutiveFailures: 1, Clock: clock},
		MaxBreakers: 1, PermitTimeout: 16 * time.Minute,
	})
	require.NoError(t, err)
	busy := get(t, r, "busy")
	mustAllow(t, busy) // never reported
	clock.Set(30 * time.Second)
	get(t, r, "busy")
	clock.Set(16 * time.Minute)
	_, err = r.Get("x")
	require.ErrorIs(t, err, registry.ErrFull, "busy was looked up since it was made: its permit counts from this pass on")
	clock.Set(32*time.Minute - time.Nanosecond)
	_, err = r.Get("x")
	require.ErrorIs(t, err, registry.ErrFull)
	clock.Set(32 * time.Minute)
	get(t, r, "x")
	require.Equal(t, 0, countOf(r, busy), "no Get for PermitTimeout: its permit is presumed lost")
}

// Without a bound or IdleAfter the registry counts nothing and reads no
// clock: Get of a key that has a breaker is one map lookup.
func TestNoEvictionCountsNothing(t *testing.T) {
	clock := &countingClock{}
	r, err := registry.New(registry.Options[string]{Config: core.Config{ConsecutiveFailures: 1, Clock: clock}})
	require.NoError(t, err)
	b := get(t, r, "a")
	reads := clock.reads.Load()
	for range 3 {
		require.Same(t, b, get(t, r, "a"))
	}
	p := mustAllow(t, b)
	require.Zero(t, registry.PermitsOut(b))
	b.Done(p, nil)
	require.Equal(t, reads, clock.reads.Load())
	require.Zero(t, r.EvictIdle())
}

// countingClock is a manual clock that counts its readings.
type countingClock struct {
	core.ManualClock
	reads atomic.Int64
}

func (c *countingClock) Now() time.Duration {
	c.reads.Add(1)
	return c.ManualClock.Now()
}

// The ring of breakers gives memory back once less than a quarter of it is
// used, to twice the breakers left.
func TestRingGivesMemoryBack(t *testing.T) {
	clock := core.NewManualClock(0)
	r := newReg(t, clock, 0, time.Minute)
	const n = 128
	for i := range n {
		get(t, r, fmt.Sprint(i))
	}
	c := registry.RingCap(r)
	require.GreaterOrEqual(t, c, n)
	require.Less(t, c, 4*n)
	quarter := c / 4
	// Keys 0 to quarter-1 are looked up again later, and seen by a sweep:
	// the last at 20 s, the others at 30 s.
	clock.Set(20 * time.Second)
	get(t, r, fmt.Sprint(quarter-1))
	require.Zero(t, r.EvictIdle())
	clock.Set(30 * time.Second)
	for i := range quarter - 1 {
		get(t, r, fmt.Sprint(i))
	}
	require.Zero(t, r.EvictIdle())
	clock.Set(time.Minute)
	require.Equal(t, n-quarter, r.EvictIdle())
	require.Equal(t, c, registry.RingCap(r), "a quarter used: kept")
	clock.Set(80 * time.Second)
	require.Equal(t, 1, r.EvictIdle())
	require.Equal(t, 2*(quarter-1), registry.RingCap(r), "less than a quarter used: given back to twice the breakers left")
}

// The template's InitialState is every new breaker's, a key's breaker made
// again after an eviction included; a forced-open one is never evicted,
// so forced-open keys fill a bounded registry.
func TestTemplateInitialStateStartsEveryNewBreaker(t *testing.T) {
	clock := core.NewManualClock(0)
	r, err := registry.New(registry.Options[string]{
		Config:    core.Config{ConsecutiveFailures: 1, OpenDuration: time.Second, InitialState: core.Open, Clock: clock},
		IdleAfter: time.Minute,
	})
	require.NoError(t, err)
	a := get(t, r, "a")
	require.Equal(t, core.Open, a.State())
	require.Equal(t, time.Second, a.RetryAfter())
	clock.Set(2 * time.Minute)
	require.Equal(t, 1, r.EvictIdle(), "open no more (half-open with no probe out): it may go")
	again := get(t, r, "a")
	require.NotSame(t, a, again)
	require.Equal(t, core.Open, again.State(), "made again, it starts open again")
	require.Equal(t, time.Second, again.RetryAfter(), "for the open duration from its making")

	forced, err := registry.New(registry.Options[string]{
		Config:      core.Config{ConsecutiveFailures: 1, InitialState: core.ForcedOpen, Clock: clock},
		MaxBreakers: 2,
	})
	require.NoError(t, err)
	get(t, forced, "x")
	get(t, forced, "y")
	_, err = forced.Get("z")
	require.ErrorIs(t, err, registry.ErrFull, "no forced-open breaker may be evicted")
	get(t, forced, "x").Reset()
	require.NotNil(t, get(t, forced, "z"), "once a manual control moves one, it may go")
}
