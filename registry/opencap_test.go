package registry_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/casbreaker/casbreaker/core"
	"github.com/casbreaker/casbreaker/registry"
)

// capped is a registry with MaxOpenPercent percent on a manual clock:
// one failure trips, open for a second, metrics on.
func capped(t testing.TB, clock *core.ManualClock, percent int, o registry.Options[string]) *registry.Registry[string] {
	t.Helper()
	o.Config = core.Config{Name: "api", ConsecutiveFailures: 1, OpenDuration: time.Second, Clock: clock, CollectMetrics: true,
		OnStateChange: o.Config.OnStateChange}
	o.MaxOpenPercent = percent
	r, err := registry.New(o)
	require.NoError(t, err)
	return r
}

// fail trips b (if the cap lets it): one failed call.
func fail(t testing.TB, b *registry.Breaker) {
	t.Helper()
	p, err := b.Allow()
	require.NoError(t, err)
	b.Done(p, errFail)
}

// ejected reports whether a breaker in state s holds an open slot.
func ejected(s core.State) bool { return s == core.Open || s == core.HalfOpen || s == core.ForcedOpen }

// recount is the number of the registry's breakers that hold an open
// slot, from their states: what OpenShare's count must equal once no
// transition is in flight.
func recount(r *registry.Registry[string]) int {
	n := 0
	for _, b := range r.All() {
		if ejected(b.State()) {
			n++
		}
	}
	return n
}

// A trip past the share does not open: it commits closed -> closed with
// ReasonCapped, counted in Metrics.Capped; the slot a breaker gives back
// on closing lets the next trip open; a manual control is never refused
// but counted.
func TestMaxOpenPercentCapsTrips(t *testing.T) {
	clock := core.NewManualClock(0)
	var mu sync.Mutex
	var heard []core.Transition
	r := capped(t, clock, 20, registry.Options[string]{Config: core.Config{OnStateChange: func(tr core.Transition) {
		mu.Lock()
		defer mu.Unlock()
		heard = append(heard, tr)
	}}})
	bs := make([]*registry.Breaker, 10)
	for i := range bs {
		bs[i] = get(t, r, fmt.Sprint(i))
	}
	for _, b := range bs {
		fail(t, b)
	}
	held, allowed := r.OpenShare()
	require.Equal(t, [2]int{2, 2}, [2]int{held, allowed}, "20 % of 10 breakers")
	for i, b := range bs {
		want, capped := core.Open, uint64(0)
		if i >= 2 {
			want, capped = core.Closed, 1
		}
		require.Equal(t, want, b.State(), "breaker %d", i)
		require.Equal(t, capped, b.Metrics().Capped, "breaker %d", i)
	}
	require.Equal(t, core.Transition{Name: "api/2", From: core.Closed, To: core.Closed, Reason: core.ReasonCapped, Generation: 1}, heard[2])
	require.Equal(t, uint64(1), bs[2].Metrics().Transitions[core.Closed][core.Closed])
	_, err := bs[2].Allow()
	require.NoError(t, err, "a capped breaker rejects nothing")

	// A probe that closes gives the slot back; the next trip takes it.
	clock.Set(time.Second)
	p, err := bs[0].Allow()
	require.NoError(t, err)
	require.True(t, p.Probe)
	held, _ = r.OpenShare()
	require.Equal(t, 2, held, "half-open keeps its slot")
	bs[0].Done(p, nil)
	held, _ = r.OpenShare()
	require.Equal(t, 1, held)
	fail(t, bs[3])
	require.Equal(t, core.Open, bs[3].State())
	fail(t, bs[4])
	require.Equal(t, core.Closed, bs[4].State(), "the share is taken again")

	// The operator's ForceOpen and HalfOpen win over the share, counted.
	require.NoError(t, bs[5].ForceOpen(0))
	bs[6].HalfOpen()
	held, allowed = r.OpenShare()
	require.Equal(t, [2]int{4, 2}, [2]int{held, allowed})
	bs[5].Reset()
	bs[6].Disable()
	bs[1].MetricsOnly()
	bs[3].Reset()
	held, _ = r.OpenShare()
	require.Zero(t, held)
	require.Equal(t, 0, recount(r))
}

// At least one breaker may open, whatever the share rounds down to.
func TestMaxOpenPercentAllowsOne(t *testing.T) {
	r := capped(t, core.NewManualClock(0), 10, registry.Options[string]{})
	a, b, c := get(t, r, "a"), get(t, r, "b"), get(t, r, "c")
	fail(t, a)
	fail(t, b)
	fail(t, c)
	require.Equal(t, []core.State{core.Open, core.Closed, core.Closed}, []core.State{a.State(), b.State(), c.State()})
	held, allowed := r.OpenShare()
	require.Equal(t, [2]int{1, 1}, [2]int{held, allowed}, "10 % of 3 is 0, and one may open")
}

// The share follows the number of breakers: after evictions it shrinks,
// the open breakers stay open (none is closed for it) and trips are
// refused until the count is below it. An evicted half-open breaker gives
// its slot back once, and nothing it does later moves the count.
func TestMaxOpenPercentFollowsEviction(t *testing.T) {
	clock := core.NewManualClock(0)
	r := capped(t, clock, 50, registry.Options[string]{IdleAfter: time.Minute})
	bs := make([]*registry.Breaker, 8)
	for i := range bs {
		bs[i] = get(t, r, fmt.Sprint(i))
	}
	for _, b := range bs[:4] {
		fail(t, b)
	}
	held, allowed := r.OpenShare()
	require.Equal(t, [2]int{4, 4}, [2]int{held, allowed})

	// Half of the closed breakers idle away: 6 breakers, 3 allowed, 4 held.
	clock.Set(2 * time.Minute)
	for _, i := range []int{0, 1, 2, 3, 6, 7} {
		get(t, r, fmt.Sprint(i))
	}
	require.Equal(t, 2, r.EvictIdle())
	held, allowed = r.OpenShare()
	require.Equal(t, [2]int{4, 3}, [2]int{held, allowed})
	for _, b := range bs[:4] {
		require.Equal(t, core.HalfOpen, b.State(), "none is closed for the smaller share")
	}
	fail(t, bs[6])
	require.Equal(t, core.Closed, bs[6].State(), "refused: 4 held of 3")

	// Breakers 0 and 1 go idle, half-open with no probe out: evicted, they
	// give their slots back.
	clock.Set(4 * time.Minute)
	for _, i := range []int{2, 3, 6, 7} {
		get(t, r, fmt.Sprint(i))
	}
	require.Equal(t, 2, r.EvictIdle())
	held, allowed = r.OpenShare()
	require.Equal(t, [2]int{2, 2}, [2]int{held, allowed})

	// The evicted breakers still work, alone, uncounted.
	p, err := bs[0].Allow()
	require.NoError(t, err)
	bs[0].Done(p, errFail) // half-open -> open
	require.NoError(t, bs[1].ForceOpen(0))
	bs[1].Reset()
	fail(t, bs[1])
	require.Equal(t, core.Open, bs[1].State(), "an evicted breaker is not capped")
	held, _ = r.OpenShare()
	require.Equal(t, 2, held)
	require.Equal(t, 2, recount(r))
}

// Of two breakers that trip at once for the last slot, exactly one
// opens: run under the race detector. Each round the two racers take
// their permits and spin until both have (so both are on a CPU at once
// and their reservations overlap), then fail.
func TestMaxOpenPercentRaceForLastSlot(t *testing.T) {
	r := capped(t, core.NewManualClock(0), 50, registry.Options[string]{})
	bs := make([]*registry.Breaker, 8)
	for i := range bs {
		bs[i] = get(t, r, fmt.Sprint(i))
	}
	rounds := 2000 // a reservation that is not atomic fails within about 200
	if testing.Short() {
		rounds = 500
	}
	for round := range rounds {
		for _, b := range bs[:3] { // three of the four slots
			fail(t, b)
		}
		var done sync.WaitGroup
		var waiting atomic.Int32
		waiting.Store(2)
		for _, b := range bs[3:5] {
			done.Add(1)
			go func() {
				defer done.Done()
				p, err := b.Allow()
				waiting.Add(-1)
				for waiting.Load() > 0 {
				}
				if err == nil {
					b.Done(p, errFail)
				}
			}()
		}
		done.Wait()
		states := []core.State{bs[3].State(), bs[4].State()}
		require.ElementsMatch(t, []core.State{core.Open, core.Closed}, states, "round %d: the racers", round)
		held, allowed := r.OpenShare()
		require.Equal(t, [2]int{4, 4}, [2]int{held, allowed}, "round %d", round)
		for _, b := range bs {
			b.Reset()
		}
	}
}

// The count stays exact through random trips, probes, manual controls and
// evictions, sequential (checked after every step against the count
// recomputed from the states) and then concurrent (checked once all the
// goroutines are done), and no trip opens a breaker past the share.
func TestMaxOpenPercentCountExact(t *testing.T) {
	clock := core.NewManualClock(0)
	r := capped(t, clock, 30, registry.Options[string]{MaxBreakers: 40, IdleAfter: 10 * time.Second})
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 20000 {
		capStep(t, r, clock, rng, true)
		held, _ := r.OpenShare()
		require.Equal(t, recount(r), held, "step %d", i)
	}

	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(g), 3))
			for range 5000 {
				capStep(t, r, clock, rng, false)
			}
		}()
	}
	wg.Wait()
	held, _ := r.OpenShare()
	require.Equal(t, recount(r), held, "after the concurrent steps")
}

// capStep is one random operation of TestMaxOpenPercentCountExact: a
// call, a clock step, a manual control or an eviction. With sequential,
// no other goroutine moves the count, and a call that trips is held to
// the share.
func capStep(t *testing.T, r *registry.Registry[string], clock *core.ManualClock, rng *rand.Rand, sequential bool) {
	b, err := r.Get(fmt.Sprint(rng.IntN(60)))
	if err != nil {
		if !errors.Is(err, registry.ErrFull) {
			t.Error(err)
		}
		return
	}
	switch op := rng.IntN(20); {
	case op < 8:
		held, allowed := r.OpenShare()
		if p, err := b.Allow(); err == nil {
			before := b.State()
			b.Done(p, []error{nil, errFail, errFail}[rng.IntN(3)])
			if sequential && before == core.Closed && b.State() == core.Open && held >= allowed {
				t.Errorf("a trip opened with %d of %d held", held, allowed)
			}
		}
	case op < 12:
		clock.Advance(time.Duration(rng.IntN(1500)) * time.Millisecond)
	case op < 13:
		if err := b.ForceOpen(time.Duration(rng.IntN(2)) * time.Second); err != nil {
			t.Error(err)
		}
	case op < 14:
		b.HalfOpen()
	case op < 15:
		b.Reset()
	case op < 16:
		b.Disable()
	case op < 17:
		b.MetricsOnly()
	case op < 18:
		r.EvictIdle()
	}
}

// At 100,000 keys (10,000 with -short) at 10 %: a tenth open and the rest
// capped, the count exact after evicting every closed breaker (the share
// shrinks, the open stay open) and after resetting the open.
func TestMaxOpenPercentManyKeys(t *testing.T) {
	n := 100_000
	if testing.Short() {
		n = 10_000
	}
	clock := core.NewManualClock(0)
	r := capped(t, clock, 10, registry.Options[string]{IdleAfter: time.Minute})
	for i := range n {
		get(t, r, fmt.Sprint(i))
	}
	opened := 0
	for _, b := range r.All() {
		fail(t, b)
		if b.State() == core.Open {
			opened++
		}
	}
	held, allowed := r.OpenShare()
	require.Equal(t, [3]int{n / 10, n / 10, n / 10}, [3]int{opened, held, allowed})

	clock.Set(30 * time.Second)
	for _, b := range r.All() {
		if ejected(b.State()) { // half-open by now
			require.NoError(t, b.ForceOpen(time.Hour)) // open past the idle time: kept
		}
	}
	clock.Set(2 * time.Minute)
	require.Equal(t, n-n/10, r.EvictIdle())
	held, allowed = r.OpenShare()
	require.Equal(t, [2]int{n / 10, n / 100}, [2]int{held, allowed})
	require.Equal(t, n/10, recount(r))
	for _, b := range r.All() {
		b.Reset()
	}
	held, _ = r.OpenShare()
	require.Zero(t, held)
}

// New refuses a share outside 0..100 and a template with a gate of its
// own, naming them.
func TestMaxOpenPercentOptions(t *testing.T) {
	for _, pct := range []int{-1, 101} {
		_, err := registry.New(registry.Options[string]{Config: core.Config{ConsecutiveFailures: 1}, MaxOpenPercent: pct})
		require.ErrorIs(t, err, registry.ErrInvalidOptions)
		require.ErrorContains(t, err, fmt.Sprintf("MaxOpenPercent %d is outside 0..100", pct))
	}
	_, err := registry.New(registry.Options[string]{Config: core.Config{ConsecutiveFailures: 1, OpenGate: noGate{}}, MaxOpenPercent: 10})
	require.ErrorIs(t, err, registry.ErrInvalidOptions)
	require.ErrorContains(t, err, "Config.OpenGate")
	r, err := registry.New(registry.Options[string]{Config: core.Config{ConsecutiveFailures: 1}})
	require.NoError(t, err)
	held, allowed := r.OpenShare()
	require.Zero(t, held+allowed, "no cap")
	require.Nil(t, get(t, r, "a").Settings().OpenGate)
}

// noGate is a core.OpenGate that refuses nothing and counts nothing.
type noGate struct{}

func (noGate) TryAcquire() bool { return true }
func (noGate) Acquire()         {}
func (noGate) Release()         {}

// A breaker's gate is reachable from its Settings: a Release that gives
// back no slot the breaker holds (a caller's, not the breaker's) leaves the
// registry's count exact, so that no trip opens past the share; a foreign
// Acquire is counted, as an operator's decision is, until its Release.
func TestMaxOpenPercentForeignRelease(t *testing.T) {
	r := capped(t, core.NewManualClock(0), 50, registry.Options[string]{})
	a, b := get(t, r, "a"), get(t, r, "b")
	a.Settings().OpenGate.Release()
	held, allowed := r.OpenShare()
	require.Equal(t, [2]int{0, 1}, [2]int{held, allowed}, "a release with no slot held")
	fail(t, a)
	fail(t, b)
	require.Equal(t, []core.State{core.Open, core.Closed}, []core.State{a.State(), b.State()}, "one of two at 50 %")
	require.Equal(t, 1, recount(r))
	held, _ = r.OpenShare()
	require.Equal(t, 1, held)

	b.Settings().OpenGate.Acquire()
	held, _ = r.OpenShare()
	require.Equal(t, 2, held, "a foreign Acquire is counted")
	b.Settings().OpenGate.Release()
	b.Settings().OpenGate.Release()
	a.Reset()
	held, _ = r.OpenShare()
	require.Zero(t, held)
}
