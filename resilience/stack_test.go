package resilience_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/atomic"

	"github.com/casbreaker/casbreaker/baseline"
	"github.com/casbreaker/casbreaker/core"
	"github.com/casbreaker/casbreaker/httpbreaker"
	"github.com/casbreaker/casbreaker/internal/breakers"
	"github.com/casbreaker/casbreaker/registry"
	"github.com/casbreaker/casbreaker/resilience"
)

// With the retry outside the breaker every attempt passes the breaker, and
// the rejection that comes once it has tripped ends the loop at once.
func TestRetryOutsideBreakerStopsWhenItOpens(t *testing.T) {
	forEachImpl(t, func(t *testing.T, newBreaker func(core.Config) breakers.Breaker) {
		clock := core.NewManualClock(0)
		tm := resilience.NewSteppingTimer(clock)
		br := newBreaker(core.Config{ConsecutiveFailures: 2, OpenDuration: time.Minute, Clock: clock})
		r := must(resilience.NewRetry(resilience.RetryConfig{MaxAttempts: 5, Timer: tm}))(t)
		s, err := resilience.NewStack(resilience.WithRetry(r), resilience.WithBreaker(br))
		require.NoError(t, err)
		d := &dep{fail: always(errDown)}
		_, err = resilience.Do(context.Background(), s, d.call)
		require.ErrorIs(t, err, core.ErrOpen)
		require.Equal(t, 2, d.calls, "attempts after the trip reached the dependency")
		require.Len(t, tm.Slept(), 2, "the loop waited after the rejection")
		require.Equal(t, core.Open, br.State())
	})
}

// With the retry inside the breaker the attempts of one call count as one
// logical call: a call that succeeds on a retry is a success, and one whose
// attempts all fail is one failure.
func TestRetryInsideBreakerCountsOneCall(t *testing.T) {
	forEachImpl(t, func(t *testing.T, newBreaker func(core.Config) breakers.Breaker) {
		clock := core.NewManualClock(0)
		tm := resilience.NewSteppingTimer(clock)
		br := newBreaker(core.Config{ConsecutiveFailures: 2, OpenDuration: time.Minute, Clock: clock})
		r := must(resilience.NewRetry(resilience.RetryConfig{MaxAttempts: 3, Timer: tm}))(t)
		s := mustStack(t, resilience.WithBreaker(br), resilience.WithRetry(r))

		d := &dep{fail: always(errDown)}
		_, err := resilience.Do(context.Background(), s, d.call)
		require.ErrorIs(t, err, errDown)
		require.Equal(t, 3, d.calls)
		require.Equal(t, core.Closed, br.State(), "three failed attempts are one failure")

		_, err = resilience.Do(context.Background(), s, (&dep{fail: failFirst(2)}).call)
		require.NoError(t, err, "a retry that succeeds is a success, which ends the run of failures")

		_, err = resilience.Do(context.Background(), s, d.call)
		require.ErrorIs(t, err, errDown)
		require.Equal(t, core.Closed, br.State())
		_, err = resilience.Do(context.Background(), s, d.call)
		require.ErrorIs(t, err, errDown)
		require.Equal(t, 9, d.calls)
		require.Equal(t, core.Open, br.State())

		_, err = resilience.Do(context.Background(), s, d.call)
		require.ErrorIs(t, err, core.ErrOpen)
		require.Equal(t, 9, d.calls, "an open breaker starts no retry loop")
	})
}

// A panic passes through every layer, each giving back what it holds: the
// bulkhead its slot, the breaker records a failure.
func TestStackPanicReleasesEveryLayer(t *testing.T) {
	forEachImpl(t, func(t *testing.T, newBreaker func(core.Config) breakers.Breaker) {
		clock := core.NewManualClock(0)
		tm := resilience.NewSteppingTimer(clock)
		br := newBreaker(core.Config{ConsecutiveFailures: 1, Clock: clock})
		bh := must(resilience.NewBulkhead(resilience.BulkheadConfig{MaxConcurrent: 1}))(t)
		s, err := resilience.DefaultStack(
			must(resilience.NewRetry(resilience.RetryConfig{Timer: tm}))(t), br, bh,
			must(resilience.NewTimeLimiter(resilience.TimeLimiterConfig{Timeout: time.Second, Timer: tm}))(t))
		require.NoError(t, err)
		require.PanicsWithValue(t, "boom", func() {
			_, _ = resilience.Do(context.Background(), s, func(context.Context) (int, error) { panic("boom") })
		})
		require.Equal(t, 0, bh.InFlight())
		require.Equal(t, core.Open, br.State())
	})
}

func TestEmptyStackCallsTheFunction(t *testing.T) {
	s, err := resilience.NewStack()
	require.NoError(t, err)
	v, err := resilience.Do(context.Background(), s, (&dep{}).call)
	require.NoError(t, err)
	require.Equal(t, 1, v)
}

// A nil part of DefaultStack is most often a constructor's error left
// unchecked: a stack that silently lost its breaker or bulkhead would
// protect nothing, so each nil part is named.
func TestDefaultStackNamesEveryNilPart(t *testing.T) {
	var nilBreaker *core.Breaker
	for _, b := range []core.Guard{nil, nilBreaker} {
		s, err := resilience.DefaultStack(nil, b, nil, nil)
		require.Nil(t, s)
		require.ErrorIs(t, err, resilience.ErrInvalidConfig)
		for _, part := range []string{"retry", "breaker", "bulkhead", "time limiter"} {
			require.ErrorContains(t, err, "DefaultStack's "+part+" is nil")
		}
	}
}

func TestNilStackPanics(t *testing.T) {
	require.PanicsWithValue(t, "resilience: Do with a nil *Stack: make one with NewStack or DefaultStack", func() {
		_, _ = resilience.Do(context.Background(), nil, (&dep{}).call)
	})
	v, err := resilience.Do(context.Background(), &resilience.Stack{}, (&dep{}).call)
	require.NoError(t, err, "a zero Stack calls the function")
	require.Equal(t, 1, v)
	require.PanicsWithValue(t, "resilience: Do with a nil function: pass the call to make", func() {
		_, _ = resilience.Do[int](context.Background(), &resilience.Stack{}, nil)
	})
}

// A nil fn or ctx panics naming it before any layer acts: a nil fn's
// panic inside the stack would otherwise count as the dependency's
// failure in its breaker (one trips this one).
func TestNilFnOrContextPanicsBeforeTheLayers(t *testing.T) {
	b, err := core.New(core.Config{ConsecutiveFailures: 1})
	require.NoError(t, err)
	s, err := resilience.NewStack(resilience.WithBreaker(b))
	require.NoError(t, err)
	require.PanicsWithValue(t, "resilience: Do with a nil function: pass the call to make", func() {
		_, _ = resilience.Do[int](context.Background(), s, nil)
	})
	require.PanicsWithValue(t, "resilience: Do with a nil context: pass context.Background() or the caller's context", func() {
		//lint:ignore SA1012 the misuse under test
		_, _ = resilience.Do(nil, s, (&dep{}).call)
	})
	require.Equal(t, core.Closed, b.State(), "nothing recorded")
}

func TestNewStackErrors(t *testing.T) {
	var nilBreaker *core.Breaker
	_, err := resilience.NewStack(resilience.WithRetry(must(resilience.NewRetry(resilience.RetryConfig{}))(t)), resilience.Layer{},
		resilience.WithBulkhead(nil), resilience.WithBreaker(nilBreaker))
	require.ErrorIs(t, err, resilience.ErrInvalidConfig)
	require.NotContains(t, err.Error(), "layer 0 ")
	for _, i := range []string{"layer 1 ", "layer 2 ", "layer 3 "} {
		require.ErrorContains(t, err, "NewStack "+i)
	}
}

// TestSuccessAllocatesNothing: a call that succeeds at once through each
// companion, and through the whole stack, allocates nothing but the time
// limiter's deadline context, which costs what context.WithTimeout costs,
// and a registry breaker's permit mark.
func TestSuccessAllocatesNothing(t *testing.T) {
	br, err := core.New(core.Config{WindowSize: 20, FailureRateThreshold: 50})
	require.NoError(t, err)
	budget := must(resilience.NewBudget(resilience.BudgetConfig{}))(t)
	r := must(resilience.NewRetry(resilience.RetryConfig{Budget: budget}))(t)
	bh := must(resilience.NewBulkhead(resilience.BulkheadConfig{MaxConcurrent: 10, MaxWait: time.Second}))(t)
	tl := must(resilience.NewTimeLimiter(resilience.TimeLimiterConfig{Timeout: time.Second}))(t)
	ctx := context.Background()
	fn := func(context.Context) (int, error) { return 1, nil }
	allocs := func(s *resilience.Stack) float64 {
		return testing.AllocsPerRun(1000, func() { _, _ = resilience.Do(ctx, s, fn) })
	}
	for name, l := range map[string]resilience.Layer{
		"retry": resilience.WithRetry(r), "breaker": resilience.WithBreaker(br), "bulkhead": resilience.WithBulkhead(bh),
	} {
		require.Zero(t, allocs(mustStack(t, l)), name)
	}
	full, err := resilience.NewStack(resilience.WithRetry(r), resilience.WithBreaker(br), resilience.WithBulkhead(bh))
	require.NoError(t, err)
	require.Zero(t, allocs(full), "retry with budget, breaker, bulkhead")

	withTimeout := testing.AllocsPerRun(1000, func() {
		_, cancel := context.WithTimeout(ctx, time.Second)
		cancel()
	})
	require.Equal(t, withTimeout, allocs(mustStack(t, resilience.WithTimeLimiter(tl))))
	full, err = resilience.DefaultStack(r, br, bh, tl)
	require.NoError(t, err)
	require.Equal(t, withTimeout, allocs(full))

	reg, err := registry.New(registry.Options[string]{Config: core.Config{ConsecutiveFailures: 5}})
	require.NoError(t, err)
	rb, err := reg.Get("host")
	require.NoError(t, err)
	require.Equal(t, 1.0, allocs(mustStack(t, resilience.WithBreaker(rb))), "a registry's breaker: its permit mark")
}

func TestInvalidConfigMatchesTheCoresToo(t *testing.T) {
	_, err := resilience.NewBulkhead(resilience.BulkheadConfig{})
	require.ErrorIs(t, err, resilience.ErrInvalidConfig)
	require.ErrorIs(t, err, core.ErrInvalidConfig)
}

// A half-open probe waits in the default stack's bulkhead, whose only slot
// another call holds, and the caller's deadline ends the wait: the
// dependency never saw the call, and the bulkhead stayed full throughout.
// A full bulkhead is ignored so that local overload neither trips the
// breaker nor costs a probe (DefaultStack, ErrBulkheadFull); but the wait
// returns ctx.Err(), context.DeadlineExceeded, which the default
// classifier counts as a failure, so the probe fails and the breaker
// opens again.
func TestStackBulkheadWaitEndedByTheDeadlineIsNotAFailure(t *testing.T) {
	forEachImpl(t, func(t *testing.T, newBreaker func(core.Config) breakers.Breaker) {
		tm := resilience.NewManualTimer(nil)
		br := newBreaker(core.Config{ConsecutiveFailures: 1, OpenDuration: time.Second, Clock: tm.Clock()})
		bh := must(resilience.NewBulkhead(resilience.BulkheadConfig{MaxConcurrent: 1, MaxWait: time.Minute, Timer: tm}))(t)
		s := must(resilience.NewStack(resilience.WithBreaker(br), resilience.WithBulkhead(bh)))(t)
		p, err := br.Allow()
		require.NoError(t, err)
		br.Record(p, core.Failure) // open
		tm.Advance(time.Second)    // half-open once the open duration has passed
		require.Equal(t, core.HalfOpen, br.Counts().State)
		require.True(t, bh.TryAcquire(), "another call holds the only slot")

		ctx, cancel := tm.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		called := false
		errc := make(chan error, 1)
		go func() {
			_, err := resilience.Do(ctx, s, func(context.Context) (int, error) { called = true; return 0, nil })
			errc <- err
		}()
		tm.AwaitSleepers(1) // the probe waits in the bulkhead
		tm.Advance(100 * time.Millisecond)
		require.ErrorIs(t, <-errc, context.DeadlineExceeded)
		require.False(t, called)
		require.Equal(t, core.HalfOpen, br.Counts().State, "the probe never reached the dependency")
		bh.Release()
	})
}

// NewStack names a layer made from a nil part; a nil *baseline.Breaker
// (a core.Guard like *core.Breaker) passes it, and Do then dereferences it.
func TestNewStackRefusesANilBaselineBreaker(t *testing.T) {
	var nilBaseline *baseline.Breaker
	_, err := resilience.NewStack(resilience.WithBreaker(nilBaseline))
	require.ErrorIs(t, err, resilience.ErrInvalidConfig)
}

// TestStackWithATransportsBreaker: the breaker of a host that an
// httpbreaker Transport holds, given to DefaultStack too, takes one permit
// per call, not one in the stack and one in the transport. The transport
// sends under the stack's permit and reports its verdict, so a 500 is a
// failure whether or not the call turns it into an error; the breaker
// trips after three requests, rejects without sending while open, and
// readmits the recovered server after one open duration (with two permits
// per call it stayed half-open: the stack took the only probe and the
// transport was refused "no probe permit left").
func TestStackWithATransportsBreaker(t *testing.T) {
	calls := map[string]func(*http.Response) error{
		"5xx is an error": func(resp *http.Response) error {
			if resp.StatusCode >= 500 {
				return fmt.Errorf("status %d", resp.StatusCode)
			}
			return nil
		},
		"the response as it is": func(*http.Response) error { return nil },
	}
	for name, judge := range calls {
		t.Run(name, func(t *testing.T) {
			var down atomic.Bool
			var hits atomic.Int64
			down.Store(true)
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				hits.Inc()
				if down.Load() {
					w.WriteHeader(http.StatusInternalServerError)
				}
			}))
			defer srv.Close()
			clock := core.NewManualClock(0)
			tm := resilience.NewSteppingTimer(clock)
			tr := must(httpbreaker.New(httpbreaker.Options{Config: core.Config{
				ConsecutiveFailures: 3, OpenDuration: time.Minute, PermittedCallsInHalfOpen: 1, CollectMetrics: true, Clock: clock}}))(t)
			defer tr.CloseIdleConnections()
			client := &http.Client{Transport: tr}
			b := must(tr.Registry().Get(srv.Listener.Addr().String()))(t)
			s := must(resilience.DefaultStack(
				must(resilience.NewRetry(resilience.RetryConfig{MaxAttempts: 1, Timer: tm}))(t), b,
				must(resilience.NewBulkhead(resilience.BulkheadConfig{MaxConcurrent: 4}))(t),
				must(resilience.NewTimeLimiter(resilience.TimeLimiterConfig{Timeout: time.Second, Timer: tm}))(t)))(t)
			fetch := func(ctx context.Context) (int, error) {
				req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
				if err != nil {
					return 0, err
				}
				resp, err := client.Do(req)
				if err != nil {
					return 0, err
				}
				resp.Body.Close()
				return resp.StatusCode, judge(resp)
			}

			for i := range 3 {
				_, err := resilience.Do(context.Background(), s, fetch)
				require.NotErrorIs(t, err, core.ErrRejected, "request %d", i)
			}
			require.Equal(t, core.Open, b.State(), "three 500s, one failure each")
			require.Equal(t, int64(3), hits.Load())
			_, err := resilience.Do(context.Background(), s, fetch)
			require.ErrorIs(t, err, core.ErrOpen)
			require.Equal(t, int64(3), hits.Load(), "sent while open")

			down.Store(false)
			clock.Advance(time.Minute)
			status, err := resilience.Do(context.Background(), s, fetch)
			require.NoError(t, err, "the probe after one open duration")
			require.Equal(t, http.StatusOK, status)
			require.Equal(t, core.Closed, b.State())
			_, err = client.Get(srv.URL)
			require.NoError(t, err, "the transport alone, after the stack's calls: no permit left out")
			m := b.Metrics()
			require.Equal(t, [...]uint64{5, 1, 0, 3, 2, 0, 0}, [...]uint64{m.Admitted, m.RejectedOpen, m.RejectedHalfOpenFull,
				m.Failures, m.Successes, m.Ignored, m.Dropped}, "one permit per request: admitted, rejected open, rejected half-open full, failures, successes, ignored, dropped")
		})
	}
}

// The breaker layer of a registry's breaker keeps core.Do's rules: a done
// context takes no permit and calls nothing, an open breaker rejects
// without calling, and a panic is recorded as a failure and passes on.
func TestStackRegistryBreakerLayerKeepsDosRules(t *testing.T) {
	clock := core.NewManualClock(0)
	reg := must(registry.New(registry.Options[string]{Config: core.Config{ConsecutiveFailures: 1, OpenDuration: time.Second, CollectMetrics: true, Clock: clock}}))(t)
	b := must(reg.Get("host"))(t)
	s := mustStack(t, resilience.WithBreaker(b))
	d := &dep{}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := resilience.Do(ctx, s, d.call)
	require.ErrorIs(t, err, context.Canceled)
	require.Zero(t, b.Metrics().Admitted, "a done context took a permit")

	require.PanicsWithValue(t, "boom", func() {
		_, _ = resilience.Do(context.Background(), s, func(context.Context) (int, error) { panic("boom") })
	})
	require.Equal(t, core.Open, b.State(), "the panic was not recorded as a failure")
	_, err = resilience.Do(context.Background(), s, d.call)
	require.ErrorIs(t, err, core.ErrOpen)
	require.Zero(t, d.calls)

	clock.Advance(time.Second)
	v, err := resilience.Do(context.Background(), s, d.call)
	require.NoError(t, err)
	require.Equal(t, 1, v)
	m := b.Metrics()
	require.Equal(t, [...]uint64{2, 1, 1, 1, 0}, [...]uint64{m.Admitted, m.RejectedOpen, m.Failures, m.Successes, m.Dropped},
		"admitted, rejected open, failures, successes, dropped")
}
