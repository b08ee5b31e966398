package core

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// hookGate is an OpenGate of cap slots that runs, once each, a hook after
// its next TryAcquire and after its next Release.
type hookGate struct {
	mu           sync.Mutex
	cap, held    int
	afterTry     func()
	afterRelease func()
}

func (g *hookGate) TryAcquire() bool {
	g.mu.Lock()
	ok := g.held < g.cap
	if ok {
		g.held++
	}
	f := g.afterTry
	g.afterTry = nil
	g.mu.Unlock()
	if f != nil {
		f()
	}
	return ok
}

func (g *hookGate) Acquire() { g.mu.Lock(); g.held++; g.mu.Unlock() }

func (g *hookGate) Release() {
	g.mu.Lock()
	g.held--
	f := g.afterRelease
	g.afterRelease = nil
	g.mu.Unlock()
	if f != nil {
		f()
	}
}

// panickyClock is a ManualClock whose next reading panics once armed.
type panickyClock struct {
	ManualClock
	armed bool
}

func (c *panickyClock) Now() time.Duration {
	if c.armed {
		c.armed = false
		panic("clock")
	}
	return c.ManualClock.Now()
}

// The count of a breaker's asks for an OpenGate slot (slotAsks) is back at
// zero after every way a trip's ask can end: granted and committed,
// refused, the gate panicking, the claim losing after the grant (its
// Release panicking), the clock panicking in the commit, and a Reconfigure
// between the grant and the claim. A count left above zero would make
// every later refused trip of the breaker wait out its bound before it is
// capped, which no outcome shows.
func TestOpenGateAsksCountBalanced(t *testing.T) {
	errX := errors.New("x")
	trip := func(b *Breaker) {
		if p, err := b.Allow(); err == nil {
			b.Done(p, errX)
		}
	}
	build := func(g *hookGate, c Clock) *Breaker {
		b, err := New(Config{ConsecutiveFailures: 1, OpenDuration: time.Second, OpenGate: g, Clock: c})
		require.NoError(t, err)
		return b
	}

	g := &hookGate{cap: 1}
	b := build(g, NewManualClock(0))
	trip(b)
	require.Equal(t, Open, b.State())
	require.Zero(t, b.asks.Load(), "granted")

	g = &hookGate{}
	b = build(g, NewManualClock(0))
	trip(b)
	require.Equal(t, Closed, b.State())
	require.Zero(t, b.asks.Load(), "refused")

	g = &hookGate{cap: 1}
	b = build(g, NewManualClock(0))
	g.afterTry = func() { panic("gate") }
	require.PanicsWithValue(t, "gate", func() { trip(b) })
	require.Zero(t, b.asks.Load(), "TryAcquire panicked")

	g = &hookGate{cap: 1}
	b = build(g, NewManualClock(0))
	g.afterTry = func() { // another transition wins: the claim loses
		b.state.Store(uint64(word{state: Closed, gen: b.peek().fields().gen + 1}.packed()))
	}
	g.afterRelease = func() { panic("release") }
	require.PanicsWithValue(t, "release", func() { trip(b) })
	require.Zero(t, b.asks.Load(), "lost claim, Release panicked")
	require.Zero(t, g.held)

	clk := &panickyClock{}
	g = &hookGate{cap: 1}
	b = build(g, clk)
	g.afterTry = func() { clk.armed = true }
	require.PanicsWithValue(t, "clock", func() { trip(b) })
	require.Zero(t, b.asks.Load(), "clock panicked")
	require.Equal(t, Open, b.State())

	g = &hookGate{cap: 2}
	b = build(g, NewManualClock(0))
	g.afterTry = func() {
		require.NoError(t, b.Reconfigure(Config{ConsecutiveFailures: 2, OpenDuration: time.Second, Clock: NewManualClock(0)}))
	}
	trip(b)
	require.Zero(t, b.asks.Load(), "reconfigured between the grant and the claim")
	require.Zero(t, g.held, "the trip the new rules do not carry holds no slot")
}
