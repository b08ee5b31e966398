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

// A listener that falls more than 2^20 events behind still gets every event
// once, in commit order, named by its generation: events are sequenced by
// the 64-bit generation, not by the lock-free word's 20 bits. (Before, the
// lock-free dispatcher named events mod 2^20 and, past a backlog of 2^20,
// delivered a later wrap's event in place of the one it waited for: a
// known limit, TestAdv5_NotificationStormAliasesGenerations.) The first
// event's listener blocks while another goroutine commits 2^20+300 Resets.
// Full runs only: the backlog is a million queued events.
func TestListenerFarBehindGetsEveryEventInOrder(t *testing.T) {
	if testing.Short() {
		t.Skip("a backlog of 2^20 events: full runs only")
	}
	const n = wordGens + 300
	forEachImpl(t, func(t *testing.T, mk maker) {
		release, first := make(chan struct{}), make(chan struct{})
		var got, bad atomic.Uint64 // written by the deliverer only
		b, err := mk.new(core.Config{ConsecutiveFailures: 1, OnStateChange: func(tr core.Transition) {
			g := got.Add(1)
			if tr.Generation != g && bad.Load() == 0 {
				bad.Store(g)
			}
			if g == 1 {
				close(first)
				<-release // fall behind
			}
		}})
		require.NoError(t, err)
		go b.Reset() // delivers generation 1, then blocks in the listener
		<-first
		for range n - 1 {
			b.Reset() // published; the blocked deliverer picks them up later
		}
		require.Equal(t, uint64(n), b.Counts().Generation)
		close(release)
		require.Eventually(t, func() bool { return got.Load() == n }, time.Minute, time.Millisecond,
			"delivered %d of %d", got.Load(), n)
		require.Zero(t, bad.Load(), "event out of sequence")
	})
}
