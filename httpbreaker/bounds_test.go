package httpbreaker_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/casbreaker/casbreaker/core"
	"github.com/casbreaker/casbreaker/httpbreaker"
)

// boundedTransport is a Transport over ok200 on a manual clock.
func boundedTransport(t *testing.T, o httpbreaker.Options) (*httpbreaker.Transport, *core.ManualClock) {
	t.Helper()
	clock := core.NewManualClock(0)
	o.Config = core.Config{ConsecutiveFailures: 1, Clock: clock}
	o.Base = ok200
	tr, err := httpbreaker.New(o)
	require.NoError(t, err)
	return tr, clock
}

// sendTo sends one request to each of hosts n0..n-1 of a made-up domain.
func sendTo(t *testing.T, tr *httpbreaker.Transport, from, to int) {
	t.Helper()
	for i := from; i < to; i++ {
		req, err := http.NewRequest(http.MethodGet, fmt.Sprintf("http://h%d.example/", i), nil)
		require.NoError(t, err)
		resp, err := tr.RoundTrip(req)
		require.NoError(t, err)
		resp.Body.Close()
	}
}

// With zero Options, a client sent to ever new hosts keeps at most
// DefaultMaxBreakers breakers, and a breaker unused for DefaultIdleAfter
// may be evicted.
func TestDefaultRegistryIsBounded(t *testing.T) {
	tr, clock := boundedTransport(t, httpbreaker.Options{})
	sendTo(t, tr, 0, httpbreaker.DefaultMaxBreakers+10)
	require.Equal(t, httpbreaker.DefaultMaxBreakers, tr.Registry().Len())

	clock.Advance(httpbreaker.DefaultIdleAfter / 2)
	require.Zero(t, tr.Registry().EvictIdle(), "not idle yet")
	clock.Advance(httpbreaker.DefaultIdleAfter/2 + httpbreaker.DefaultIdleAfter/16)
	require.Equal(t, httpbreaker.DefaultMaxBreakers, tr.Registry().EvictIdle())
	require.Zero(t, tr.Registry().Len())
}

// NoLimit turns either bound off, and explicit bounds are kept.
func TestRegistryBoundsByOption(t *testing.T) {
	tr, clock := boundedTransport(t, httpbreaker.Options{MaxBreakers: httpbreaker.NoLimit, IdleAfter: httpbreaker.NoLimit})
	sendTo(t, tr, 0, httpbreaker.DefaultMaxBreakers+10)
	require.Equal(t, httpbreaker.DefaultMaxBreakers+10, tr.Registry().Len(), "no bound")
	clock.Advance(100 * httpbreaker.DefaultIdleAfter)
	require.Zero(t, tr.Registry().EvictIdle(), "never idle")

	tr, clock = boundedTransport(t, httpbreaker.Options{MaxBreakers: 3, IdleAfter: time.Minute})
	sendTo(t, tr, 0, 5)
	require.Equal(t, 3, tr.Registry().Len())
	clock.Advance(time.Minute + time.Minute/16)
	require.Equal(t, 3, tr.Registry().EvictIdle())
}
