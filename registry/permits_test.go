package registry_test

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/casbreaker/casbreaker/core"
	"github.com/casbreaker/casbreaker/registry"
)

// A permit reported one time too many, in each of the ways a caller gets
// it wrong, leaves the count of the breaker it lands on at zero: the key's
// Get returns the breaker at once, and the breaker goes when idle. A
// permit that lands elsewhere keeps its own breaker only until its key has
// had no Get for PermitTimeout.
func TestReportTooManyLeavesCountAtZero(t *testing.T) {
	const idle, permitTimeout = time.Minute, time.Hour
	newRig := func(t *testing.T) (*core.ManualClock, *registry.Registry[string]) {
		clock := core.NewManualClock(0)
		r, err := registry.New(registry.Options[string]{
			Config:    core.Config{ConsecutiveFailures: 1, OpenDuration: time.Second, Clock: clock},
			IdleAfter: idle, PermitTimeout: permitTimeout,
		})
		require.NoError(t, err)
		return clock, r
	}
	for _, tc := range []struct {
		name string
		// misuse reports a permit too many; it returns the breaker the
		// extra report landed on, and the breaker whose permit went
		// elsewhere (nil if none).
		misuse func(t *testing.T, clock *core.ManualClock, r *registry.Registry[string]) (landed, leaked *registry.Breaker)
	}{
		{"done-twice", func(t *testing.T, _ *core.ManualClock, r *registry.Registry[string]) (_, _ *registry.Breaker) {
			b := get(t, r, "k")
			p, err := b.Allow()
			require.NoError(t, err)
			b.Done(p, nil)
			b.Done(p, nil)
			return b, nil
		}},
		{"record-hint-and-record", func(t *testing.T, clock *core.ManualClock, r *registry.Registry[string]) (_, _ *registry.Breaker) {
			b := get(t, r, "k")
			p, err := b.Allow()
			require.NoError(t, err)
			b.RecordHint(p, time.Second) // a failure: open
			b.Record(p, core.Ignored)
			b.Record(p, core.Success)
			clock.Advance(time.Second)
			return b, nil
		}},
		{"done-of-open-rejection", func(t *testing.T, clock *core.ManualClock, r *registry.Registry[string]) (_, _ *registry.Breaker) {
			b := get(t, r, "k")
			p, err := b.Allow()
			require.NoError(t, err)
			b.Done(p, errFail)
			p, err = b.Allow()
			require.ErrorIs(t, err, core.ErrOpen)
			b.Done(p, err) // the deferred Done of a rejected Allow
			clock.Advance(time.Second)
			return b, nil // half-open, no probe out
		}},
		{"done-of-forced-open-rejection", func(t *testing.T, _ *core.ManualClock, r *registry.Registry[string]) (_, _ *registry.Breaker) {
			b := get(t, r, "k")
			require.NoError(t, b.ForceOpen(0))
			p, err := b.Allow()
			require.ErrorIs(t, err, core.ErrForcedOpen)
			b.Done(p, err)
			b.Reset()
			return b, nil
		}},
		{"done-on-another-keys-breaker", func(t *testing.T, _ *core.ManualClock, r *registry.Registry[string]) (_, _ *registry.Breaker) {
			other, b := get(t, r, "other"), get(t, r, "k")
			p, err := other.Allow()
			require.NoError(t, err)
			b.Done(p, nil)
			return b, other
		}},
		{"done-on-the-keys-next-breaker", func(t *testing.T, clock *core.ManualClock, r *registry.Registry[string]) (_, _ *registry.Breaker) {
			// Middleware that looks the key up again at completion, after
			// an eviction raced its Allow.
			first := get(t, r, "k")
			clock.Advance(idle)
			require.Equal(t, 1, r.EvictIdle())
			p, err := first.Allow()
			require.NoError(t, err)
			next := get(t, r, "k")
			require.NotSame(t, first, next)
			next.Done(p, nil)
			return next, nil
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock, r := newRig(t)
			landed, leaked := tc.misuse(t, clock, r)
			require.Zero(t, registry.PermitsOut(landed), "a report too many took the count below zero")
			require.Same(t, landed, get(t, r, "k"), "Get of the key returns its breaker")
			p, err := landed.Allow()
			require.NoError(t, err)
			require.EqualValues(t, 1, registry.PermitsOut(landed))
			landed.Done(p, nil)
			require.Zero(t, registry.PermitsOut(landed))

			require.Zero(t, r.EvictIdle(), "the sweep sees the Gets: their idle time starts now")
			clock.Advance(idle)
			if leaked != nil {
				require.EqualValues(t, 1, registry.PermitsOut(leaked))
			}
			require.Equal(t, 1, r.EvictIdle(), "landed goes; a leaked permit keeps its breaker: it may be in flight")
			require.Equal(t, 0, countOf(r, landed))
			if leaked != nil {
				require.Equal(t, 1, countOf(r, leaked))
				clock.Advance(permitTimeout - idle)
				require.Equal(t, 1, r.EvictIdle(), "after PermitTimeout with no Get the permit is presumed lost")
				require.Equal(t, 0, countOf(r, leaked))
			}
			require.Zero(t, r.Len())
		})
	}
}

// countOf returns how many times r holds b (0 or 1).
func countOf(r *registry.Registry[string], b *registry.Breaker) int {
	n := 0
	for _, v := range r.All() {
		if v == b {
			n++
		}
	}
	return n
}

// A listener that panics inside Allow, Record, RecordHint or Done leaves
// no permit counted: the breaker can still be evicted.
func TestPanickingListenerReleasesThePermit(t *testing.T) {
	type rig struct {
		clock *core.ManualClock
		r     *registry.Registry[string]
		b     *registry.Breaker
		arm   func() // the listener panics at the next transition
	}
	newRig := func(t *testing.T) *rig {
		g := &rig{clock: core.NewManualClock(0)}
		armed := false
		var err error
		g.r, err = registry.New(registry.Options[string]{
			Config: core.Config{
				ConsecutiveFailures: 1, OpenDuration: time.Second, MaxRetryAfter: time.Minute, Clock: g.clock,
				OnStateChange: func(core.Transition) {
					if armed {
						armed = false
						panic("listener")
					}
				},
			},
			IdleAfter: time.Minute,
		})
		require.NoError(t, err)
		g.b = get(t, g.r, "k")
		g.arm = func() { armed = true }
		return g
	}
	allow := func(t *testing.T, g *rig) core.Permit {
		p, err := g.b.Allow()
		require.NoError(t, err)
		return p
	}
	for _, tc := range []struct {
		name string
		run  func(t *testing.T, g *rig)
	}{
		{"record", func(t *testing.T, g *rig) {
			p := allow(t, g)
			g.arm()
			g.b.Record(p, core.Failure)
		}},
		{"record-hint", func(t *testing.T, g *rig) {
			p := allow(t, g)
			g.arm()
			g.b.RecordHint(p, time.Second)
		}},
		{"done", func(t *testing.T, g *rig) {
			p := allow(t, g)
			g.arm()
			g.b.Done(p, errFail)
		}},
		{"allow", func(t *testing.T, g *rig) {
			g.b.Done(allow(t, g), errFail)
			g.clock.Advance(time.Second)
			g.arm()
			_, _ = g.b.Allow() // open -> half-open: the listener runs here
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := newRig(t)
			require.PanicsWithValue(t, "listener", func() { tc.run(t, g) })
			require.Zero(t, registry.PermitsOut(g.b), "the panic left a permit counted")
			g.b.Reset()
			g.clock.Advance(time.Minute)
			require.Equal(t, 1, g.r.EvictIdle())
		})
	}
}

func mustAllow(t *testing.T, b *registry.Breaker) core.Permit {
	t.Helper()
	p, err := b.Allow()
	require.NoError(t, err)
	return p
}

// Manual controls, HalfOpen among them, racing calls leave the permit
// count exact: once every call has reported, the breaker goes when idle,
// before PermitTimeout. Run it under -race.
func TestControlsRacingCallsKeepTheCount(t *testing.T) {
	clock := core.NewManualClock(0)
	r, err := registry.New(registry.Options[string]{
		Config: core.Config{ConsecutiveFailures: 2, OpenDuration: time.Millisecond, PermittedCallsInHalfOpen: 2,
			MaxWaitInHalfOpen: 2 * time.Millisecond, Clock: clock},
		IdleAfter: time.Minute, PermitTimeout: time.Hour,
	})
	require.NoError(t, err)
	b := get(t, r, "k")
	var stop atomic.Bool
	var callers sync.WaitGroup
	for w := range 4 {
		callers.Go(func() {
			for i := range 2000 {
				p, err := b.Allow()
				if err != nil {
					b.Done(p, nil) // a rejection's report: must change nothing
					continue
				}
				switch (i + w) % 3 {
				case 0:
					b.Done(p, errFail)
				case 1:
					b.Record(p, core.Success)
				default:
					b.RecordHint(p, time.Millisecond)
				}
			}
		})
	}
	var ctl sync.WaitGroup
	ctl.Go(func() {
		for i := 0; !stop.Load(); i++ {
			switch i % 5 {
			case 0:
				b.HalfOpen()
			case 1:
				if err := b.ForceOpen(time.Millisecond); err != nil {
					t.Error(err)
				}
			case 2:
				b.Reset()
			case 3:
				b.HalfOpen()
				clock.Advance(time.Millisecond)
			default:
				b.Disable()
			}
		}
	})
	callers.Wait()
	stop.Store(true)
	ctl.Wait()
	b.Reset()
	clock.Advance(2 * time.Minute)
	require.Equal(t, 1, r.EvictIdle(), "a permit count left above zero keeps the breaker")
}
