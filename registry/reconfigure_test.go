package registry_test

import (
	"fmt"
	"sync"
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
