// Package otelbreaker exports circuit breakers to OpenTelemetry:
// observable instruments on a user's metric.MeterProvider over one
// breaker, several, or every breaker of a registry (an observe.Source),
// read by one callback at each collection and never in a breaker's
// Allow or Done.
//
//	var transitions observe.Transitions // counts transitions by reason
//	reg, _ := registry.New(registry.Options[string]{Config: core.Config{
//		..., CollectMetrics: true, OnStateChange: transitions.Listener(nil),
//	}, MaxBreakers: 1000})
//	src, _ := observe.Registry(reg)
//	r, _ := otelbreaker.Register(provider, src, otelbreaker.Options{Transitions: &transitions})
//	defer r.Unregister()
//
// The instruments are the families of observe.Metrics(), and of
// observe.FleetMetrics() for fleet members (observe.FleetMember), named
// "casbreaker." + the family (casbreaker.state, casbreaker.calls,
// casbreaker.failure_ratio, casbreaker.fleet_mode and the rest;
// docs/observability.md has the table), each data point with a breaker
// attribute (the breaker's Config.Name) and the family's own attributes.
package otelbreaker

import (
	"context"
	"fmt"
	"math"
	"slices"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/casbreaker/casbreaker/core"
	"github.com/casbreaker/casbreaker/observe"
)

// ScopeName is the instrumentation scope of the meter Register asks the
// provider for.
const ScopeName = "github.com/casbreaker/casbreaker/otelbreaker"

// Options tunes Register. The zero value names the instruments
// casbreaker.* and reports transitions without reasons.
type Options struct {
	// Prefix is every instrument name's prefix, before a dot. Zero:
	// "casbreaker".
	Prefix string
	// Transitions, the listener set as the breakers'
	// core.Config.OnStateChange, gives casbreaker.transitions its reason
	// attribute. Zero: transitions come from each breaker's core.Metrics,
	// with an empty reason, and only with CollectMetrics.
	Transitions *observe.Transitions
}

// Register makes one instrument per family of observe.Metrics() and
// observe.FleetMetrics() on mp's meter for ScopeName and a callback that
// reads every breaker of src at each collection: a cumulative family as
// an Int64ObservableCounter, a whole-number gauge (the 0/1 state and
// fleet mode, the window's calls) as an
// Int64ObservableUpDownCounter, since it adds up across breakers, and a
// ratio as a Float64ObservableGauge. A count past 2^63-1, which a breaker
// would need centuries to reach, is reported as 2^63-1.
//
// The callback runs wherever the SDK collects and may run concurrently
// with the breakers' calls. It never returns an error, which would make a
// PeriodicReader skip the export of every instrument, the application's
// own included: a breaker name that is not valid UTF-8 is reported as
// observe.LabelValue escapes it, and of breakers that share a name the
// first is reported and the others are counted in
// casbreaker.duplicate_breakers{breaker}. Unregister the Registration to
// stop reporting.
//
// Register returns an error matching core.ErrInvalidArgument if mp or src
// is nil, and the meter's error if an instrument or the callback cannot
// be made.
func Register(mp metric.MeterProvider, src observe.Source, o Options) (metric.Registration, error) {
	if mp == nil {
		return nil, fmt.Errorf("%w: otelbreaker.Register: the MeterProvider is nil", core.ErrInvalidArgument)
	}
	reader, err := observe.NewReader(src, o.Transitions)
	if err != nil {
		return nil, fmt.Errorf("otelbreaker.Register: %w", err)
	}
	prefix := o.Prefix
	if prefix == "" {
		prefix = "casbreaker"
	}
	meter := mp.Meter(ScopeName)
	ints := make(map[*observe.Metric]metric.Int64Observable)
	floats := make(map[*observe.Metric]metric.Float64Observable)
	var all []metric.Observable
	for _, m := range slices.Concat(observe.Metrics(), observe.FleetMetrics()) {
		name := prefix + "." + m.Name
		var (
			inst metric.Observable
			err  error
		)
		switch {
		case m.Ratio:
			var f metric.Float64ObservableGauge
			f, err = meter.Float64ObservableGauge(name, metric.WithDescription(m.Help), metric.WithUnit(m.Unit))
			floats[m], inst = f, f
		case m.Counter:
			var c metric.Int64ObservableCounter
			c, err = meter.Int64ObservableCounter(name, metric.WithDescription(m.Help), metric.WithUnit(m.Unit))
			ints[m], inst = c, c
		default:
			var u metric.Int64ObservableUpDownCounter
			u, err = meter.Int64ObservableUpDownCounter(name, metric.WithDescription(m.Help), metric.WithUnit(m.Unit))
			ints[m], inst = u, u
		}
		if err != nil {
			return nil, fmt.Errorf("otelbreaker.Register: instrument %s: %w", name, err)
		}
		all = append(all, inst)
	}
	reg, err := meter.RegisterCallback(func(_ context.Context, obs metric.Observer) error {
		c := collection{obs: obs, ints: ints, floats: floats, kv: make([]attribute.KeyValue, 0, 4)}
		err := reader.Read(func(s observe.Sample) {
			s.Each(func(m *observe.Metric, labels []string, v observe.Point) { c.observe(m, s.Name, labels, v) })
		})
		for name, n := range observe.Duplicates(err) {
			c.observe(observe.DuplicateBreakers(), name, nil, observe.Point{Count: uint64(n)})
		}
		return nil
	}, all...)
	if err != nil {
		return nil, fmt.Errorf("otelbreaker.Register: callback: %w", err)
	}
	return reg, nil
}

// collection is one run of a registration's callback.
type collection struct {
	obs    metric.Observer
	ints   map[*observe.Metric]metric.Int64Observable
	floats map[*observe.Metric]metric.Float64Observable
	// kv holds the attributes of one data point at a time: NewSet copies
	// them, so one slice serves a collection's millions of data points.
	kv []attribute.KeyValue
}

// observe observes one series of the breaker named name.
func (c *collection) observe(m *observe.Metric, name string, labels []string, v observe.Point) {
	c.kv = append(c.kv[:0], attribute.String("breaker", name))
	for i, l := range labels {
		c.kv = append(c.kv, attribute.String(m.Labels[i], l))
	}
	at := metric.WithAttributeSet(attribute.NewSet(c.kv...))
	if m.Ratio {
		c.obs.ObserveFloat64(c.floats[m], v.Ratio, at)
		return
	}
	c.obs.ObserveInt64(c.ints[m], int64(min(v.Count, math.MaxInt64)), at)
}
