package core_test

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/casbreaker/casbreaker/core"
	"github.com/casbreaker/casbreaker/internal/breakers"
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

// A listener that panics while other goroutines' transitions wait behind
// its own does not strand them: they are delivered, once and in order,
// before the panicking call returns, not with some later transition (which
// may never come). The panic still reaches the caller whose call ran the
// listener. The waiting transitions are ForceOpen/Reset pairs committed by
// this goroutine while the first goroutine's listener is blocked. The
// listener panics on generation 1, and in some cases again while the first
// panic unwinds: on the next generation, or on one far enough behind that
// the lock-free dispatcher keeps the events after it off its ring (its
// overflow), which must not strand them either.
func TestListenerPanicDeliversTransitionsQueuedBehindIt(t *testing.T) {
	for _, tc := range []struct {
		queued   int
		panicsOn []uint64
	}{
		{2, []uint64{1}},
		{2, []uint64{1, 2}},
		{300, []uint64{1, 290}},
	} {
		t.Run(fmt.Sprintf("queued=%d/panics=%v", tc.queued, tc.panicsOn), func(t *testing.T) {
			forEachImpl(t, func(t *testing.T, mk maker) {
				inside, release := make(chan struct{}), make(chan struct{})
				r := mk.build(t, core.Config{ConsecutiveFailures: 1, OpenDuration: time.Second}, func(tr core.Transition) {
					if tr.Generation == 1 {
						close(inside)
						<-release
					}
					if slices.Contains(tc.panicsOn, tr.Generation) {
						panic("listener")
					}
				})
				recovered := make(chan any)
				go func() {
					defer func() { recovered <- recover() }()
					_ = r.B.ForceOpen(0) // generation 1; this goroutine delivers it
				}()
				<-inside
				want := []string{"C>F@0"}
				for i := range tc.queued { // queued behind the blocked listener
					if i%2 == 0 {
						r.B.Reset()
						want = append(want, "F>C@0")
					} else {
						require.NoError(t, r.B.ForceOpen(0))
						want = append(want, "C>F@0")
					}
				}
				close(release)
				require.Equal(t, "listener", <-recovered)
				got := r.CBs()
				require.Len(t, got, len(want), "a queued transition was stranded")
				require.Equal(t, want, got)
			})
		})
	}
}

// A listener that panics on every notification, with 2^16 of them queued
// behind the first: each is still delivered once, in order, on the
// panicking goroutine, which the first panic then leaves with the first
// panic's value. The later panics are recovered where they happen (one
// nested panic per queued event would grow that goroutine's stack without
// bound: a backlog of millions would overflow it and kill the process).
func TestListenerPanickingOnEveryNotificationDeliversAllOfThem(t *testing.T) {
	const queued = 1 << 16
	forEachImpl(t, func(t *testing.T, mk maker) {
		inside, release := make(chan struct{}), make(chan struct{})
		var got atomic.Uint64
		b, err := mk.new(core.Config{ConsecutiveFailures: 1, OnStateChange: func(tr core.Transition) {
			if got.Add(1) != tr.Generation {
				panic(fmt.Sprintf("generation %d delivered as number %d", tr.Generation, got.Load()))
			}
			if tr.Generation == 1 {
				close(inside)
				<-release
			}
			panic(tr.Generation)
		}})
		require.NoError(t, err)
		recovered := make(chan any)
		go func() {
			defer func() { recovered <- recover() }()
			b.Reset() // generation 1; this goroutine delivers it
		}()
		<-inside
		for range queued {
			b.Reset()
		}
		close(release)
		require.Equal(t, uint64(1), <-recovered, "the first panic reaches the caller")
		require.Equal(t, uint64(queued+1), got.Load())
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
// known limit, TestNotificationStormKeepsGenerations.) The first
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

// A panic in OnStateChange during the open -> half-open Allow propagates
// out of Allow after the transition has committed and given this caller the
// probe slot. The caller never gets the Permit, so it cannot release it: if
// the breaker kept the slot, with PermittedCallsInHalfOpen = 1 it would
// reject every call forever (ErrHalfOpenFull). R10: "No path leaks a probe
// slot"; R6: elapsed time never creates permits. Both implementations
// release the slot. The default half-open max wait would recover a leaked
// slot and hide the leak, so the test waits forever explicitly: only the
// released slot can admit the call.
func TestListenerPanicOnHalfOpenReleasesProbe(t *testing.T) {
	forEachImpl(t, func(t *testing.T, mk maker) {
		var panicOnce atomic.Bool
		panicOnce.Store(true)
		r := mk.build(t, core.Config{ConsecutiveFailures: 1, OpenDuration: time.Second, MaxWaitInHalfOpen: core.WaitForever},
			func(tr core.Transition) {
				if tr.To == core.HalfOpen && panicOnce.CompareAndSwap(true, false) {
					panic("listener bug")
				}
			})
		r.X(core.Failure)
		r.At(1)
		require.Panics(t, func() { _, _ = r.B.Allow() })
		// Days later the breaker must admit a probe again.
		r.At(86400)
		_, err := r.B.Allow()
		require.NoError(t, err, "state %v counts %+v", r.B.State(), r.B.Counts())
	})
}

// A listener that is the dispatcher's deliverer and commits a transition
// itself (here: its Allow flips open -> half-open) while 256 later events
// are already published, more than the lock-free dispatcher's ring holds: a
// dispatcher with a bounded queue whose
// publisher waited for the deliverer to advance would spin forever, since
// the deliverer is itself. One such transition is enough when the others
// came from other goroutines while the listener ran (a slow listener during
// a flapping storm, 256 transitions = 128 open durations). R12: a listener
// may call Allow without deadlocking; sony/gobreaker's listener under the
// mutex deadlocked on any call (docs/regressions.md, B13). The baseline's
// queue is unbounded.
func TestSlowListenerMayCallAllow(t *testing.T) {
	forEachImpl(t, func(t *testing.T, mk maker) {
		clock := core.NewManualClock(0)
		var (
			b        breakers.Breaker
			first    atomic.Bool
			inside   = make(chan struct{})
			proceed  = make(chan struct{})
			returned = make(chan error, 1)
		)
		first.Store(true)
		var err error
		b, err = mk.new(core.Config{ConsecutiveFailures: 1, OpenDuration: time.Millisecond, Clock: clock,
			OnStateChange: func(tr core.Transition) {
				if !first.CompareAndSwap(true, false) {
					return
				}
				close(inside)
				<-proceed // a slow listener: a log shipper, an HTTP hook
				_, err := b.Allow()
				returned <- err
			}})
		require.NoError(t, err)
		go func() { // commits C->O (generation 1) and becomes the deliverer
			p, _ := b.Allow()
			b.Record(p, core.Failure)
		}()
		<-inside
		// Other callers flap the breaker 256 more times meanwhile: 2..257.
		for b.Counts().Generation < 257 {
			clock.Advance(time.Millisecond)
			p, err := b.Allow()
			require.NoError(t, err)
			b.Record(p, core.Failure)
		}
		clock.Advance(time.Millisecond) // open past its deadline at generation 257
		close(proceed)
		select {
		case err := <-returned:
			t.Logf("listener's Allow returned %v", err)
		case <-time.After(3 * time.Second):
			t.Fatal("listener's Allow did not return within 3 s: deadlock")
		}
	})
}

// A listener that itself drives transitions (Allow + Done(failure)) while 4
// goroutines flap the breaker on a shared manual clock. Notifications must
// chain (from == previous to), generations must run 1, 2, 3, ... with none
// lost or duplicated, and with none left behind once the callers return:
// no later transition comes to flush one. With panics, the listener also
// panics on every fifth notification, after its own calls (so the
// transition it committed waits behind its panic), and the callers recover.
func TestReentrantListenerChains(t *testing.T) {
	for _, panics := range []bool{false, true} {
		t.Run(fmt.Sprintf("panics=%v", panics), func(t *testing.T) {
			forEachImpl(t, func(t *testing.T, mk maker) {
				for round := range rounds(200, 20) {
					reentrantChainRound(t, mk, panics, round)
				}
			})
		})
	}
}

// errListener is what a test's listener panics with.
var errListener = errors.New("listener panics")

func reentrantChainRound(t *testing.T, mk maker, panics bool, round int) {
	clock := core.NewManualClock(0)
	var (
		mu  sync.Mutex
		got []core.Transition
		b   breakers.Breaker
	)
	var err error
	b, err = mk.new(core.Config{WindowSize: 4, MinimumNumberOfCalls: 1, FailureRateThreshold: 50,
		OpenDuration: time.Millisecond, PermittedCallsInHalfOpen: 2, Clock: clock,
		OnStateChange: func(tr core.Transition) {
			mu.Lock()
			got = append(got, tr)
			mu.Unlock()
			if tr.Generation%3 == 0 {
				if p, err := b.Allow(); err == nil {
					b.Done(p, errFail)
				}
			}
			_, _ = b.State(), b.Counts()
			if panics && tr.Generation%5 == 0 {
				panic(errListener)
			}
		}})
	require.NoError(t, err)
	// survive runs fn and recovers the listener's panic, and only that.
	survive := func(fn func()) {
		defer func() {
			if v := recover(); v != nil && v != errListener {
				panic(v)
			}
		}()
		fn()
	}
	parallel(4, func(i int) {
		for k := range 300 {
			if i == 0 && k%3 == 0 {
				clock.Advance(time.Millisecond)
			}
			survive(func() {
				if p, err := b.Allow(); err == nil {
					if (k+i)%4 == 0 {
						b.Done(p, nil)
					} else {
						b.Done(p, errFail)
					}
				}
			})
		}
	})
	mu.Lock()
	defer mu.Unlock()
	final := b.Counts().Generation
	require.Len(t, got, int(final), "round %d", round)
	prev := core.Closed
	for i, tr := range got {
		require.Equal(t, uint64(i+1), tr.Generation, "round %d", round)
		require.Equal(t, prev, tr.From, "round %d #%d", round, i)
		prev = tr.To
	}
}

// R10 for the max-wait restart: a listener that panics on the half-open ->
// half-open restart must not strand the new generation's first probe, which
// the caller never received.
func TestMaxWaitRestartListenerPanicReleasesProbe(t *testing.T) {
	forEachImpl(t, func(t *testing.T, mk maker) {
		var armed atomic.Bool
		r := mk.build(t, core.Config{ConsecutiveFailures: 1, OpenDuration: time.Second, MaxWaitInHalfOpen: time.Second,
			CollectMetrics: true},
			func(tr core.Transition) {
				if tr.From == core.HalfOpen && tr.To == core.HalfOpen && armed.Load() {
					panic("listener")
				}
			})
		r.X(core.Failure)
		r.At(1)
		lost := r.A()
		r.At(2)
		armed.Store(true)
		require.PanicsWithValue(t, "listener", func() { _, _ = r.B.Allow() })
		armed.Store(false)
		c := r.B.Counts()
		require.Equal(t, core.HalfOpen, c.State)
		require.Equal(t, 0, c.ProbesInFlight, "restart probe leaked: %+v", c)
		p := r.A() // the slot is free in the new generation
		require.Equal(t, c.Generation, p.Generation)
		r.D(lost, core.Failure) // stale: no re-open
		r.Is(core.HalfOpen)
		r.D(p, core.Success)
		r.Is(core.Closed)
		m := r.B.Metrics()
		require.Equal(t, m.Admitted, m.Successes+m.Failures+m.Ignored+m.Dropped, "%+v", m)
	})
}

// R10, R12: a listener that panics on a manual control's notification
// propagates, the control is committed, and the next transition is still
// delivered, in order, by both implementations.
func TestControlListenerPanicKeepsOrder(t *testing.T) {
	forEachImpl(t, func(t *testing.T, mk maker) {
		var armed atomic.Bool
		r := mk.build(t, core.Config{ConsecutiveFailures: 1, OpenDuration: time.Second},
			func(tr core.Transition) {
				if armed.CompareAndSwap(true, false) {
					panic("listener")
				}
			})
		armed.Store(true)
		require.Panics(t, func() { _ = r.B.ForceOpen(0) })
		r.Reject(core.ErrForcedOpen)
		r.B.Disable()
		r.X(core.Failure)
		r.Is(core.Disabled)
		armed.Store(true)
		require.Panics(t, func() { r.B.MetricsOnly() })
		r.B.Reset()
		require.Equal(t, []string{"C>F@0", "F>D@0", "D>M@0", "M>C@0"}, r.CBs())
	})
}
