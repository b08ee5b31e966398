package resilience_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/casbreaker/casbreaker/core"
	"github.com/casbreaker/casbreaker/internal/breakers"
	"github.com/casbreaker/casbreaker/resilience"
)

// hang is a call that waits for its context, after saying it started.
func hang(started chan<- struct{}) func(context.Context) (int, error) {
	return func(ctx context.Context) (int, error) {
		started <- struct{}{}
		<-ctx.Done()
		return 0, ctx.Err()
	}
}

func TestTimeLimiterTimeoutIsFailure(t *testing.T) {
	forEachImpl(t, func(t *testing.T, newBreaker func(core.Config) breakers.Breaker) {
		tm := resilience.NewManualTimer(core.NewManualClock(0))
		br := newBreaker(core.Config{ConsecutiveFailures: 1, Clock: tm.Clock()})
		tl := must(resilience.NewTimeLimiter(resilience.TimeLimiterConfig{Timeout: 2 * time.Second, Timer: tm}))(t)
		s := mustStack(t, resilience.WithBreaker(br), resilience.WithTimeLimiter(tl))
		started := make(chan struct{}, 1)
		out := make(chan error, 1)
		go func() {
			_, err := resilience.Do(context.Background(), s, hang(started))
			out <- err
		}()
		<-started
		tm.Advance(2*time.Second - 1)
		require.False(t, done(out))
		tm.Advance(1)
		err := <-out
		require.ErrorIs(t, err, resilience.ErrTimeout)
		require.ErrorIs(t, err, context.DeadlineExceeded)
		require.ErrorContains(t, err, "call timed out after 2s")
		require.Equal(t, core.Failure, core.DefaultClassifier(err))
		require.Equal(t, core.Open, br.State(), "the breaker did not count the timeout")
	})
}

// pastDeadline is SystemTimer with every deadline passed already: the
// context production's WithTimeout gives once its deadline has passed,
// without waiting for one.
type pastDeadline struct{ resilience.SystemTimer }

func (pastDeadline) WithTimeout(parent context.Context, _ time.Duration) (context.Context, context.CancelFunc) {
	return resilience.SystemTimer{}.WithTimeout(parent, 0)
}

// TestTimeLimiterTimeoutIsFailureAsInProduction: whatever the call returns
// of the context its deadline ended (its Err or Cause, or those of a
// context made from it, as an HTTP or gRPC client makes one), a manual
// timer's timeout reaches the breaker as production's does: an ErrTimeout
// that wraps context.DeadlineExceeded, never context.Canceled, counted as
// a failure.
func TestTimeLimiterTimeoutIsFailureAsInProduction(t *testing.T) {
	const timeout = 2 * time.Second
	// Each call starts its work under ctx, then hangs past the deadline
	// (hang), then returns.
	returns := map[string]func(ctx context.Context, hang func()) error{
		"Err":         func(ctx context.Context, hang func()) error { hang(); <-ctx.Done(); return ctx.Err() },
		"Cause":       func(ctx context.Context, hang func()) error { hang(); <-ctx.Done(); return context.Cause(ctx) },
		"child Err":   func(ctx context.Context, hang func()) error { return viaChild(ctx, hang, context.Context.Err) },
		"child Cause": func(ctx context.Context, hang func()) error { return viaChild(ctx, hang, context.Cause) },
	}
	forEachImpl(t, func(t *testing.T, newBreaker func(core.Config) breakers.Breaker) {
		for _, timer := range []string{"production", "manual", "stepping"} {
			for name, ret := range returns {
				t.Run(timer+"/"+name, func(t *testing.T) {
					clock := core.NewManualClock(0)
					var tm resilience.Timer = pastDeadline{}
					pass := func() {}
					switch timer {
					case "manual":
						m := resilience.NewManualTimer(clock)
						tm, pass = m, func() { m.Advance(timeout) }
					case "stepping":
						m := resilience.NewSteppingTimer(clock)
						tm, pass = m, func() { require.NoError(t, m.Sleep(context.Background(), timeout, nil)) }
					}
					br := newBreaker(core.Config{ConsecutiveFailures: 1, Clock: clock})
					tl := must(resilience.NewTimeLimiter(resilience.TimeLimiterConfig{Timeout: timeout, Timer: tm}))(t)
					s := mustStack(t, resilience.WithBreaker(br), resilience.WithTimeLimiter(tl))
					_, err := resilience.Do(context.Background(), s, func(ctx context.Context) (int, error) {
						return 0, ret(ctx, pass)
					})
					require.ErrorIs(t, err, resilience.ErrTimeout)
					require.ErrorIs(t, err, context.DeadlineExceeded)
					require.NotErrorIs(t, err, context.Canceled)
					require.Equal(t, core.Open, br.State(), "the breaker did not count the timeout")
				})
			}
		}
	})
}

// viaChild makes a context from ctx, hangs, waits for the context's end
// and returns what of it get reads.
func viaChild(ctx context.Context, hang func(), get func(context.Context) error) error {
	child, cancel := context.WithCancel(ctx)
	defer cancel()
	hang()
	<-child.Done()
	return get(child)
}

func TestTimeLimiterCallerCancelIsNotTimeout(t *testing.T) {
	tm := resilience.NewManualTimer(core.NewManualClock(0))
	s := mustStack(t, resilience.WithTimeLimiter(must(resilience.NewTimeLimiter(resilience.TimeLimiterConfig{Timeout: time.Second, Timer: tm}))(t)))
	ctx, cancel := context.WithCancel(context.Background())
	started := make(chan struct{}, 1)
	out := make(chan error, 1)
	go func() {
		_, err := resilience.Do(ctx, s, hang(started))
		out <- err
	}()
	<-started
	cancel()
	err := <-out
	require.ErrorIs(t, err, context.Canceled)
	require.NotErrorIs(t, err, resilience.ErrTimeout)
}

func TestTimeLimiterPassesResultsThrough(t *testing.T) {
	tm := resilience.NewManualTimer(core.NewManualClock(0))
	s := mustStack(t, resilience.WithTimeLimiter(must(resilience.NewTimeLimiter(resilience.TimeLimiterConfig{Timeout: time.Second, Timer: tm}))(t)))
	v, err := resilience.Do(context.Background(), s, (&dep{}).call)
	require.NoError(t, err)
	require.Equal(t, 1, v)
	_, err = resilience.Do(context.Background(), s, (&dep{fail: always(errDown)}).call)
	require.ErrorIs(t, err, errDown)
	require.NotErrorIs(t, err, resilience.ErrTimeout)
}

// A call that ignores its context runs to its end: the limiter reports the
// timeout only once it returns, with an error; one that returns nil late
// is a success.
func TestTimeLimiterCallIgnoringContext(t *testing.T) {
	tm := resilience.NewManualTimer(core.NewManualClock(0))
	s := mustStack(t, resilience.WithTimeLimiter(must(resilience.NewTimeLimiter(resilience.TimeLimiterConfig{Timeout: time.Second, Timer: tm}))(t)))
	deaf := func(err error) func(context.Context) (int, error) {
		return func(context.Context) (int, error) {
			tm.Advance(time.Minute) // the call takes a minute, whatever its context says
			return 7, err
		}
	}
	_, err := resilience.Do(context.Background(), s, deaf(errDown))
	require.ErrorIs(t, err, resilience.ErrTimeout)
	require.ErrorIs(t, err, errDown)
	v, err := resilience.Do(context.Background(), s, deaf(nil))
	require.NoError(t, err)
	require.Equal(t, 7, v)
}

// TestTimeLimiterLeaksNoGoroutine: with the system timer and a parent context
// of a type the context package does not know (so that it starts a
// goroutine to watch it), nothing is left running once the call returns,
// however it ended.
func TestTimeLimiterLeaksNoGoroutine(t *testing.T) {
	s := mustStack(t, resilience.WithTimeLimiter(must(resilience.NewTimeLimiter(resilience.TimeLimiterConfig{Timeout: time.Hour}))(t)))
	parent, cancel := context.WithCancel(context.Background())
	ctx := foreignContext{parent}
	_, err := resilience.Do(ctx, s, (&dep{}).call)
	require.NoError(t, err)
	_, err = resilience.Do(ctx, s, (&dep{fail: always(errDown)}).call)
	require.ErrorIs(t, err, errDown)
	require.Panics(t, func() {
		_, _ = resilience.Do(ctx, s, func(context.Context) (int, error) { panic("boom") })
	})
	started := make(chan struct{}, 1)
	go func() { <-started; cancel() }()
	_, err = resilience.Do(ctx, s, hang(started))
	require.ErrorIs(t, err, context.Canceled)
	goleak.VerifyNone(t)
}

// foreignContext hides the standard context's type.
type foreignContext struct{ context.Context }

func TestNewTimeLimiterErrors(t *testing.T) {
	_, err := resilience.NewTimeLimiter(resilience.TimeLimiterConfig{})
	require.ErrorIs(t, err, resilience.ErrInvalidConfig)
	require.ErrorContains(t, err, "TimeLimiterConfig.Timeout 0s is not positive")
	s := mustStack(t, resilience.WithTimeLimiter(new(resilience.TimeLimiter)))
	require.PanicsWithValue(t, "resilience: TimeLimiter used without NewTimeLimiter", func() {
		_, _ = resilience.Do(context.Background(), s, (&dep{}).call)
	})
	require.False(t, errors.Is(errDown, resilience.ErrTimeout))
}
