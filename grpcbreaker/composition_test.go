package grpcbreaker_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/casbreaker/casbreaker/core"
	"github.com/casbreaker/casbreaker/grpcbreaker"
	"github.com/casbreaker/casbreaker/resilience"
)

// TestStackWithTheInterceptorsBreaker: a method's breaker, given to a
// resilience stack too, takes one permit per call: the interceptor sends
// under the stack's permit and reports the status, with its pushback, which
// the stack records even when the call swallows the error. The breaker
// trips after three failures, readmits the server after one open
// duration, and a stream opened under the stack's permit takes none.
func TestStackWithTheInterceptorsBreaker(t *testing.T) {
	h, addr := serve(t)
	clock := core.NewManualClock(0)
	ic := newInterceptors(t, grpcbreaker.Options{Config: config(clock)})
	c := dial(t, addr, ic)
	stack := func(method string) *resilience.Stack {
		s, err := resilience.NewStack(resilience.WithBreaker(breaker(t, ic, method)))
		require.NoError(t, err)
		return s
	}
	checks, watches := stack(checkMethod), stack(watchMethod)
	call := func(cmd string, swallow bool) error {
		_, err := resilience.Do(context.Background(), checks, func(ctx context.Context) (int, error) {
			_, err := c.Check(ctx, &healthpb.HealthCheckRequest{Service: cmd})
			if swallow {
				return 0, nil
			}
			return 0, err
		})
		return err
	}

	for range 3 {
		require.Equal(t, codes.Unavailable, status.Code(call("code=14", false)))
	}
	b := breaker(t, ic, checkMethod)
	require.Equal(t, core.Open, b.State(), "three failures, one each")
	require.ErrorIs(t, call("", false), core.ErrOpen)
	require.Equal(t, int64(3), h.calls.Load(), "sent while open")
	clock.Advance(10 * time.Second)
	require.NoError(t, call("", false), "the probe after one open duration")
	require.Equal(t, core.Closed, b.State())

	require.NoError(t, call("code=14,pushback=20000", true))
	require.Equal(t, core.Open, b.State(), "the reported pushback trips at once, though the call returned no error")
	require.Equal(t, 20*time.Second, core.RetryAfterOf(call("", false)))
	m := b.Metrics()
	require.Equal(t, [...]uint64{5, 2, 0, 4, 1}, [...]uint64{m.Admitted, m.RejectedOpen, m.RejectedHalfOpenFull, m.Failures, m.Successes},
		"admitted, rejected open, rejected half-open full, failures, successes")

	_, err := resilience.Do(context.Background(), watches, func(ctx context.Context) (int, error) {
		return 0, watch(ctx, c, "")
	})
	require.NoError(t, err)
	w := breaker(t, ic, watchMethod).Metrics()
	require.Equal(t, [...]uint64{1, 1}, [...]uint64{w.Admitted, w.Successes}, "the stack's permit only")
}
