package resilience_test

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/casbreaker/casbreaker/core"
	"github.com/casbreaker/casbreaker/resilience"
)

func TestManualTimerSleepEndsOnAdvance(t *testing.T) {
	tm := resilience.NewManualTimer(core.NewManualClock(0))
	out := make(chan error, 1)
	go func() { out <- tm.Sleep(context.Background(), time.Second, nil) }()
	tm.AwaitSleepers(1)
	tm.Advance(999 * time.Millisecond)
	require.False(t, done(out), "the sleep ended before its time")
	tm.Advance(time.Millisecond)
	require.NoError(t, <-out)
	require.Equal(t, 0, tm.Sleepers())
	require.Equal(t, []time.Duration{time.Second}, tm.Slept())
}

func TestManualTimerContextEndsSleepAtOnce(t *testing.T) {
	tm := resilience.NewManualTimer(core.NewManualClock(0))
	ctx, cancel := context.WithCancel(context.Background())
	out := make(chan error, 1)
	go func() { out <- tm.Sleep(ctx, time.Hour, nil) }()
	tm.AwaitSleepers(1)
	cancel()
	require.ErrorIs(t, <-out, context.Canceled)
	require.Equal(t, 0, tm.Sleepers())
	require.ErrorIs(t, tm.Sleep(ctx, time.Hour, nil), context.Canceled, "a done context must not wait")
}

func TestManualTimerWakeEndsSleep(t *testing.T) {
	tm := resilience.NewManualTimer(core.NewManualClock(0))
	wake := make(chan struct{}, 1)
	out := make(chan error, 1)
	go func() { out <- tm.Sleep(context.Background(), time.Hour, wake) }()
	tm.AwaitSleepers(1)
	wake <- struct{}{}
	require.NoError(t, <-out)
	require.Equal(t, 0, tm.Sleepers())
}

func TestSteppingTimerMovesTheClock(t *testing.T) {
	clock := core.NewManualClock(0)
	tm := resilience.NewSteppingTimer(clock)
	require.NoError(t, tm.Sleep(context.Background(), 0, nil))
	require.NoError(t, tm.Sleep(context.Background(), -time.Second, nil))
	require.Empty(t, tm.Slept(), "nothing to wait is no sleep")
	ctx, cancel := tm.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	require.NoError(t, tm.Sleep(context.Background(), 2*time.Second, nil))
	require.Equal(t, 2*time.Second, clock.Now())
	require.NoError(t, ctx.Err())
	require.NoError(t, tm.Sleep(context.Background(), time.Second, nil))
	require.ErrorIs(t, ctx.Err(), context.DeadlineExceeded, "the step to the deadline ends the timeout")
	require.Equal(t, []time.Duration{2 * time.Second, time.Second}, tm.Slept())

	wake := make(chan struct{}, 1)
	wake <- struct{}{}
	require.NoError(t, tm.Sleep(context.Background(), time.Hour, wake))
	require.Equal(t, 3*time.Second, clock.Now(), "a pending wake-up ends the sleep without moving the clock")
}

func TestManualTimerWithTimeout(t *testing.T) {
	tm := resilience.NewManualTimer(core.NewManualClock(0))
	ctx, cancel := tm.WithTimeout(context.Background(), time.Second)
	child, cancelChild := context.WithCancel(ctx)
	defer cancelChild()
	tm.Advance(time.Second - 1)
	require.NoError(t, ctx.Err())
	require.NoError(t, context.Cause(ctx))
	tm.Advance(1)
	require.True(t, done(ctx.Done()))
	require.Equal(t, context.DeadlineExceeded, ctx.Err())
	require.Equal(t, context.DeadlineExceeded, context.Cause(ctx))
	<-child.Done()
	require.Equal(t, context.DeadlineExceeded, child.Err(), "a context made before the deadline")
	require.Equal(t, context.DeadlineExceeded, context.Cause(child))
	late, cancelLate := context.WithCancel(ctx)
	defer cancelLate()
	require.Equal(t, context.DeadlineExceeded, late.Err(), "a context made after the deadline")
	cancel()
	require.ErrorIs(t, ctx.Err(), context.DeadlineExceeded, "cancel after the deadline keeps DeadlineExceeded")

	type key struct{}
	ctx, cancel = tm.WithTimeout(context.WithValue(context.Background(), key{}, "v"), time.Second)
	require.Equal(t, "v", ctx.Value(key{}), "the parent's values")
	child, cancelChild = context.WithCancel(ctx)
	defer cancelChild()
	cancel()
	require.Equal(t, context.Canceled, ctx.Err())
	require.Equal(t, context.Canceled, context.Cause(ctx))
	<-child.Done()
	require.Equal(t, context.Canceled, child.Err())
	tm.Advance(time.Second)
	require.Equal(t, context.Canceled, ctx.Err(), "the deadline after cancel")

	parent, stop := context.WithCancel(context.Background())
	ctx, cancel = tm.WithTimeout(parent, time.Second)
	defer cancel()
	stop()
	require.ErrorIs(t, ctx.Err(), context.Canceled, "the parent's cancellation is not a deadline")
	tm.Advance(time.Second)
	require.ErrorIs(t, ctx.Err(), context.Canceled)

	ctx, cancel = tm.WithTimeout(context.Background(), 0)
	defer cancel()
	require.ErrorIs(t, ctx.Err(), context.DeadlineExceeded, "a zero timeout is over at once")
}

func TestManualTimerLongestWaitDoesNotWrap(t *testing.T) {
	tm := resilience.NewManualTimer(core.NewManualClock(time.Hour))
	ctx, cancel := tm.WithTimeout(context.Background(), math.MaxInt64)
	defer cancel()
	tm.Advance(time.Second)
	require.NoError(t, ctx.Err(), "a deadline past the largest reading wrapped around")
}

func TestZeroManualTimerPanics(t *testing.T) {
	var tm resilience.ManualTimer
	require.PanicsWithValue(t, "resilience: ManualTimer used without NewManualTimer or NewSteppingTimer", func() { tm.Now() })
}

// The system timer: a context ends the wait at once (the test would hang
// otherwise), and a wake-up ends it too; nothing here waits for time.
func TestSystemTimerWaitEndsByContextOrWake(t *testing.T) {
	var tm resilience.SystemTimer
	ctx, cancel := context.WithCancel(context.Background())
	out := make(chan error, 1)
	go func() { out <- tm.Sleep(ctx, time.Hour, nil) }()
	cancel()
	require.ErrorIs(t, <-out, context.Canceled)

	wake := make(chan struct{}, 1)
	wake <- struct{}{}
	require.NoError(t, tm.Sleep(context.Background(), time.Hour, wake))
	require.NoError(t, tm.Sleep(context.Background(), 0, nil))
	require.ErrorIs(t, tm.Sleep(ctx, 0, nil), context.Canceled, "a done context, even with nothing to wait")
	require.Zero(t, testing.AllocsPerRun(10, func() { _ = tm.Sleep(context.Background(), 0, nil) }), "no timer for no wait")

	// An unbuffered wake-up is received only by a sleeper that waits.
	wake = make(chan struct{})
	go func() { out <- tm.Sleep(context.Background(), time.Hour, wake) }()
	select {
	case wake <- struct{}{}:
		require.NoError(t, <-out)
	case err := <-out:
		t.Fatalf("Sleep of an hour returned %v without waiting", err)
	}

	tctx, tcancel := tm.WithTimeout(context.Background(), time.Hour)
	dl, ok := tctx.Deadline()
	require.True(t, ok)
	require.True(t, dl.After(time.Now()))
	tcancel()
	require.ErrorIs(t, tctx.Err(), context.Canceled)
}

// A nil *ManualTimer (or any nil pointer) as a config's Timer is not the
// zero "use SystemTimer": the constructors accept it, and the first wait
// or deadline dereferences it. NewStack refuses a layer made from a nil
// part; the Timer of each part is taken as given.
func TestConstructorsRefuseANilTimerPointer(t *testing.T) {
	var nilTimer *resilience.ManualTimer
	_, err := resilience.NewRetry(resilience.RetryConfig{Timer: nilTimer})
	require.ErrorIs(t, err, resilience.ErrInvalidConfig, "NewRetry")
	_, err = resilience.NewBulkhead(resilience.BulkheadConfig{MaxConcurrent: 1, MaxWait: time.Second, Timer: nilTimer})
	require.ErrorIs(t, err, resilience.ErrInvalidConfig, "NewBulkhead")
	_, err = resilience.NewTimeLimiter(resilience.TimeLimiterConfig{Timeout: time.Second, Timer: nilTimer})
	require.ErrorIs(t, err, resilience.ErrInvalidConfig, "NewTimeLimiter")
	var nilClock *core.ManualClock
	_, err = resilience.NewBudget(resilience.BudgetConfig{Clock: nilClock})
	require.ErrorIs(t, err, resilience.ErrInvalidConfig, "NewBudget")
	require.ErrorContains(t, err, "BudgetConfig.Clock is a nil *core.ManualClock")
}
