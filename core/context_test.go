package core_test

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/casbreaker/casbreaker/core"
)

var heldSink context.Context

// A held permit is found by its breaker only, through any context made
// from the marked one and past the marks of other breakers; the marked
// context is its parent in every other way.
func TestHeldPermitIsFoundByItsBreaker(t *testing.T) {
	newBreaker := func() *core.Breaker {
		b, err := core.New(core.Config{ConsecutiveFailures: 1})
		require.NoError(t, err)
		return b
	}
	a, b, c := newBreaker(), newBreaker(), newBreaker()
	type key struct{}
	parent, cancel := context.WithCancel(context.WithValue(context.Background(), key{}, "v"))
	require.Nil(t, core.HeldPermitOf(parent, a))

	ctxA, heldA := core.WithHeldPermit(parent, a)
	ctxB, heldB := core.WithHeldPermit(ctxA, b)
	inner, cancelInner := context.WithCancel(ctxB)
	defer cancelInner()
	require.Same(t, heldA, core.HeldPermitOf(inner, a), "past the mark of another breaker")
	require.Same(t, heldB, core.HeldPermitOf(inner, b))
	require.Nil(t, core.HeldPermitOf(inner, c))
	require.Nil(t, core.HeldPermitOf(ctxA, b), "a mark inside is not seen from outside")
	require.Equal(t, "v", inner.Value(key{}))
	require.Zero(t, testing.AllocsPerRun(100, func() { core.HeldPermitOf(inner, a) }))
	require.Equal(t, 1.0, testing.AllocsPerRun(100, func() { heldSink, _ = core.WithHeldPermit(parent, a) }), "the mark and its context are one allocation")

	cancel()
	require.ErrorIs(t, ctxB.Err(), context.Canceled)
	require.ErrorIs(t, inner.Err(), context.Canceled, "the end of the parent reaches a context made from the mark at once")
	require.PanicsWithValue(t, "core: WithHeldPermit of a nil Context", func() {
		//lint:ignore SA1012 the misuse under test
		core.WithHeldPermit(nil, a)
	})
	require.PanicsWithValue(t, "core: WithHeldPermit of a nil Guard", func() { core.WithHeldPermit(parent, nil) })
	require.PanicsWithValue(t, "core: WithHeldPermit of a nil Guard", func() { core.WithHeldPermit(parent, (*core.Breaker)(nil)) })
	require.PanicsWithValue(t, "core: WithHeldPermit of a core_test.sliceGuard, which == cannot compare: pass a pointer", func() {
		core.WithHeldPermit(parent, sliceGuard{a})
	})
	// A comparable type holding an uncomparable value: == panics on it
	// as on the slice itself, so the mark could never be looked up.
	require.PanicsWithValue(t, "core: WithHeldPermit of a core_test.wrappedGuard, which == cannot compare: pass a pointer", func() {
		core.WithHeldPermit(parent, wrappedGuard{sliceGuard{a}})
	})
}

// sliceGuard is a Guard that == cannot compare: a mark of it could never
// be found, so WithHeldPermit refuses it.
type sliceGuard []*core.Breaker

func (g sliceGuard) Allow() (core.Permit, error)          { return g[0].Allow() }
func (g sliceGuard) Done(p core.Permit, err error)        { g[0].Done(p, err) }
func (g sliceGuard) Record(p core.Permit, o core.Outcome) { g[0].Record(p, o) }

// wrappedGuard is a Guard of a comparable type that == cannot compare
// when it holds an uncomparable Guard.
type wrappedGuard struct{ core.Guard }

// The latest report is the verdict, with its hint kept within its range.
func TestHeldPermitReports(t *testing.T) {
	b, err := core.New(core.Config{ConsecutiveFailures: 1})
	require.NoError(t, err)
	_, held := core.WithHeldPermit(context.Background(), b)
	type verdict struct {
		o    core.Outcome
		hint time.Duration
		ok   bool
	}
	read := func() verdict {
		o, hint, ok := held.Reported()
		return verdict{o, hint, ok}
	}
	require.Equal(t, verdict{core.Success, 0, false}, read(), "nothing reported")
	for _, tc := range []struct {
		o    core.Outcome
		hint time.Duration
		want verdict
	}{
		{core.Failure, 3 * time.Second, verdict{core.Failure, 3 * time.Second, true}},
		{core.Success, 0, verdict{core.Success, 0, true}},
		{core.Ignored, 0, verdict{core.Ignored, 0, true}},
		{core.Failure, -time.Second, verdict{core.Failure, 0, true}},
		{core.Failure, math.MaxInt64, verdict{core.Failure, 1<<61 - 1, true}},
		{core.Failure, 1<<61 - 1, verdict{core.Failure, 1<<61 - 1, true}},
		{core.Outcome(3), time.Second, verdict{core.Failure, time.Second, true}},
		{core.Outcome(255), 0, verdict{core.Failure, 0, true}},
	} {
		held.Report(tc.o, tc.hint)
		require.Equal(t, tc.want, read(), "Report(%v, %v)", tc.o, tc.hint)
	}
}
