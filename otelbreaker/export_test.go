package otelbreaker_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/casbreaker/casbreaker/core"
	"github.com/casbreaker/casbreaker/internal/observetest"
	"github.com/casbreaker/casbreaker/observe"
	"github.com/casbreaker/casbreaker/otelbreaker"
)

// memoryExporter keeps the names and data of the metrics of every export.
type memoryExporter struct {
	mu      sync.Mutex
	exports []map[string]metricdata.Aggregation
}

func (e *memoryExporter) Temporality(k sdkmetric.InstrumentKind) metricdata.Temporality {
	return sdkmetric.DefaultTemporalitySelector(k)
}

func (e *memoryExporter) Aggregation(k sdkmetric.InstrumentKind) sdkmetric.Aggregation {
	return sdkmetric.DefaultAggregationSelector(k)
}

func (e *memoryExporter) Export(_ context.Context, rm *metricdata.ResourceMetrics) error {
	got := map[string]metricdata.Aggregation{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			got[m.Name] = m.Data
		}
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.exports = append(e.exports, got)
	return nil
}

func (e *memoryExporter) ForceFlush(context.Context) error { return nil }
func (e *memoryExporter) Shutdown(context.Context) error   { return nil }

// Two breakers of one name under a PeriodicReader, which exports nothing
// of a collection that returns an error: the application's own
// instrument and the breakers are still exported, the first of the two
// with its series and the name with casbreaker.duplicate_breakers.
func TestDuplicateNamesKeepThePeriodicExport(t *testing.T) {
	a, err := core.New(core.Config{Name: "same", ConsecutiveFailures: 1})
	require.NoError(t, err)
	b, err := core.New(core.Config{Name: "same", ConsecutiveFailures: 1})
	require.NoError(t, err)
	src, err := observe.Breakers(a, b)
	require.NoError(t, err)

	exp := &memoryExporter{}
	// An interval no test waits for: ForceFlush collects and exports.
	reader := sdkmetric.NewPeriodicReader(exp, sdkmetric.WithInterval(time.Hour))
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer func() { require.NoError(t, mp.Shutdown(context.Background())) }()
	requests, err := mp.Meter("app").Int64Counter("app.requests")
	require.NoError(t, err)
	requests.Add(context.Background(), 1)
	r, err := otelbreaker.Register(mp, src, otelbreaker.Options{})
	require.NoError(t, err)
	defer func() { require.NoError(t, r.Unregister()) }()

	require.NoError(t, reader.ForceFlush(context.Background()))
	exp.mu.Lock()
	defer exp.mu.Unlock()
	require.Len(t, exp.exports, 1)
	got := exp.exports[0]
	assert.Contains(t, got, "app.requests", "the application's own instrument")
	state, ok := got["casbreaker.state"].(metricdata.Sum[int64])
	require.True(t, ok)
	assert.Len(t, state.DataPoints, core.NumStates, "one breaker's states: the first of the two")
	dup, ok := got["casbreaker.duplicate_breakers"].(metricdata.Sum[int64])
	require.True(t, ok)
	require.Len(t, dup.DataPoints, 1)
	assert.Equal(t, attrs("breaker", "same"), dup.DataPoints[0].Attributes)
	assert.Equal(t, int64(1), dup.DataPoints[0].Value)
}

// One Transitions shared by two registrations over different breakers:
// each collection keeps the other's counts.
func TestSharedTransitionsKeepEachRegistrationsCounts(t *testing.T) {
	var tr observe.Transitions
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer func() { require.NoError(t, mp.Shutdown(context.Background())) }()
	for _, name := range []string{"a", "b"} {
		b, err := core.New(core.Config{Name: name, ConsecutiveFailures: 1, OnStateChange: tr.Listener(nil)})
		require.NoError(t, err)
		require.NoError(t, b.ForceOpen(0))
		src, err := observe.Breakers(b)
		require.NoError(t, err)
		r, err := otelbreaker.Register(mp, src, otelbreaker.Options{Transitions: &tr, Prefix: "breaker_" + name})
		require.NoError(t, err)
		defer func() { require.NoError(t, r.Unregister()) }()
	}
	for range 3 {
		got := collect(t, reader)
		for _, name := range []string{"a", "b"} {
			sum, _ := got["breaker_"+name+".transitions"].Data.(metricdata.Sum[int64])
			assert.Len(t, sum.DataPoints, 1, name)
		}
	}
}

// A name that is not valid UTF-8, which an OTLP exporter could not
// encode, is observed with its invalid bytes escaped.
func TestInvalidUTF8NameIsEscaped(t *testing.T) {
	b, err := core.New(core.Config{Name: "bad", ConsecutiveFailures: 1})
	require.NoError(t, err)
	src, err := observe.Breakers(observetest.Named{Breaker: b, Name: "\xff.example"})
	require.NoError(t, err)
	reader, _ := setup(t, src, otelbreaker.Options{})
	state := collect(t, reader)["casbreaker.state"].Data.(metricdata.Sum[int64])
	require.NotEmpty(t, state.DataPoints)
	for _, dp := range state.DataPoints {
		v, _ := dp.Attributes.Value("breaker")
		assert.Equal(t, `\xff.example`, v.AsString())
	}
}
