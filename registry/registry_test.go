package registry_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/casbreaker/casbreaker/core"
	"github.com/casbreaker/casbreaker/internal/breakers"
	"github.com/casbreaker/casbreaker/registry"
)

// A registry's Breaker keeps the contract of both implementations.
var _ breakers.Breaker = (*registry.Breaker)(nil)

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

// Lookup finds the breaker Get made for a key, and for a key with none
// finds nothing and makes nothing.
func TestLookupMakesNothing(t *testing.T) {
	r := newReg(t, core.NewManualClock(0), 0, 0)
	b, ok := r.Lookup("a")
	require.False(t, ok)
	require.Nil(t, b)
	require.Zero(t, r.Len(), "a Lookup of a missing key made a breaker")
	a := get(t, r, "a")
	b, ok = r.Lookup("a")
	require.True(t, ok)
	require.Same(t, a, b)
	_, ok = r.Lookup("A")
	require.False(t, ok)
	require.Equal(t, 1, r.Len())
}

func TestNewRejectsBadOptions(t *testing.T) {
	_, err := registry.New(registry.Options[string]{Config: core.Config{ConsecutiveFailures: 1}, MaxBreakers: -1, IdleAfter: -time.Second})
	require.ErrorIs(t, err, registry.ErrInvalidOptions)
	require.ErrorContains(t, err, "MaxBreakers -1")
	require.ErrorContains(t, err, "IdleAfter -1s")
	_, err = registry.New(registry.Options[string]{})
	require.ErrorIs(t, err, core.ErrInvalidConfig)
	const noNew = "registry: Registry used without New: make one with registry.New"
	require.PanicsWithValue(t, noNew, func() { _, _ = new(registry.Registry[string]).Get("a") })
	require.PanicsWithValue(t, noNew, func() { _, _ = new(registry.Registry[string]).Lookup("a") })
	const nilReg = "registry: nil *Registry: make one with registry.New and check its error"
	var none *registry.Registry[string]
	require.PanicsWithValue(t, nilReg, func() { _, _ = none.Get("a") })
	require.PanicsWithValue(t, nilReg, func() { _, _ = none.Lookup("a") })
	require.PanicsWithValue(t, nilReg, func() { _ = none.Len() })
	require.PanicsWithValue(t, nilReg, func() { _ = none.EvictIdle() })
	require.PanicsWithValue(t, nilReg, func() { _ = none.All() })
	var nilBreaker *registry.Breaker
	const nilB = "registry: nil *Breaker: get one from Registry.Get or Registry.Lookup"
	require.PanicsWithValue(t, nilB, func() { _, _ = nilBreaker.Allow() })
	require.PanicsWithValue(t, nilB, func() {
		_, _ = core.Do(context.Background(), nilBreaker, func(context.Context) (int, error) { return 0, nil })
	})
	const noGet = "registry: Breaker used without Registry.Get: a zero Breaker has no core breaker"
	var zero registry.Breaker
	require.PanicsWithValue(t, noGet, func() { _, _ = zero.Allow() })
	require.PanicsWithValue(t, noGet, func() { zero.Done(core.Permit{}, nil) })
	require.PanicsWithValue(t, noGet, func() { zero.Record(core.Permit{}, core.Success) })
	require.PanicsWithValue(t, noGet, func() { zero.RecordHint(core.Permit{}, time.Second) })
	require.PanicsWithValue(t, noGet, func() { _ = zero.State() })
	require.PanicsWithValue(t, noGet, func() { _ = zero.Counts() })
	require.PanicsWithValue(t, noGet, func() { _ = zero.Metrics() })
	require.PanicsWithValue(t, noGet, func() { _ = zero.Settings() })
	require.PanicsWithValue(t, noGet, func() { _ = zero.RetryAfter() })
	require.PanicsWithValue(t, noGet, func() { _ = zero.ForceOpen(0) })
	require.PanicsWithValue(t, noGet, func() { zero.Disable() })
	require.PanicsWithValue(t, noGet, func() { zero.MetricsOnly() })
	require.PanicsWithValue(t, noGet, func() { zero.Reset() })
	require.PanicsWithValue(t, noGet, func() { zero.HalfOpen() })
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

// Gets, calls and evictions at once, under the race detector, with one
// goroutine reporting its permits wrong (twice, to another key's breaker,
// to the key's breaker of a new Get): every Get returns a breaker that
// works, no count goes below zero, the count of the registry matches its
// breakers, and once no Get has come for PermitTimeout, every breaker may
// go.
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
				key := fmt.Sprint("k", (i+j)%6)
				b, err := r.Get(key)
				if errors.Is(err, registry.ErrFull) {
					continue
				}
				if err != nil {
					t.Error(err)
					return
				}
				p, err := b.Allow()
				if err != nil {
					continue
				}
				if i < 3 {
					b.Done(p, nil)
					continue
				}
				switch j % 3 {
				case 0:
					b.Done(p, nil)
					b.Done(p, nil)
				case 1:
					if other, err := r.Get("k0"); err == nil {
						other.Done(p, nil)
					}
				default:
					if again, err := r.Get(key); err == nil {
						again.Done(p, nil)
					}
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
	for _, b := range r.All() {
		n++
		require.GreaterOrEqual(t, registry.PermitsOut(b), int64(0))
	}
	require.Equal(t, r.Len(), n)
	require.LessOrEqual(t, n, 4)
	// A breaker looked up since the last pass (a Get that landed after the
	// loop's last EvictIdle) is spared once, its idle time starting at the
	// pass that finds the mark: a second pass, one PermitTimeout later,
	// takes it too.
	clock.Advance(registry.DefaultPermitTimeout)
	evicted := r.EvictIdle()
	clock.Advance(registry.DefaultPermitTimeout)
	evicted += r.EvictIdle()
	require.Equal(t, n, evicted)
	require.Zero(t, r.Len())
}

// Get of a key that has a breaker allocates nothing, with or without a
// bound and idle eviction, and neither does a call through it.
func TestGetAllocatesNothing(t *testing.T) {
	for _, bound := range []int{0, 8} {
		for _, idle := range []time.Duration{0, time.Minute} {
			r := newReg(t, core.NewManualClock(0), bound, idle)
			get(t, r, "a")
			require.Zero(t, testing.AllocsPerRun(200, func() {
				b, _ := r.Get("a")
				p, _ := b.Allow()
				b.Done(p, nil)
			}), "bound %d, idle %v", bound, idle)
			require.Zero(t, testing.AllocsPerRun(200, func() {
				_, _ = r.Lookup("a")
				_, _ = r.Lookup("b")
			}), "Lookup, bound %d, idle %v", bound, idle)
		}
	}
}
