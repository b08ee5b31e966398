package registry_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/casbreaker/casbreaker/core"
	"github.com/casbreaker/casbreaker/registry"
)

// A registry's breakers survive a restart by key: the snapshot map goes
// through JSON, and the next process's registry restores each key's
// breaker for the time left; a key that already has a breaker keeps it,
// and a snapshot of another template is refused for its key, naming it.
func TestRegistry_SnapshotAndRestore(t *testing.T) {
	stopped := time.Date(2026, 12, 2, 7, 0, 0, 0, time.UTC)
	cfg := core.Config{Name: "api", ConsecutiveFailures: 1, OpenDuration: time.Minute, Clock: core.NewManualClock(0)}
	old, err := registry.New(registry.Options[string]{Config: cfg})
	require.NoError(t, err)
	get(t, old, "up")
	down := get(t, old, "down")
	p, err := down.Allow()
	require.NoError(t, err)
	down.Done(p, errFail) // open for a minute
	snaps, err := old.Snapshot(stopped, true)
	require.NoError(t, err)
	saved, err := json.Marshal(snaps)
	require.NoError(t, err)

	var loaded map[string]core.Snapshot
	require.NoError(t, json.Unmarshal(saved, &loaded))
	cfg.Clock = core.NewManualClock(0) // the new process's
	r, err := registry.New(registry.Options[string]{Config: cfg})
	require.NoError(t, err)
	require.NoError(t, r.Restore(loaded, stopped.Add(20*time.Second)))
	require.Equal(t, 2, r.Len())
	b, ok := r.Lookup("down")
	require.True(t, ok)
	require.Equal(t, core.Open, b.State())
	require.Equal(t, 40*time.Second, b.RetryAfter())
	require.Equal(t, "api/down", b.Settings().Name)
	b, ok = r.Lookup("up")
	require.True(t, ok)
	require.Equal(t, core.Closed, b.State())

	// A key with a breaker keeps it.
	again, err := registry.New(registry.Options[string]{Config: cfg})
	require.NoError(t, err)
	get(t, again, "down")
	require.NoError(t, again.Restore(loaded, stopped))
	b, _ = again.Lookup("down")
	require.Equal(t, core.Closed, b.State())

	// Another template: each key refused, by name.
	other := cfg
	other.OpenDuration = 2 * time.Minute
	changed, err := registry.New(registry.Options[string]{Config: other})
	require.NoError(t, err)
	err = changed.Restore(loaded, stopped)
	require.ErrorIs(t, err, core.ErrSnapshotMismatch)
	require.Contains(t, err.Error(), "down")
	require.Contains(t, err.Error(), "up")
	require.Equal(t, 2, strings.Count(err.Error(), "fingerprint"))
	require.Zero(t, changed.Len())

	_, err = old.Snapshot(time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC), false)
	require.ErrorIs(t, err, core.ErrInvalidArgument)
}

// With MaxOpenPercent, a restored breaker that is open (or half-open, or
// forced open) holds a slot of the cap, as an ejecting initial state does,
// even past the share: the restore is not refused, and trips are until the
// count is under it again.
func TestRegistry_RestoreCountsOpenInTheCap(t *testing.T) {
	stopped := time.Date(2026, 12, 2, 7, 0, 0, 0, time.UTC)
	cfg := core.Config{ConsecutiveFailures: 1, OpenDuration: time.Second, Clock: core.NewManualClock(0)} // capped's
	old, err := registry.New(registry.Options[string]{Config: cfg})
	require.NoError(t, err)
	for _, k := range []string{"a", "b", "c"} {
		fail(t, get(t, old, k))
	}
	get(t, old, "d")
	snaps, err := old.Snapshot(stopped, false)
	require.NoError(t, err)

	cfg.Clock = core.NewManualClock(0)
	r := capped(t, cfg.Clock.(*core.ManualClock), 25, registry.Options[string]{})
	require.NoError(t, r.Restore(snaps, stopped))
	held, allowed := r.OpenShare()
	require.Equal(t, [2]int{3, 1}, [2]int{held, allowed}, "three open of four at 25 %")
	d, _ := r.Lookup("d")
	fail(t, d)
	require.Equal(t, core.Closed, d.State(), "capped")
	for _, k := range []string{"a", "b", "c"} {
		b, _ := r.Lookup(k)
		require.Equal(t, core.Open, b.State())
		b.Reset()
	}
	held, _ = r.OpenShare()
	require.Zero(t, held)
	fail(t, d)
	require.Equal(t, core.Open, d.State())
}

// A Restore racing calls, trips and evictions on the same keys, at the
// bound and with the cap, leaves the cap's count exact: each restored
// ejected breaker's slot is counted once, and given back once when it is
// evicted or closes. Run under the race detector.
func TestRegistry_RestoreRacesTrafficUnderTheCap(t *testing.T) {
	stopped := time.Date(2026, 12, 2, 7, 0, 0, 0, time.UTC)
	clock := core.NewManualClock(0)
	old := capped(t, clock, 100, registry.Options[string]{})
	for i := range 50 {
		b := get(t, old, fmt.Sprint(i))
		if i%2 == 0 {
			fail(t, b)
		}
	}
	snaps, err := old.Snapshot(stopped, true)
	require.NoError(t, err)
	for round := range 30 {
		r := capped(t, clock, 30, registry.Options[string]{MaxBreakers: 40, IdleAfter: time.Second})
		var wg sync.WaitGroup
		for g := range 3 {
			wg.Go(func() {
				for i := range 200 {
					b, err := r.Get(fmt.Sprint((i*7 + g) % 50))
					if err != nil {
						continue
					}
					if p, err := b.Allow(); err == nil {
						b.Done(p, []error{nil, errFail}[i%2])
					}
					if i%50 == 0 {
						r.EvictIdle()
						clock.Advance(300 * time.Millisecond)
					}
				}
			})
		}
		wg.Go(func() { _ = r.Restore(snaps, stopped) })
		wg.Wait()
		held, _ := r.OpenShare()
		require.Equal(t, recount(r), held, "round %d", round)
	}
}
