package otelbreaker_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/metric/metricdata/metricdatatest"

	"github.com/casbreaker/casbreaker/core"
	"github.com/casbreaker/casbreaker/internal/observetest"
	"github.com/casbreaker/casbreaker/observe"
	"github.com/casbreaker/casbreaker/otelbreaker"
	"github.com/casbreaker/casbreaker/registry"
)

// setup registers src on a fresh provider with a manual reader.
func setup(t *testing.T, src observe.Source, o otelbreaker.Options) (*sdkmetric.ManualReader, *sdkmetric.MeterProvider) {
	t.Helper()
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { require.NoError(t, mp.Shutdown(context.Background())) })
	r, err := otelbreaker.Register(mp, src, o)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, r.Unregister()) })
	return reader, mp
}

// collect returns the collected metrics of the otelbreaker scope by name.
func collect(t *testing.T, reader *sdkmetric.ManualReader) map[string]metricdata.Metrics {
	t.Helper()
	var rm metricdata.ResourceMetrics
	require.NoError(t, reader.Collect(context.Background(), &rm))
	out := map[string]metricdata.Metrics{}
	for _, sm := range rm.ScopeMetrics {
		if sm.Scope.Name == otelbreaker.ScopeName {
			for _, m := range sm.Metrics {
				out[m.Name] = m
			}
		}
	}
	return out
}

// trippedSource is observetest.Tripped's breaker, "api", with tr's
// listener if tr is not nil.
func trippedSource(t *testing.T, tr *observe.Transitions) observe.Source {
	t.Helper()
	var listener func(core.Transition)
	if tr != nil {
		listener = tr.Listener(nil)
	}
	b, err := observetest.Tripped(listener)
	require.NoError(t, err)
	src, err := observe.Breakers(b)
	require.NoError(t, err)
	return src
}

func attrs(kv ...string) attribute.Set {
	var out []attribute.KeyValue
	for i := 0; i < len(kv); i += 2 {
		out = append(out, attribute.String(kv[i], kv[i+1]))
	}
	return attribute.NewSet(out...)
}

func TestCollect(t *testing.T) {
	var tr observe.Transitions
	reader, _ := setup(t, trippedSource(t, &tr), otelbreaker.Options{Transitions: &tr})
	got := collect(t, reader)

	metricdatatest.AssertEqual(t, metricdata.Metrics{
		Name:        "casbreaker.calls",
		Description: "outcomes the breaker acted on, by kind: successful, failed (retry-after hints included) or ignored",
		Unit:        "{call}",
		Data: metricdata.Sum[int64]{
			Temporality: metricdata.CumulativeTemporality,
			IsMonotonic: true,
			DataPoints: []metricdata.DataPoint[int64]{
				{Attributes: attrs("breaker", "api", "kind", "successful"), Value: 1},
				{Attributes: attrs("breaker", "api", "kind", "failed"), Value: 1},
				{Attributes: attrs("breaker", "api", "kind", "ignored"), Value: 0},
			},
		},
	}, got["casbreaker.calls"], metricdatatest.IgnoreTimestamp())

	metricdatatest.AssertEqual(t, metricdata.Metrics{
		Name:        "casbreaker.transitions",
		Description: "committed state transitions, by from, to and reason (reason empty when not counted by reason)",
		Unit:        "{transition}",
		Data: metricdata.Sum[int64]{
			Temporality: metricdata.CumulativeTemporality,
			IsMonotonic: true,
			DataPoints: []metricdata.DataPoint[int64]{
				{Attributes: attrs("breaker", "api", "from", "closed", "to", "open", "reason", "failure_rate"), Value: 1},
			},
		},
	}, got["casbreaker.transitions"], metricdatatest.IgnoreTimestamp())

	state, ok := got["casbreaker.state"].Data.(metricdata.Sum[int64])
	require.True(t, ok, "the state is an up-down counter: it adds up across breakers")
	assert.False(t, state.IsMonotonic)
	in := map[string]int64{}
	for _, dp := range state.DataPoints {
		v, _ := dp.Attributes.Value("state")
		in[v.AsString()] = dp.Value
	}
	assert.Equal(t, map[string]int64{"closed": 0, "open": 1, "half_open": 0, "forced_open": 0, "disabled": 0, "metrics_only": 0}, in)

	notPermitted := got["casbreaker.not_permitted_calls"].Data.(metricdata.Sum[int64])
	byReason := map[string]int64{}
	for _, dp := range notPermitted.DataPoints {
		v, _ := dp.Attributes.Value("reason")
		byReason[v.AsString()] = dp.Value
	}
	assert.Equal(t, map[string]int64{"open": 1, "half_open_full": 0, "forced_open": 0, "ramping_up": 0}, byReason)
	_, ok = got["casbreaker.failure_ratio"]
	assert.False(t, ok, "an open breaker's fresh window has no ratio")
	assert.Len(t, got, len(observe.Metrics())-4, "all but the two ratios, the duplicates and the capped trips (no cap)")
}

func TestRatios(t *testing.T) {
	b, err := core.New(core.Config{Name: "db", WindowSize: 10, FailureRateThreshold: 90, Clock: core.NewManualClock(0)})
	require.NoError(t, err)
	require.NoError(t, observetest.Call(b, observetest.ErrDown))
	require.NoError(t, observetest.Call(b, nil))
	src, err := observe.Breakers(b)
	require.NoError(t, err)
	reader, _ := setup(t, src, otelbreaker.Options{Prefix: "svc.breaker"})
	got := collect(t, reader)
	metricdatatest.AssertEqual(t, metricdata.Metrics{
		Name:        "svc.breaker.failure_ratio",
		Description: "failed over all calls in the sliding window, 0..1; absent while the window holds no call",
		Unit:        "1",
		Data: metricdata.Gauge[float64]{DataPoints: []metricdata.DataPoint[float64]{
			{Attributes: attrs("breaker", "db"), Value: 0.5},
		}},
	}, got["svc.breaker.failure_ratio"], metricdatatest.IgnoreTimestamp())
	_, ok := got["svc.breaker.calls"]
	assert.False(t, ok, "no CollectMetrics: no counters")
}

func TestTransitionsWithoutAListenerHaveNoReason(t *testing.T) {
	reader, _ := setup(t, trippedSource(t, nil), otelbreaker.Options{})
	sum := collect(t, reader)["casbreaker.transitions"].Data.(metricdata.Sum[int64])
	require.Len(t, sum.DataPoints, 1)
	assert.Equal(t, attrs("breaker", "api", "from", "closed", "to", "open", "reason", ""), sum.DataPoints[0].Attributes)
}

func TestUnregisterStopsReporting(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer func() { require.NoError(t, mp.Shutdown(context.Background())) }()
	r, err := otelbreaker.Register(mp, trippedSource(t, nil), otelbreaker.Options{})
	require.NoError(t, err)
	assert.NotEmpty(t, collect(t, reader))
	require.NoError(t, r.Unregister())
	assert.Empty(t, collect(t, reader))
}

func TestBadArguments(t *testing.T) {
	src, err := observe.Breakers()
	require.NoError(t, err)
	_, err = otelbreaker.Register(nil, src, otelbreaker.Options{})
	assert.ErrorIs(t, err, core.ErrInvalidArgument)
	assert.ErrorContains(t, err, "MeterProvider is nil")
	_, err = otelbreaker.Register(sdkmetric.NewMeterProvider(), nil, otelbreaker.Options{})
	assert.ErrorIs(t, err, core.ErrInvalidArgument)
	assert.ErrorContains(t, err, "Source is nil")
	_, err = otelbreaker.Register(sdkmetric.NewMeterProvider(), src, otelbreaker.Options{Prefix: "9 bad name"})
	assert.ErrorContains(t, err, "instrument 9 bad name.state")
}

// Collections while calls run, under the race detector: each breaker is in
// one state, and the counters only grow.
func TestCollectDuringTraffic(t *testing.T) {
	var tr observe.Transitions
	breakers, err := registry.New(registry.Options[int]{Config: core.Config{
		Name: "svc", ConsecutiveFailures: 2, OpenDuration: time.Millisecond, CollectMetrics: true, OnStateChange: tr.Listener(nil),
	}})
	require.NoError(t, err)
	src, err := observe.Registry(breakers)
	require.NoError(t, err)
	reader, _ := setup(t, src, otelbreaker.Options{Transitions: &tr})
	stop := observetest.Traffic(breakers, 3, nil)
	last := map[attribute.Distinct]int64{}
	for range 50 {
		got := collect(t, reader)
		in := map[string]int64{}
		// Both families are absent until the first breaker is made.
		state, _ := got["casbreaker.state"].Data.(metricdata.Sum[int64])
		calls, _ := got["casbreaker.calls"].Data.(metricdata.Sum[int64])
		for _, dp := range state.DataPoints {
			v, _ := dp.Attributes.Value("breaker")
			in[v.AsString()] += dp.Value
		}
		for name, n := range in {
			assert.Equal(t, int64(1), n, name)
		}
		for _, dp := range calls.DataPoints {
			assert.GreaterOrEqual(t, dp.Value, last[dp.Attributes.Equivalent()])
			last[dp.Attributes.Equivalent()] = dp.Value
		}
	}
	stop()
}

// A registry with MaxOpenPercent reports each breaker's capped trips as a
// monotonic counter.
func TestCappedTrips(t *testing.T) {
	reg, err := registry.New(registry.Options[int]{Config: core.Config{
		Name: "svc", ConsecutiveFailures: 1, CollectMetrics: true, Clock: core.NewManualClock(0),
	}, MaxOpenPercent: 50})
	require.NoError(t, err)
	for k := range 2 {
		_, err := reg.Get(k) // both first: one may open
		require.NoError(t, err)
	}
	for k := range 2 {
		b, err := reg.Get(k)
		require.NoError(t, err)
		p, err := b.Allow()
		require.NoError(t, err)
		b.Done(p, errors.New("down"))
	}
	src, err := observe.Registry(reg)
	require.NoError(t, err)
	reader, _ := setup(t, src, otelbreaker.Options{})
	metricdatatest.AssertEqual(t, metricdata.Metrics{
		Name:        "casbreaker.capped_trips",
		Description: "trips refused by a cap on open breakers (core.OpenGate, a registry's MaxOpenPercent): the breaker stayed closed",
		Unit:        "{trip}",
		Data: metricdata.Sum[int64]{
			Temporality: metricdata.CumulativeTemporality,
			IsMonotonic: true,
			DataPoints: []metricdata.DataPoint[int64]{
				{Attributes: attrs("breaker", "svc/0"), Value: 0},
				{Attributes: attrs("breaker", "svc/1"), Value: 1},
			},
		},
	}, collect(t, reader)["casbreaker.capped_trips"], metricdatatest.IgnoreTimestamp())
}

// A fleet member (observe.FleetMember) has the fleet instruments' data
// points; a breaker that is no member has none.
func TestFleet(t *testing.T) {
	src, err := observetest.FleetAndPlain()
	require.NoError(t, err)
	reader, _ := setup(t, src, otelbreaker.Options{})
	got := collect(t, reader)

	metricdatatest.AssertEqual(t, metricdata.Metrics{
		Name:        "casbreaker.fleet_mode",
		Description: "1 for the mode the fleet member runs in, 0 for the other: fleet (it shares the fleet's open state and probe budget) or local (its last store call failed: a plain local breaker)",
		Unit:        "1",
		Data: metricdata.Sum[int64]{ // an up-down counter: it adds up across members
			Temporality: metricdata.CumulativeTemporality,
			DataPoints: []metricdata.DataPoint[int64]{
				{Attributes: attrs("breaker", "pay", "mode", "fleet"), Value: 0},
				{Attributes: attrs("breaker", "pay", "mode", "local"), Value: 1},
			},
		},
	}, got["casbreaker.fleet_mode"], metricdatatest.IgnoreTimestamp())
	metricdatatest.AssertEqual(t, metricdata.Metrics{
		Name:        "casbreaker.fleet_leases",
		Description: "half-open probes of a fleet open period, by result: granted a lease by the store, or refused without one (with a wait)",
		Unit:        "{lease}",
		Data: metricdata.Sum[int64]{
			Temporality: metricdata.CumulativeTemporality,
			IsMonotonic: true,
			DataPoints: []metricdata.DataPoint[int64]{
				{Attributes: attrs("breaker", "pay", "result", "granted"), Value: 5},
				{Attributes: attrs("breaker", "pay", "result", "refused"), Value: 6},
			},
		},
	}, got["casbreaker.fleet_leases"], metricdatatest.IgnoreTimestamp())
	for name, want := range map[string]int64{
		"casbreaker.fleet_store_errors": 1, "casbreaker.fleet_published_trips": 2, "casbreaker.fleet_dropped_reports": 7,
	} {
		sum := got[name].Data.(metricdata.Sum[int64])
		require.Len(t, sum.DataPoints, 1, name)
		assert.Equal(t, want, sum.DataPoints[0].Value, name)
	}
	adoptions := map[string]int64{}
	for _, dp := range got["casbreaker.fleet_adoptions"].Data.(metricdata.Sum[int64]).DataPoints {
		v, _ := dp.Attributes.Value("state")
		adoptions[v.AsString()] = dp.Value
	}
	assert.Equal(t, map[string]int64{"open": 3, "closed": 4}, adoptions)
}
