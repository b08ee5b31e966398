package core_test

// Misuse: every exported type's zero value either works as documented or
// fails with a panic that names New, never with a nil dereference deep
// inside, and the clocks agree on what their zero value is; an Outcome
// outside the enum and a second Done for one permit.

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/casbreaker/casbreaker/core"
	"github.com/casbreaker/casbreaker/internal/breakers"
)

// misusePanic runs fn and returns what it panicked with, as text, and
// whether that was a runtime error (a nil dereference, a division by zero).
func misusePanic(fn func()) (msg string, panicked, runtimeErr bool) {
	defer func() {
		if v := recover(); v != nil {
			panicked = true
			_, runtimeErr = v.(runtime.Error)
			msg = fmt.Sprint(v)
		}
	}()
	fn()
	return "", false, false
}

// A zero Breaker of either implementation (var b core.Breaker, var b
// baseline.Breaker) has no configuration: every method panics with a
// message that starts with its package and names New. Without that check
// a zero lock-free breaker would half work: Allow would return a permit,
// Done with an error would panic with a nil dereference (the nil
// classifier), ForceOpen(d) with another (the nil clock), and Reset,
// Disable and ForceOpen(0) would commit transitions.
func TestZeroBreakerPanicsNamingNew(t *testing.T) {
	calls := []struct {
		name string
		fn   func(b breakers.Breaker)
	}{
		{"Allow", func(b breakers.Breaker) { _, _ = b.Allow() }},
		{"Done(nil)", func(b breakers.Breaker) { b.Done(core.Permit{}, nil) }},
		{"Done(err)", func(b breakers.Breaker) { b.Done(core.Permit{}, errFail) }},
		{"Record(Success)", func(b breakers.Breaker) { b.Record(core.Permit{}, core.Success) }},
		{"Record(Failure)", func(b breakers.Breaker) { b.Record(core.Permit{}, core.Failure) }},
		{"Record(Ignored)", func(b breakers.Breaker) { b.Record(core.Permit{}, core.Ignored) }},
		{"Record(probe)", func(b breakers.Breaker) { b.Record(core.Permit{Probe: true}, core.Success) }},
		{"RecordHint", func(b breakers.Breaker) { b.RecordHint(core.Permit{}, time.Second) }},
		{"State", func(b breakers.Breaker) { _ = b.State() }},
		{"Counts", func(b breakers.Breaker) { _ = b.Counts() }},
		{"Metrics", func(b breakers.Breaker) { _ = b.Metrics() }},
		{"ForceOpen(0)", func(b breakers.Breaker) { _ = b.ForceOpen(0) }},
		{"ForceOpen(1s)", func(b breakers.Breaker) { _ = b.ForceOpen(time.Second) }},
		{"ForceOpen(-1)", func(b breakers.Breaker) { _ = b.ForceOpen(-1) }},
		{"Disable", func(b breakers.Breaker) { b.Disable() }},
		{"MetricsOnly", func(b breakers.Breaker) { b.MetricsOnly() }},
		{"Reset", func(b breakers.Breaker) { b.Reset() }},
		{"HalfOpen", func(b breakers.Breaker) { b.HalfOpen() }},
		{"RetryAfter", func(b breakers.Breaker) { _ = b.RetryAfter() }},
		{"Snapshot", func(b breakers.Breaker) { _, _ = b.Snapshot(time.Now(), true) }},
		{"Do", func(b breakers.Breaker) {
			_, _ = core.Do(context.Background(), b, func(context.Context) (int, error) { return 1, nil })
		}},
		{"Reconfigure", func(b breakers.Breaker) {
			if r, ok := b.(reconfigurer); ok {
				_ = r.Reconfigure(core.Config{ConsecutiveFailures: 1})
			} else {
				panic("baseline: Breaker used without New") // not there yet
			}
		}},
		{"Settings", func(b breakers.Breaker) {
			if s, ok := b.(interface{ Settings() core.Settings }); ok {
				_ = s.Settings()
			} else {
				panic("baseline: Breaker used without New") // the baseline has no Settings method
			}
		}},
	}
	forEachImpl(t, func(t *testing.T, mk maker) {
		pkg := map[bool]string{true: "core: ", false: "baseline: "}[strings.HasSuffix(t.Name(), "impl=lockfree")]
		for _, c := range calls {
			msg, panicked, rt := misusePanic(func() { c.fn(mk.zero()) })
			switch {
			case !panicked:
				t.Errorf("%s on a zero Breaker did not panic", c.name)
			case rt:
				t.Errorf("%s on a zero Breaker panicked with a runtime error: %s", c.name, msg)
			case !strings.HasPrefix(msg, pkg) || !strings.Contains(msg, "Breaker used without New"):
				t.Errorf("%s on a zero Breaker: panic %q does not start with %q and name New", c.name, msg, pkg)
			}
		}
	})
}

// Do with a nil argument panics with a message that names it, before any
// permit is taken (a nil function's panic would otherwise be recorded as
// the dependency's failure, and trip this breaker), never with a nil
// dereference: a nil breaker (a nil Guard, or a nil *Breaker from a
// core.New whose error went unchecked), a nil function or a nil context.
func TestDoMisusePanicsNamingIt(t *testing.T) {
	var nilCtx context.Context
	ctx, fn := context.Background(), func(context.Context) (int, error) { return 1, nil }
	var nilBreaker *core.Breaker
	forEachImpl(t, func(t *testing.T, mk maker) {
		b, err := mk.new(core.Config{ConsecutiveFailures: 1, CollectMetrics: true})
		require.NoError(t, err)
		for _, c := range []struct {
			name, want string
			do         func()
		}{
			{"nil Guard", "nil Guard", func() { _, _ = core.Do(ctx, nil, fn) }},
			{"nil *Breaker", "nil *Breaker", func() { _, _ = core.Do(ctx, nilBreaker, fn) }},
			{"nil function", "nil function", func() { _, _ = core.Do[int](ctx, b, nil) }},
			{"nil context", "nil context", func() { _, _ = core.Do(nilCtx, b, fn) }},
		} {
			msg, panicked, rt := misusePanic(c.do)
			require.True(t, panicked, c.name)
			require.False(t, rt, "%s: a runtime error: %s", c.name, msg)
			require.True(t, strings.HasPrefix(msg, "core: Do with a "+c.want), "%s: %q", c.name, msg)
		}
		require.Equal(t, core.Closed, b.State())
		require.Equal(t, core.Metrics{}, b.Metrics(), "no permit taken, nothing recorded")
	})
}

// SystemClock{} and ManualClock{} are both usable. A zero SystemClock that
// measured from the zero time.Time would have no monotonic reading: its Now
// would saturate at the largest Duration, frozen. It reads the monotonic
// time since a process-wide base instead, taken when the package was
// initialized: never negative, never frozen, never ahead of real time since
// that base.
func TestZeroClocksWork(t *testing.T) {
	var zero core.SystemClock
	later := core.NewSystemClock() // a base after the process-wide one
	sinceLater := later.Now()      // read first: then the check holds under any preemption
	first := zero.Now()
	require.GreaterOrEqual(t, first, sinceLater, "the zero clock's base comes first")
	time.Sleep(2 * time.Millisecond)
	second := zero.Now()
	require.GreaterOrEqual(t, second-first, 2*time.Millisecond, "the zero SystemClock is frozen at %v", second)
	require.Less(t, second, 24*time.Hour, "the zero SystemClock does not measure from the process start")

	var manual core.ManualClock
	require.Zero(t, manual.Now())
	require.Equal(t, time.Second, manual.Advance(time.Second))
	manual.Set(-time.Second)
	require.Equal(t, -time.Second, manual.Now())

	// Both implementations accept the zero SystemClock and keep time with it.
	forEachImpl(t, func(t *testing.T, mk maker) {
		b, err := mk.new(core.Config{ConsecutiveFailures: 1, OpenDuration: time.Minute, Clock: core.SystemClock{}})
		require.NoError(t, err)
		p, err := b.Allow()
		require.NoError(t, err)
		b.Done(p, errFail)
		p, err = b.Allow()
		require.ErrorIs(t, err, core.ErrOpen, "right after a trip with a 1 min open duration")
		require.Greater(t, p.RetryAfter, 50*time.Second)
		require.LessOrEqual(t, p.RetryAfter, time.Minute+time.Millisecond) // whole milliseconds, rounded up
	})
}

// An Outcome value outside Success/Failure/Ignored (for example from a user
// classifier that returns core.Outcome(3)) can be read three ways: as a
// failure (a lock-free probe path whose default branch re-opens), as
// ignored (a baseline switch with no case for it), or as a success (the
// closed state). The two implementations must agree on State, Counts and
// the notifications after such a probe, as on every observable.
func TestUnknownOutcomeAgrees(t *testing.T) {
	cfg := core.Config{ConsecutiveFailures: 1, OpenDuration: time.Second,
		Classifier: func(error) core.Outcome { return core.Outcome(3) }}
	lf, mu := rigPair(t, cfg, 0)
	for _, r := range []*rig{lf, mu} {
		r.X(core.Failure)
		r.Is(core.Open)
		r.At(1)
		p := r.A()
		r.B.Done(p, errFail) // the classifier says Outcome(3)
	}
	require.Equal(t, mu.B.Counts(), lf.B.Counts())
	require.Equal(t, mu.CBs(), lf.CBs())
}

// A second Done for the same half-open probe, or a hand-built probe permit,
// when no probe is in flight: the lock-free breaker drops it (no probe in
// flight). A baseline that decremented its probes in flight to -1 would
// count a success, closing the breaker, and with the count negative would
// admit more than PermittedCallsInHalfOpen probes (R6). Both must agree.
func TestDoubleDoneOfProbeAgrees(t *testing.T) {
	cfg := core.Config{ConsecutiveFailures: 1, OpenDuration: time.Second,
		PermittedCallsInHalfOpen: 1, SuccessesToClose: 2}
	lf, mu := rigPair(t, cfg, 0)
	for _, r := range []*rig{lf, mu} {
		r.X(core.Failure)
		r.At(1)
		p := r.A()
		r.D(p, core.Success) // 1 of 2 successes, no probe in flight
		r.D(p, core.Success) // the same permit again
	}
	require.Equal(t, mu.B.Counts(), lf.B.Counts())
	require.Equal(t, mu.CBs(), lf.CBs())
}

// R6 after a double Done of a probe, in each implementation: the duplicate
// release frees no extra slot, so no more than PermittedCallsInHalfOpen
// probes are in flight.
func TestDoubleDoneAdmitsNoExtraProbe(t *testing.T) {
	forEachImpl(t, func(t *testing.T, mk maker) {
		r := mk.build(t, core.Config{ConsecutiveFailures: 1, OpenDuration: time.Second,
			PermittedCallsInHalfOpen: 1, SuccessesToClose: 5})
		r.X(core.Failure)
		r.At(1)
		p := r.A()
		r.D(p, core.Ignored)
		r.D(p, core.Ignored) // duplicate release
		inFlight := 0
		for {
			if _, err := r.B.Allow(); err != nil {
				break
			}
			inFlight++
		}
		require.LessOrEqual(t, inFlight, 1, "probes admitted at once")
	})
}
