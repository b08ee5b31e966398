package registry_test

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/casbreaker/casbreaker/core"
	"github.com/casbreaker/casbreaker/registry"
)

// tally is an Extension that keeps a part per breaker and counts what the
// registry told them; its parts check their own rules (Made once, before
// Dropped, Dropped once) and record the first breach.
type tally struct {
	mu       sync.Mutex
	extended int
	live     map[string]int // name -> parts made and not dropped
	dropped  int
	breach   string
	// hooks for the tests
	fail   func(name string) error
	config func(c *core.Config)
	onDrop func()
}

type part struct {
	t    *tally
	name string
	b    *core.Breaker
	gone bool
}

func (t *tally) Extend(name string, c *core.Config) (registry.Extended, error) {
	if t.fail != nil {
		if err := t.fail(name); err != nil {
			return nil, err
		}
	}
	if t.config != nil {
		t.config(c)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.extended++
	return &part{t: t, name: name}, nil
}

func (p *part) Made(b *core.Breaker) {
	p.t.mu.Lock()
	defer p.t.mu.Unlock()
	switch {
	case p.b != nil || p.gone:
		p.t.note("Made after Made or Dropped: " + p.name)
	case b.Settings().Name != p.name:
		p.t.note("Made with the breaker of " + b.Settings().Name + ", not " + p.name)
	}
	p.b = b
	if p.t.live == nil {
		p.t.live = map[string]int{}
	}
	p.t.live[p.name]++
}

func (p *part) Dropped() {
	if p.t.onDrop != nil {
		p.t.onDrop()
	}
	p.t.mu.Lock()
	defer p.t.mu.Unlock()
	if p.gone {
		p.t.note("Dropped twice: " + p.name)
	}
	p.gone = true
	p.t.dropped++
	if p.b != nil {
		p.t.live[p.name]--
	}
}

func (t *tally) note(s string) {
	if t.breach == "" {
		t.breach = s
	}
}

// check requires no breach and one live part per breaker the registry
// holds, under its name.
func (t *tally) check(tb testing.TB, r *registry.Registry[string]) {
	tb.Helper()
	t.mu.Lock()
	defer t.mu.Unlock()
	require.Empty(tb, t.breach)
	held := map[string]int{}
	for _, b := range r.All() {
		held[b.Settings().Name]++
	}
	for name, n := range t.live {
		if n == 0 {
			delete(t.live, name)
		}
	}
	require.Equal(tb, held, t.live, "parts made and not dropped, by name, against the breakers held")
}

func extended(t testing.TB, ext registry.Extension, max int, idle time.Duration, clock core.Clock) *registry.Registry[string] {
	t.Helper()
	r, err := registry.New(registry.Options[string]{
		Config:      core.Config{Name: "api", ConsecutiveFailures: 1, OpenDuration: time.Second, Clock: clock},
		MaxBreakers: max, IdleAfter: idle, Extension: ext,
	})
	require.NoError(t, err)
	return r
}

// An Extension's part is made for each new breaker, with the config it
// changed (here a probe gate) in the breaker, is dropped once when the
// registry evicts the breaker (at the bound, idle, by EvictIdle), and
// outside the registry's mutex: Dropped calls Len, which takes it.
func TestExtensionFollowsEachBreaker(t *testing.T) {
	clock := core.NewManualClock(0)
	gate := new(halfGate)
	ext := &tally{config: func(c *core.Config) { c.ProbeGate = gate }}
	var r *registry.Registry[string]
	ext.onDrop = func() { r.Len() }
	r = extended(t, ext, 3, time.Minute, clock)
	for _, k := range []string{"a", "b", "c"} {
		b := get(t, r, k)
		require.Equal(t, core.ProbeGate(gate), b.Settings().ProbeGate)
	}
	ext.check(t, r)
	get(t, r, "d") // at the bound: evicts a
	require.Equal(t, 1, ext.dropped)
	ext.check(t, r)
	clock.Set(2 * time.Minute)
	require.Equal(t, 3, r.EvictIdle())
	require.Equal(t, 4, ext.dropped)
	ext.check(t, r)
	require.Equal(t, 4, ext.extended)
}

// halfGate lets every probe go: the tests only look for it in Settings.
type halfGate struct{}

func (*halfGate) AdmitProbe(core.Permit) (time.Duration, error) { return 0, nil }
func (*halfGate) ProbeDone(core.Permit, core.Outcome)           {}

// Extend's error fails the Get with the key named and makes no breaker; a
// config that core.New refuses fails it too, and its part is dropped
// unmade; an Extend that calls back into the registry does not deadlock.
func TestExtensionErrors(t *testing.T) {
	ext := &tally{}
	r := extended(t, ext, 0, 0, core.NewManualClock(0))
	ext.fail = func(name string) error {
		if name == "api/refused" {
			return errors.New("no membership")
		}
		return nil
	}
	_, err := r.Get("refused")
	require.ErrorContains(t, err, "no membership")
	require.ErrorContains(t, err, "refused")
	require.Zero(t, r.Len())

	ext.config = func(c *core.Config) {
		if c.Name == "api/bad" {
			c.FailureRateThreshold = 101
		}
	}
	_, err = r.Get("bad")
	require.ErrorIs(t, err, core.ErrInvalidConfig)
	require.Equal(t, 1, ext.dropped, "the part of a breaker never made")

	ext.fail = func(name string) error {
		if name == "api/outer" {
			get(t, r, "inner")
		}
		return nil
	}
	get(t, r, "outer")
	require.Equal(t, 2, r.Len())
	ext.check(t, r)
}

// Gets of one new key racing: one breaker, one part made; every other
// Extend's part is dropped unmade.
func TestExtensionRacingGets(t *testing.T) {
	for range 20 {
		ext := &tally{}
		r := extended(t, ext, 0, 0, core.NewManualClock(0))
		var wg sync.WaitGroup
		for range 8 {
			wg.Go(func() { get(t, r, "k") })
		}
		wg.Wait()
		ext.check(t, r)
		require.Equal(t, ext.extended-1, ext.dropped)
	}
}

// 100,000 keys through a registry bounded at 1,000 breakers, from four
// goroutines: every breaker evicted has its part dropped once, and the
// parts left are exactly the breakers held.
func TestExtensionAtScale(t *testing.T) {
	ext := &tally{}
	r := extended(t, ext, 1000, 0, core.NewManualClock(0))
	keys := 100_000
	if testing.Short() {
		keys = 10_000
	}
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := w; i < keys; i += 4 {
				if _, err := r.Get(fmt.Sprint(i)); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	require.Equal(t, 1000, r.Len())
	ext.check(t, r)
	require.Equal(t, keys, ext.extended)
	require.Equal(t, keys-1000, ext.dropped)
}

// panicky is an Extension whose parts' Made panics, or that returns a nil
// *part (typed nil) for the name "api/typed-nil".
type panicky struct{ tally }

type madePanics struct{ *part }

func (p madePanics) Made(*core.Breaker) { panic("Made panicked") }

func (e *panicky) Extend(name string, c *core.Config) (registry.Extended, error) {
	switch name {
	case "api/typed-nil":
		return (*part)(nil), nil
	case "api/extend-panics":
		panic("Extend panicked")
	}
	x, err := e.tally.Extend(name, c)
	if name == "api/made-panics" {
		return madePanics{x.(*part)}, err
	}
	return x, err
}

// An Extend that panics fails its Get with the panic, with no breaker
// made. A Made that panics fails its Get with the panic and keeps no breaker:
// the registry's mutex is not left held (the next Get and Len return) and
// the part is dropped, having never been kept. An Extend that returns a
// nil pointer as its Extended fails the Get with an error that names it,
// instead of calling Made on it.
func TestExtensionMisuse(t *testing.T) {
	ext := &panicky{}
	r := extended(t, ext, 2, time.Minute, core.NewManualClock(0))
	get(t, r, "a")
	require.PanicsWithValue(t, "Made panicked", func() { _, _ = r.Get("made-panics") })
	done := make(chan int)
	go func() {
		get(t, r, "b")
		done <- r.Len()
	}()
	select {
	case n := <-done:
		require.Equal(t, 2, n)
	case <-time.After(10 * time.Second):
		t.Fatal("Get after a panicking Made: the registry's mutex is still held")
	}
	require.Equal(t, 1, ext.dropped, "the part whose Made panicked")
	_, ok := r.Lookup("made-panics")
	require.False(t, ok)

	require.PanicsWithValue(t, "Extend panicked", func() { _, _ = r.Get("extend-panics") })
	_, ok = r.Lookup("extend-panics")
	require.False(t, ok)
	require.Equal(t, 2, r.Len())

	_, err := r.Get("typed-nil")
	require.ErrorContains(t, err, "typed-nil")
	require.ErrorContains(t, err, "nil *registry_test.part")
	_, ok = r.Lookup("typed-nil")
	require.False(t, ok)
	ext.check(t, r)
}

// Gets of 64 keys from 8 goroutines through a bound of 16 with idle
// eviction, one of them also running EvictIdle as the clock moves, with
// Dropped calling Len: every part is made at most once, before it is
// dropped, and dropped once, and the parts left are the breakers held.
func TestExtensionRacingEvictions(t *testing.T) {
	clock := core.NewManualClock(0)
	ext := &tally{}
	var r *registry.Registry[string]
	ext.onDrop = func() { r.Len() }
	r = extended(t, ext, 16, time.Second, clock)
	n := 2000
	if testing.Short() {
		n = 200
	}
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := range n {
				if w == 0 && i%16 == 0 {
					clock.Advance(300 * time.Millisecond)
					r.EvictIdle()
					continue
				}
				b, err := r.Get(fmt.Sprint((i*7 + w*13) % 64))
				if err != nil {
					t.Error(err)
					return
				}
				p, err := b.Allow()
				if err == nil {
					b.Done(p, nil)
				}
			}
		})
	}
	wg.Wait()
	ext.check(t, r)
	clock.Advance(time.Hour)
	r.EvictIdle() // stamps a key looked up since the hand last passed as used now
	clock.Advance(time.Hour)
	r.EvictIdle() // an hour later, every key is idle
	require.Zero(t, r.Len())
	ext.check(t, r)
	require.Equal(t, ext.extended, ext.dropped, "every part dropped, kept or not")
}

// Restore with an Extension: each restored breaker has its part made,
// with the config Extend changed; a key that already has a breaker keeps
// it and Extend is not asked for it.
func TestExtensionRestore(t *testing.T) {
	clock := core.NewManualClock(0)
	gate := new(halfGate)
	src := extended(t, &tally{}, 0, 0, clock)
	for _, k := range []string{"a", "b", "c"} {
		get(t, src, k)
	}
	b := get(t, src, "b")
	p, err := b.Allow()
	require.NoError(t, err)
	b.Done(p, errors.New("down")) // open
	snaps, err := src.Snapshot(time.Unix(1000, 0), true)
	require.NoError(t, err)

	ext := &tally{config: func(c *core.Config) { c.ProbeGate = gate }}
	dst := extended(t, ext, 0, 0, clock)
	get(t, dst, "a")
	require.NoError(t, dst.Restore(snaps, time.Unix(1000, 0)))
	require.Equal(t, 3, dst.Len())
	require.Equal(t, 3, ext.extended, "a, then b and c restored")
	require.Equal(t, core.Open, get(t, dst, "b").State())
	for _, k := range []string{"a", "b", "c"} {
		require.Equal(t, core.ProbeGate(gate), get(t, dst, k).Settings().ProbeGate)
	}
	ext.check(t, dst)
}

// An Extension that is a nil pointer is refused by New, naming it, rather
// than called on each new key.
func TestExtensionNilPointer(t *testing.T) {
	_, err := registry.New(registry.Options[string]{Config: core.Config{Name: "api", ConsecutiveFailures: 1}, Extension: (*tally)(nil)})
	require.ErrorIs(t, err, registry.ErrInvalidOptions)
	require.ErrorContains(t, err, "Extension is a nil *registry_test.tally")
}

// A burst of 100,000 keys with an Extension, then every breaker dropped
// for idleness: the registry gives back the memory of its parts' map, as
// it gives back its ring's (before: the map kept its 100,000 entries'
// buckets, 3.5 MB, for good).
func TestExtensionMemoryGivenBack(t *testing.T) {
	n := 100_000
	if testing.Short() {
		n = 20_000
	}
	heap := func() int64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return int64(m.HeapAlloc)
	}
	clock := core.NewManualClock(0)
	before := heap()
	r := extended(t, nopExtension{}, 0, time.Minute, clock)
	for i := range n {
		get(t, r, fmt.Sprint(i))
	}
	clock.Advance(time.Hour)
	require.Equal(t, n, r.EvictIdle())
	held := heap() - before
	runtime.KeepAlive(r)
	require.Less(t, held, int64(64<<10), "bytes an empty registry holds after %d keys came and went", n)
}

// nopExtension makes a part that keeps nothing for each breaker.
type nopExtension struct{}

type nopPart struct{ _ byte }

func (nopExtension) Extend(string, *core.Config) (registry.Extended, error) { return new(nopPart), nil }
func (*nopPart) Made(*core.Breaker)                                         {}
func (*nopPart) Dropped()                                                   {}
