package resilience_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/casbreaker/casbreaker/core"
	"github.com/casbreaker/casbreaker/internal/breakers"
	"github.com/casbreaker/casbreaker/resilience"
)

// retrying is a Retry on a stepping timer, and a stack of it alone.
func retrying(t *testing.T, c resilience.RetryConfig) (*resilience.ManualTimer, *resilience.Stack) {
	t.Helper()
	tm := resilience.NewSteppingTimer(core.NewManualClock(0))
	if c.Timer == nil {
		c.Timer = tm
	}
	return tm, mustStack(t, resilience.WithRetry(must(resilience.NewRetry(c))(t)))
}

func TestRetryStopsAfterMaxAttempts(t *testing.T) {
	_, s := retrying(t, resilience.RetryConfig{MaxAttempts: 4})
	d := &dep{fail: always(errDown)}
	_, err := resilience.Do(context.Background(), s, d.call)
	require.ErrorIs(t, err, errDown)
	require.Equal(t, 4, d.calls)
}

func TestRetryReturnsFirstSuccess(t *testing.T) {
	tm, s := retrying(t, resilience.RetryConfig{MaxAttempts: 5})
	d := &dep{fail: failFirst(2)}
	v, err := resilience.Do(context.Background(), s, d.call)
	require.NoError(t, err)
	require.Equal(t, 3, v)
	require.Equal(t, 3, d.calls)
	require.Len(t, tm.Slept(), 2)
}

func TestRetryOneAttemptNeverRetries(t *testing.T) {
	tm, s := retrying(t, resilience.RetryConfig{MaxAttempts: 1})
	d := &dep{fail: always(errDown)}
	_, err := resilience.Do(context.Background(), s, d.call)
	require.ErrorIs(t, err, errDown)
	require.Equal(t, 1, d.calls)
	require.Empty(t, tm.Slept())
}

func TestRetryBackoffDoublesUpToMaxDelay(t *testing.T) {
	ms := time.Millisecond
	for _, tc := range []struct {
		base, ceiling time.Duration
		attempts      int
		want          []time.Duration
	}{
		{100 * ms, time.Second, 8, []time.Duration{100 * ms, 200 * ms, 400 * ms, 800 * ms, time.Second, time.Second, time.Second}},
		{100, 201, 4, []time.Duration{100, 200, 201}},                            // the doubling that reaches the cap exactly is not cut
		{100, 199, 3, []time.Duration{100, 199}},                                 // the one past it is
		{time.Second, time.Second, 3, []time.Duration{time.Second, time.Second}}, // base at the cap
	} {
		tm, s := retrying(t, resilience.RetryConfig{MaxAttempts: tc.attempts, BaseDelay: tc.base, MaxDelay: tc.ceiling, Jitter: resilience.NoJitter})
		_, err := resilience.Do(context.Background(), s, (&dep{fail: always(errDown)}).call)
		require.ErrorIs(t, err, errDown)
		require.Equal(t, tc.want, tm.Slept(), "base %v, max %v", tc.base, tc.ceiling)
	}
}

// The two jitters stay inside their ranges, and one seed gives one sequence.
func TestRetryJitterRangesAndSeed(t *testing.T) {
	ms := time.Millisecond
	backoff := []time.Duration{100 * ms, 200 * ms, 400 * ms, 800 * ms, 1000 * ms}
	for _, j := range []resilience.Jitter{resilience.FullJitter, resilience.EqualJitter} {
		t.Run(j.String(), func(t *testing.T) {
			run := func(seed uint64) []time.Duration {
				var slept []time.Duration
				for range 50 {
					tm, s := retrying(t, resilience.RetryConfig{
						MaxAttempts: 6, BaseDelay: 100 * ms, MaxDelay: time.Second, Jitter: j, Seed: seed,
					})
					_, _ = resilience.Do(context.Background(), s, (&dep{fail: always(errDown)}).call)
					got := tm.Slept()
					require.Len(t, got, len(backoff))
					for i, d := range got {
						lo := time.Duration(0)
						if j == resilience.EqualJitter {
							lo = backoff[i] - backoff[i]/2
						}
						require.GreaterOrEqual(t, d, lo, "retry %d", i+1)
						require.LessOrEqual(t, d, backoff[i], "retry %d", i+1)
					}
					slept = append(slept, got...)
					seed++
				}
				return slept
			}
			a, b := run(42), run(42)
			require.Equal(t, a, b, "the same seed must give the same waits")
			require.NotEqual(t, a, run(43))
		})
	}
}

func TestRetryDefaultDoesNotRetryRejection(t *testing.T) {
	forEachImpl(t, func(t *testing.T, newBreaker func(core.Config) breakers.Breaker) {
		clock := core.NewManualClock(0)
		tm := resilience.NewSteppingTimer(clock)
		b := newBreaker(tripConfig(clock))
		require.NoError(t, b.ForceOpen(time.Minute))
		s := mustStack(t, resilience.WithRetry(must(resilience.NewRetry(resilience.RetryConfig{MaxAttempts: 5, Timer: tm}))(t)), resilience.WithBreaker(b))
		d := &dep{}
		_, err := resilience.Do(context.Background(), s, d.call)
		require.ErrorIs(t, err, core.ErrOpen)
		require.Equal(t, 0, d.calls)
		require.Empty(t, tm.Slept(), "a rejection is not waited on by default")
	})
	require.False(t, resilience.DefaultRetryable(fmt.Errorf("wrapped: %w", core.ErrHalfOpenFull)))
	require.False(t, resilience.DefaultRetryable(context.Canceled))
	require.False(t, resilience.DefaultRetryable(nil))
	require.True(t, resilience.DefaultRetryable(errDown))
	require.True(t, resilience.DefaultRetryable(resilience.ErrBulkheadFull))
	require.True(t, resilience.DefaultRetryable(context.DeadlineExceeded))
}

// With WaitOnRejection, a call refused by an open breaker waits exactly the
// open duration's time left and then goes as the probe.
func TestRetryWaitOnRejectionHonoursRetryAfter(t *testing.T) {
	forEachImpl(t, func(t *testing.T, newBreaker func(core.Config) breakers.Breaker) {
		for _, maxDelay := range []time.Duration{5 * time.Second, 700 * time.Millisecond} { // a wait of MaxDelay is waited
			clock := core.NewManualClock(0)
			tm := resilience.NewSteppingTimer(clock)
			b := newBreaker(tripConfig(clock))
			b.Done(mustAllow(t, b), errDown)
			b.Done(mustAllow(t, b), errDown)
			clock.Advance(300 * time.Millisecond) // 700 ms of the open duration left
			r := must(resilience.NewRetry(resilience.RetryConfig{MaxAttempts: 3, BaseDelay: time.Millisecond, MaxDelay: maxDelay, WaitOnRejection: true, Timer: tm}))(t)
			d := &dep{}
			v, err := resilience.Do(context.Background(), mustStack(t, resilience.WithRetry(r), resilience.WithBreaker(b)), d.call)
			require.NoError(t, err, "MaxDelay %v", maxDelay)
			require.Equal(t, 1, v)
			require.Equal(t, []time.Duration{700 * time.Millisecond}, tm.Slept())
			require.Equal(t, core.Closed, b.State())
		}
	})
}

// allowCounter counts the Allow calls of the guard it wraps.
type allowCounter struct {
	core.Guard
	allows int
}

func (g *allowCounter) Allow() (core.Permit, error) {
	g.allows++
	return g.Guard.Allow()
}

func TestRetryWaitOnRejectionStopsOnLongOrNoWait(t *testing.T) {
	forEachImpl(t, func(t *testing.T, newBreaker func(core.Config) breakers.Breaker) {
		clock := core.NewManualClock(0)
		tm := resilience.NewSteppingTimer(clock)
		b := newBreaker(tripConfig(clock))
		r := must(resilience.NewRetry(resilience.RetryConfig{MaxAttempts: 3, MaxDelay: 5 * time.Second, WaitOnRejection: true, Timer: tm}))(t)
		g := &allowCounter{Guard: b}
		s := mustStack(t, resilience.WithRetry(r), resilience.WithBreaker(g))
		d := &dep{}

		require.NoError(t, b.ForceOpen(time.Minute)) // 60 s left: above MaxDelay
		_, err := resilience.Do(context.Background(), s, d.call)
		require.ErrorIs(t, err, core.ErrOpen)

		require.NoError(t, b.ForceOpen(0)) // forced open: no wait ends it
		_, err = resilience.Do(context.Background(), s, d.call)
		require.ErrorIs(t, err, core.ErrForcedOpen)

		require.Equal(t, 0, d.calls)
		require.Empty(t, tm.Slept())
		require.Equal(t, 2, g.allows, "one attempt each")
	})
}

func TestRetryCustomPredicate(t *testing.T) {
	errBad := errors.New("bad request")
	_, s := retrying(t, resilience.RetryConfig{MaxAttempts: 5, Retryable: func(err error) bool { return !errors.Is(err, errBad) }})
	d := &dep{fail: func(call int) error {
		if call == 2 {
			return errBad
		}
		return errDown
	}}
	_, err := resilience.Do(context.Background(), s, d.call)
	require.ErrorIs(t, err, errBad)
	require.Equal(t, 2, d.calls)
}

func TestRetryContextEndsWaitAtOnce(t *testing.T) {
	tm := resilience.NewManualTimer(core.NewManualClock(0))
	s := mustStack(t, resilience.WithRetry(must(resilience.NewRetry(resilience.RetryConfig{MaxAttempts: 3, BaseDelay: time.Hour, Jitter: resilience.NoJitter, Timer: tm}))(t)))
	ctx, cancel := context.WithCancel(context.Background())
	d := &dep{fail: always(errDown)}
	out := make(chan error, 1)
	go func() {
		_, err := resilience.Do(ctx, s, d.call)
		out <- err
	}()
	tm.AwaitSleepers(1)
	cancel()
	err := <-out
	require.ErrorIs(t, err, context.Canceled)
	require.ErrorIs(t, err, errDown, "the last attempt's error is kept")
	require.Equal(t, 1, d.calls)
	require.Equal(t, time.Duration(0), tm.Now(), "no time passed")
}

func TestRetryNoAttemptAfterContextDone(t *testing.T) {
	_, s := retrying(t, resilience.RetryConfig{MaxAttempts: 5})
	ctx, cancel := context.WithCancel(context.Background())
	d := &dep{fail: func(int) error {
		cancel()
		return errDown
	}}
	_, err := resilience.Do(ctx, s, d.call)
	require.ErrorIs(t, err, errDown)
	require.Equal(t, 1, d.calls)
}

func TestRetryDoneContextMakesNoAttempt(t *testing.T) {
	clock := core.NewManualClock(0)
	budget := must(resilience.NewBudget(resilience.BudgetConfig{Percent: 100, MinPerSecond: resilience.NoFloor, Clock: clock}))(t)
	r := must(resilience.NewRetry(resilience.RetryConfig{Budget: budget, Timer: resilience.NewSteppingTimer(clock)}))(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	d := &dep{}
	_, err := resilience.Do(ctx, mustStack(t, resilience.WithRetry(r)), d.call)
	require.ErrorIs(t, err, context.Canceled)
	require.Equal(t, 0, d.calls)
	require.Zero(t, budget.Saved(), "a call that made no attempt deposited")
}

func TestRetryBudgetCapsRetries(t *testing.T) {
	clock := core.NewManualClock(0)
	tm := resilience.NewSteppingTimer(clock)
	budget := must(resilience.NewBudget(resilience.BudgetConfig{Percent: 10, MinPerSecond: resilience.NoFloor, Clock: clock}))(t)
	r := must(resilience.NewRetry(resilience.RetryConfig{MaxAttempts: 3, Budget: budget, Timer: tm}))(t)
	s := mustStack(t, resilience.WithRetry(r))
	ok := &dep{}
	for range 20 {
		_, err := resilience.Do(context.Background(), s, ok.call) // 20 calls deposit 2 retries
		require.NoError(t, err)
	}
	d := &dep{fail: always(errDown)}
	_, err := resilience.Do(context.Background(), s, d.call) // deposits 0.1, retries twice
	require.ErrorIs(t, err, errDown)
	require.Equal(t, 3, d.calls)
	_, err = resilience.Do(context.Background(), s, d.call) // 0.2 saved: no retry
	require.ErrorIs(t, err, resilience.ErrRetryBudgetExhausted)
	require.ErrorIs(t, err, errDown)
	require.EqualError(t, err, "resilience: retry budget exhausted (last attempt: dependency down)")
	require.Equal(t, 4, d.calls)
	require.InDelta(t, 0.2, budget.Saved(), 1e-9)
}

func TestNewRetryErrors(t *testing.T) {
	_, err := resilience.NewRetry(resilience.RetryConfig{MaxAttempts: -1, BaseDelay: -1, MaxDelay: -1, Jitter: 9})
	require.ErrorIs(t, err, resilience.ErrInvalidConfig)
	for _, field := range []string{"MaxAttempts -1", "BaseDelay -1ns", "MaxDelay -1ns", "Jitter 9"} {
		require.ErrorContains(t, err, "RetryConfig."+field)
	}
	_, err = resilience.NewRetry(resilience.RetryConfig{BaseDelay: time.Second, MaxDelay: time.Millisecond})
	require.ErrorContains(t, err, "RetryConfig.MaxDelay 1ms is below BaseDelay 1s")
	_, err = resilience.NewRetry(resilience.RetryConfig{})
	require.NoError(t, err)
}

func TestZeroRetryPanics(t *testing.T) {
	s := mustStack(t, resilience.WithRetry(new(resilience.Retry)))
	require.PanicsWithValue(t, "resilience: Retry used without NewRetry", func() {
		_, _ = resilience.Do(context.Background(), s, (&dep{}).call)
	})
}

func mustAllow(t *testing.T, b core.Guard) core.Permit {
	t.Helper()
	p, err := b.Allow()
	require.NoError(t, err)
	return p
}

// A stepping timer moves the clock through the whole backoff, and a manual
// deadline that falls inside it ends the caller's context during the wait.
// The Retry says no attempt starts once ctx is done and that a wait ended
// by ctx returns ctx.Err() with the last error; the timer's Sleep returns
// nil although ctx ended during the wait (Timer.Sleep: "It returns
// ctx.Err() if ctx is done (before or during the wait ...)"), and the loop
// makes its next attempt on a done context without looking. (SystemTimer
// can do the same when the backoff's timer and the deadline are both ready
// as its select runs.)
func TestRetryNoAttemptOnAContextThatEndedDuringTheBackoff(t *testing.T) {
	timer := resilience.NewSteppingTimer(nil)
	r := must(resilience.NewRetry(resilience.RetryConfig{MaxAttempts: 3, BaseDelay: time.Second, Jitter: resilience.NoJitter, Timer: timer}))(t)
	ctx, cancel := timer.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	var doneAtStart []bool
	_, err := resilience.Do(ctx, mustStack(t, resilience.WithRetry(r)), func(ctx context.Context) (int, error) {
		doneAtStart = append(doneAtStart, ctx.Err() != nil)
		return 0, errDown
	})
	require.Equal(t, []bool{false}, doneAtStart, "an attempt started on a done context")
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.ErrorIs(t, err, errDown)
}

// cancellingTimer is a timer whose Sleep ends the caller's context and
// returns nil, as a wait and a deadline that are ready at once can.
type cancellingTimer struct {
	resilience.SystemTimer
	cancel context.CancelFunc
}

func (c cancellingTimer) Sleep(context.Context, time.Duration, <-chan struct{}) error {
	c.cancel()
	return nil
}

// A wait that returns nil on a context that ended meanwhile ends the loop
// with the context's error and the last attempt's: no attempt starts.
func TestRetryNoAttemptWhenTheWaitEndsWithTheContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	_, s := retrying(t, resilience.RetryConfig{MaxAttempts: 3, Timer: cancellingTimer{cancel: cancel}})
	d := &dep{fail: always(errDown)}
	_, err := resilience.Do(ctx, s, d.call)
	require.ErrorIs(t, err, context.Canceled)
	require.ErrorIs(t, err, errDown)
	require.Equal(t, 1, d.calls)
}
