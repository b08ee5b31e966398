package registry_test

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/casbreaker/casbreaker/core"
	"github.com/casbreaker/casbreaker/registry"
)

var errFail = errors.New("dependency failed")

func newReg(t testing.TB, clock *core.ManualClock, max int, idle time.Duration) *registry.Registry[string] {
	t.Helper()
	r, err := registry.New(registry.Options[string]{
		Config:      core.Config{Name: "api", ConsecutiveFailures: 1, OpenDuration: time.Second, Clock: clock},
		MaxBreakers: max,
		IdleAfter:   idle,
	})
	require.NoError(t, err)
	return r
}

func newRegFor(cfg core.Config, idle time.Duration) (*registry.Registry[string], error) {
	return registry.New(registry.Options[string]{Config: cfg, IdleAfter: idle})
}

func get(t testing.TB, r *registry.Registry[string], key string) *registry.Breaker {
	t.Helper()
	b, err := r.Get(key)
	require.NoError(t, err)
	return b
}

func TestGetMakesOneBreakerPerKey(t *testing.T) {
	r := newReg(t, core.NewManualClock(0), 0, 0)
	a, b := get(t, r, "a"), get(t, r, "b")
	require.Same(t, a, get(t, r, "a"))
	require.NotSame(t, a, b)
	require.Equal(t, "api/a", a.Settings().Name)
	require.Equal(t, 2, r.Len())

	keys := map[string]*registry.Breaker{}
	for k, v := range r.All() {
		keys[k] = v
	}
	require.Equal(t, map[string]*registry.Breaker{"a": a, "b": b}, keys)
}

func TestNewRejectsBadOptions(t *testing.T) {
	_, err := registry.New(registry.Options[string]{Config: core.Config{ConsecutiveFailures: 1}, MaxBreakers: -1, IdleAfter: -time.Second})
	require.ErrorIs(t, err, registry.ErrInvalidOptions)
	require.ErrorContains(t, err, "MaxBreakers -1")
	require.ErrorContains(t, err, "IdleAfter -1s")
	_, err = registry.New(registry.Options[string]{})
	require.ErrorIs(t, err, core.ErrInvalidConfig)
	require.PanicsWithValue(t, "registry: Registry used without New: make one with registry.New", func() {
		_, _ = new(registry.Registry[string]).Get("a")
	})
}

// Two goroutines, or many, asking for the same new key get the same
// breaker.
func TestConcurrentGetOfANewKey(t *testing.T) {
	for round := range 50 {
		r := newReg(t, core.NewManualClock(0), 8, time.Minute)
		const n = 8
		got := make([]*registry.Breaker, n)
		var start, done sync.WaitGroup
		start.Add(1)
		for i := range n {
			done.Add(1)
			go func() {
				defer done.Done()
				start.Wait()
				got[i], _ = r.Get(fmt.Sprint("k", round%3))
			}()
		}
		start.Done()
		done.Wait()
		for i := range got {
			require.Same(t, got[0], got[i])
		}
		require.Equal(t, 1, r.Len())
	}
}

// Idle eviction drops a closed breaker without permits out after IdleAfter,
// and never one that is open, half-open or has a permit out.
func TestEvictIdle(t *testing.T) {
	clock := core.NewManualClock(0)
	r := newReg(t, clock, 0, time.Minute)
	idle := get(t, r, "idle")
	open := get(t, r, "open")
	p, err := open.Allow()
	require.NoError(t, err)
	open.Done(p, errFail)
	require.Equal(t, core.Open, open.State())
	busy := get(t, r, "busy")
	held, err := busy.Allow()
	require.NoError(t, err)

	clock.Set(59 * time.Second)
	require.Zero(t, r.EvictIdle(), "nothing is idle for a minute yet")
	clock.Set(time.Hour)
	// open's open duration has passed: it reports half-open, still kept.
	require.Equal(t, 1, r.EvictIdle())
	require.Equal(t, 2, r.Len())
	require.NotSame(t, idle, get(t, r, "idle"), "a new breaker for the evicted key")
	require.Same(t, open, get(t, r, "open"))
	require.Same(t, busy, get(t, r, "busy"))

	// Once busy's call reports, it may go; the late Done of an evicted
	// breaker's permit changes nothing in the registry.
	busy.Done(held, nil)
	clock.Set(2 * time.Hour)
	require.Equal(t, 2, r.EvictIdle()) // idle's new breaker and busy; open stays half-open
	late, err := idle.Allow()
	require.NoError(t, err, "an evicted breaker still works, alone")
	idle.Done(late, errFail)
	require.Equal(t, core.Open, idle.State())
	require.Equal(t, core.Closed, get(t, r, "idle").State())
}

// At the bound a new key evicts the least recently used evictable breaker;
// when none may go, Get says the registry is full.
func TestMaxBreakers(t *testing.T) {
	clock := core.NewManualClock(0)
	r := newReg(t, clock, 2, 0)
	get(t, r, "a")
	clock.Set(time.Second)
	b := get(t, r, "b")
	clock.Set(2 * time.Second)
	get(t, r, "a") // a is now the most recently used
	clock.Set(3 * time.Second)
	c := get(t, r, "c") // evicts b, last used at 1 s
	require.Equal(t, 2, r.Len())
	clock.Set(4 * time.Second)
	require.NotSame(t, b, get(t, r, "b")) // evicts a, last used at 2 s
	require.Same(t, c, get(t, r, "c"))
	require.Equal(t, 2, r.Len())

	for k := range r.All() {
		br := get(t, r, k)
		p, err := br.Allow()
		require.NoError(t, err)
		br.Done(p, errFail) // open: may not be evicted
	}
	_, err := r.Get("d")
	require.ErrorIs(t, err, registry.ErrFull)
	require.Equal(t, 2, r.Len())
}

// Gets, calls and evictions at once, under the race detector: every Get
// returns a breaker that works, a breaker is never dropped with a permit
// out at the moment of eviction, and the count matches the breakers.
func TestConcurrentGetsAndEvictions(t *testing.T) {
	clock := core.NewManualClock(0)
	r := newReg(t, clock, 4, time.Second)
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for i := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; ; j++ {
				select {
				case <-stop:
					return
				default:
				}
				b, err := r.Get(fmt.Sprint("k", (i+j)%6))
				if errors.Is(err, registry.ErrFull) {
					continue
				}
				if err != nil {
					t.Error(err)
					return
				}
				if p, err := b.Allow(); err == nil {
					b.Done(p, nil)
				}
			}
		}()
	}
	for range 200 {
		clock.Advance(100 * time.Millisecond)
		r.EvictIdle()
	}
	close(stop)
	wg.Wait()
	n := 0
	for range r.All() {
		n++
	}
	require.Equal(t, r.Len(), n)
	require.LessOrEqual(t, n, 4)
}

// Get of a key that has a breaker allocates nothing, with eviction on or
// off, and neither does a call through it.
func TestGetAllocatesNothing(t *testing.T) {
	for _, idle := range []time.Duration{0, time.Minute} {
		r := newReg(t, core.NewManualClock(0), 0, idle)
		get(t, r, "a")
		require.Zero(t, testing.AllocsPerRun(200, func() {
			b, _ := r.Get("a")
			p, _ := b.Allow()
			b.Done(p, nil)
		}), "idle %v", idle)
	}
}
