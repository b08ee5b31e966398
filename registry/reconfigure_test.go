package registry_test

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/casbreaker/casbreaker/core"
	"github.com/casbreaker/casbreaker/registry"
)

// Registry.Reconfigure gives every breaker, held or made later, the new
// template's rules, keeping each one's state and window and its own name,
// with one notification each.
func TestReconfigureReachesEveryBreaker(t *testing.T) {
	clock := core.NewManualClock(0)
	var mu sync.Mutex
	var got []string
	tmpl := core.Config{Name: "api", WindowSize: 10, MinimumNumberOfCalls: 10, FailureRateThreshold: 50, Clock: clock,
		OnStateChange: func(tr core.Transition) {
			mu.Lock()
			defer mu.Unlock()
			got = append(got, fmt.Sprintf("%s %v>%v %v %s", tr.Name, tr.From, tr.To, tr.Reason, tr.Changed))
		}}
	r, err := registry.New(registry.Options[string]{Config: tmpl})
	require.NoError(t, err)
	a := get(t, r, "a")
	for range 3 {
		p, err := a.Allow()
		require.NoError(t, err)
		a.Done(p, errFail)
	}
	require.NoError(t, get(t, r, "b").ForceOpen(0))

	next := tmpl
	next.FailureRateThreshold, next.Name, next.OnStateChange = 25, "ignored", nil
	require.NoError(t, r.Reconfigure(next))
	for _, k := range []string{"a", "b", "c"} {
		s := get(t, r, k).Settings()
		require.Equal(t, 25, s.FailureRateThreshold, k)
		require.Equal(t, "api/"+k, s.Name, k)
	}
	require.Equal(t, uint64(3), a.Counts().Failures, "the window kept")
	require.Equal(t, core.ForcedOpen, get(t, r, "b").State())
	mu.Lock()
	require.ElementsMatch(t, []string{
		"api/b closed>forced-open manual ",
		"api/a closed>closed reconfigured FailureRateThreshold",
		"api/b forced-open>forced-open reconfigured FailureRateThreshold",
	}, got)
	mu.Unlock()

	bad := next
	bad.FailureRateThreshold = 101
	require.ErrorIs(t, r.Reconfigure(bad), core.ErrInvalidConfig)
	bad = next
	bad.OpenGate = noGate{}
	require.ErrorIs(t, r.Reconfigure(bad), registry.ErrInvalidOptions)
	bad = next
	bad.SlowCallDurationThreshold, bad.SlowCallRateThreshold = time.Second, 50
	require.ErrorIs(t, r.Reconfigure(bad), core.ErrInvalidConfig, "slow calls cannot start being measured")
	require.Equal(t, 25, get(t, r, "a").Settings().FailureRateThreshold, "nothing changed")
}

// Breakers made while Reconfigure runs end on the newest template: each
// Get either reads the new template or, having read the old one, brings
// its breaker up to date before it returns.
func TestReconfigureRacingGets(t *testing.T) {
	for round := range 20 {
		tmpl := core.Config{Name: "api", ConsecutiveFailures: 5}
		r, err := registry.New(registry.Options[string]{Config: tmpl})
		require.NoError(t, err)
		var wg sync.WaitGroup
		for w := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for k := range 50 {
					get(t, r, fmt.Sprint(w, "-", k))
				}
			}()
		}
		for n := 6; n < 10; n++ {
			tmpl.ConsecutiveFailures = n
			require.NoError(t, r.Reconfigure(tmpl))
		}
		wg.Wait()
		for k, b := range r.All() {
			require.Equal(t, 9, b.Settings().ConsecutiveFailures, "round %d key %s", round, k)
		}
		require.Equal(t, 400, r.Len())
	}
}

// The interleaving the racing test can only hope for, forced: Get reads
// the template, then (inside the key's Name function, which runs before
// the registry's mutex) a whole Reconfigure runs and lists the breakers
// before this one is kept. The Get must still return a breaker on the new
// rules.
func TestReconfigureBetweenTemplateAndKeep(t *testing.T) {
	tmpl := core.Config{ConsecutiveFailures: 5}
	var r *registry.Registry[string]
	var once sync.Once
	r, err := registry.New(registry.Options[string]{Config: tmpl, Name: func(k string) string {
		once.Do(func() {
			next := tmpl
			next.ConsecutiveFailures = 7
			require.NoError(t, r.Reconfigure(next))
		})
		return k
	}})
	require.NoError(t, err)
	require.Equal(t, 7, get(t, r, "x").Settings().ConsecutiveFailures)
}

// A listener may reconfigure the whole registry: on the first trip of any
// key, every breaker gets a tighter rule, without a hang.
func TestReconfigureFromListener(t *testing.T) {
	tmpl := core.Config{ConsecutiveFailures: 3}
	var r *registry.Registry[string]
	var once sync.Once
	tmpl.OnStateChange = func(tr core.Transition) {
		if tr.To == core.Open {
			once.Do(func() {
				next := tmpl
				next.ConsecutiveFailures = 1
				require.NoError(t, r.Reconfigure(next))
			})
		}
	}
	r, err := registry.New(registry.Options[string]{Config: tmpl})
	require.NoError(t, err)
	other := get(t, r, "other")
	a := get(t, r, "a")
	for range 3 {
		p, err := a.Allow()
		require.NoError(t, err)
		a.Done(p, errFail)
	}
	require.Equal(t, core.Open, a.State())
	p, err := other.Allow()
	require.NoError(t, err)
	other.Done(p, errFail)
	require.Equal(t, core.Open, other.State(), "one failure trips it now")
}

// A breaker made after Reconfigure has the template's wiring, not the new
// Config's: Reconfigure reads no Clock, OnStateChange, CollectMetrics or
// InitialState from c, for the breakers made later either. (Storing c as
// the template whole gave every later breaker the system clock, no
// listener and no metrics.)
func TestReconfigureKeepsTheTemplatesWiring(t *testing.T) {
	clock := core.NewManualClock(0)
	var mu sync.Mutex
	var got []string
	tmpl := core.Config{Name: "api", ConsecutiveFailures: 3, Clock: clock, CollectMetrics: true,
		OnStateChange: func(tr core.Transition) {
			mu.Lock()
			defer mu.Unlock()
			got = append(got, fmt.Sprintf("%s %v>%v", tr.Name, tr.From, tr.To))
		}}
	r, err := registry.New(registry.Options[string]{Config: tmpl})
	require.NoError(t, err)
	next := core.Config{ConsecutiveFailures: 1, InitialState: core.ForcedOpen}
	require.NoError(t, r.Reconfigure(next))
	b := get(t, r, "later")
	require.Equal(t, core.Closed, b.State(), "InitialState is the template's")
	s := b.Settings()
	require.Equal(t, 1, s.ConsecutiveFailures)
	require.Same(t, clock, s.Clock)
	require.True(t, s.CollectMetrics)
	p, err := b.Allow()
	require.NoError(t, err)
	b.Done(p, errFail)
	require.Equal(t, core.Open, b.State())
	mu.Lock()
	require.Equal(t, []string{"api/later closed>open"}, got, "the template's listener")
	mu.Unlock()
}

// heapAfterGC is the live heap once garbage is collected.
func heapAfterGC() uint64 {
	var m runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// A registry of many breakers (10,000, or REGISTRY_SCALE_KEYS; count
// windows of 100 and a listener) is reconfigured three times from new
// templates while two goroutines Get, some of them new keys: every
// breaker ends on the last rules, and the live heap a breaker holds
// afterwards is bounded: the breakers each Reconfigure replaced are
// garbage, and only the first breaker of each line (its sealed window,
// the caller's handle) stays with the newest. The figures are logged
// (REGISTRY_SCALE_KEYS=100000 go test -run AtScale -v).
func TestReconfigureAtScale(t *testing.T) {
	if testing.Short() {
		t.Skip("many breakers")
	}
	n := 10_000
	if v, err := strconv.Atoi(os.Getenv("REGISTRY_SCALE_KEYS")); err == nil {
		n = v
	}
	tmpl := core.Config{WindowSize: 100, MinimumNumberOfCalls: 100, FailureRateThreshold: 50,
		OnStateChange: func(core.Transition) {}}
	r, err := registry.New(registry.Options[int]{Config: tmpl})
	require.NoError(t, err)
	base := heapAfterGC()
	for k := range n {
		b, err := r.Get(k)
		require.NoError(t, err)
		if k%10 == 0 {
			p, err := b.Allow()
			require.NoError(t, err)
			b.Done(p, errFail)
		}
	}
	before := heapAfterGC()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var bad atomic.Value
	for w := range 2 {
		wg.Go(func() {
			for k := 0; ; k++ {
				select {
				case <-stop:
					return
				default:
				}
				key := k % n
				if k%100 == 0 {
					key = n + w*1_000_000_000 + k // a new breaker
				}
				b, err := r.Get(key)
				if err != nil {
					bad.CompareAndSwap(nil, err)
					return
				}
				if p, err := b.Allow(); err == nil {
					b.Done(p, nil)
				}
			}
		})
	}
	next := tmpl
	for i, size := range []int{50, 80, 60} {
		next.FailureRateThreshold, next.WindowSize, next.MinimumNumberOfCalls = 40+i, size, size
		var ms0, ms1 runtime.MemStats
		runtime.ReadMemStats(&ms0)
		start := time.Now()
		require.NoError(t, r.Reconfigure(next))
		took := time.Since(start)
		runtime.ReadMemStats(&ms1)
		allocs, bytes := ms1.Mallocs-ms0.Mallocs, ms1.TotalAlloc-ms0.TotalAlloc
		t.Logf("Reconfigure %d of %d breakers, 2 goroutines racing it with Gets: %v (%v a breaker), %d allocations (%.1f a breaker), %d B (%.0f a breaker), the racers' included",
			i+1, n, took, took/time.Duration(n), allocs, float64(allocs)/float64(n), bytes, float64(bytes)/float64(n))
	}
	close(stop)
	wg.Wait()
	require.Nil(t, bad.Load())
	for k, b := range r.All() {
		s := b.Settings()
		require.Equal(t, 42, s.FailureRateThreshold, "key %v", k)
		require.Equal(t, 60, s.WindowSize, "key %v", k)
	}
	after := heapAfterGC()
	per0, per1 := float64(before-base)/float64(n), float64(after-base)/float64(r.Len())
	t.Logf("%d breakers (+%d made by racing Gets): live heap %.0f B a breaker before, %.0f after", n, r.Len()-n, per0, per1)
	require.Less(t, per1, 2.2*per0, "the breakers in between are kept alive")
	runtime.KeepAlive(r)
}
