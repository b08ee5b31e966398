package core_test

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/casbreaker/casbreaker/core"
)

// A listener that panics loses its own notification's delivery but never
// stops later ones (the busy flag is released).
func TestListenerPanicDoesNotStopLaterNotifications(t *testing.T) {
	forEachImpl(t, func(t *testing.T, mk maker) {
		first := true
		r := mk.build(t, core.Config{ConsecutiveFailures: 1, OpenDuration: time.Second}, func(core.Transition) {
			if first {
				first = false
				panic("listener")
			}
		})
		p := r.A()
		require.PanicsWithValue(t, "listener", func() { r.D(p, F) })
		r.Is(core.Open)
		r.At(1).X(S)
		r.Is(core.Closed)
		require.Equal(t, []string{"C>O@0", "O>H@1", "H>C@1"}, r.CBs())
	})
}

// Many goroutines drive trips, probes and closes while the clock moves; every
// notification chains to the previous one, generations are consecutive, none
// is lost or repeated, and the last one matches the final state (R12).
func TestNotificationsChainUnderContention(t *testing.T) {
	forEachImpl(t, func(t *testing.T, mk maker) {
		var (
			mu      sync.Mutex
			got     []core.Transition
			reenter atomic.Int64
		)
		var r *rig
		r = mk.build(t, core.Config{ConsecutiveFailures: 2, OpenDuration: time.Millisecond, PermittedCallsInHalfOpen: 3},
			func(tr core.Transition) {
				mu.Lock()
				got = append(got, tr)
				mu.Unlock()
				if p, err := r.B.Allow(); err == nil { // re-entrant listener
					reenter.Add(1)
					r.B.Record(p, core.Ignored)
				}
			})
		parallel(16, func(i int) {
			for j := range rounds(5000, 500) {
				p, err := r.B.Allow()
				if err != nil {
					r.Clock.Advance(time.Millisecond) // callers move time, so the test needs no sleeping ticker
					continue
				}
				r.B.Record(p, []core.Outcome{S, F, F, I}[(i+j)%4])
			}
		})
		mu.Lock()
		defer mu.Unlock()
		require.Greater(t, len(got), 10, "the hammer caused too few transitions to test ordering")
		for i := 1; i < len(got); i++ {
			require.Equal(t, got[i-1].To, got[i].From, "notification %d", i)
			require.Equal(t, got[i-1].Generation+1, got[i].Generation)
		}
		c := r.B.Counts()
		require.Equal(t, uint64(len(got)), c.Generation)
		last := got[len(got)-1].To
		if last == core.Open && c.State == core.HalfOpen {
			last = core.HalfOpen // time-aware reporting of an elapsed open period
		}
		require.Equal(t, last, c.State)
	})
}

// Counts shows the half-open probe accounting.
func TestCountsInHalfOpen(t *testing.T) {
	forEachImpl(t, func(t *testing.T, mk maker) {
		r := mk.build(t, core.Config{ConsecutiveFailures: 1, OpenDuration: time.Second, PermittedCallsInHalfOpen: 3})
		r.X(F)
		c := r.B.Counts()
		require.Equal(t, core.Open, c.State)
		require.Equal(t, uint64(1), c.Generation)
		p := r.At(1).A()
		r.A()
		r.D(p, S)
		c = r.B.Counts()
		require.Equal(t, core.Counts{State: core.HalfOpen, Generation: 2, ProbesInFlight: 1, ProbeSuccesses: 1}, c)
	})
}
