// Package prombreaker exports circuit breakers to Prometheus: a
// prometheus.Collector over one breaker, several, or every breaker of a
// registry (an observe.Source), read at scrape time only.
//
// Register it once and every scrape reads each breaker's state, window and
// cumulative counters (the latter only with core.Config.CollectMetrics):
//
//	var transitions observe.Transitions // counts transitions by reason
//	reg, _ := registry.New(registry.Options[string]{Config: core.Config{
//		..., CollectMetrics: true, OnStateChange: transitions.Listener(nil),
//	}, MaxBreakers: 1000})
//	src, _ := observe.Registry(reg)
//	c, _ := prombreaker.New(src, prombreaker.Options{Transitions: &transitions})
//	prometheus.MustRegister(c)
//
// The series, each with a breaker label (the breaker's Config.Name), are
// named after Resilience4j's Micrometer metrics: casbreaker_state{state},
// casbreaker_calls_total{kind}, casbreaker_not_permitted_calls_total{reason},
// casbreaker_failure_ratio and the rest of observe.Metrics; docs/observability.md
// has the table. A breaker adds about 40 series, so a registry's
// MaxBreakers bounds the label cardinality.
package prombreaker

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/casbreaker/casbreaker/core"
	"github.com/casbreaker/casbreaker/observe"
)

// Options tunes a Collector. The zero value names the series
// casbreaker_*, with no constant labels and transitions without reasons.
type Options struct {
	// Namespace is every series name's prefix, before an underscore. Zero:
	// "casbreaker".
	Namespace string
	// ConstLabels are added to every series (an instance or a service
	// name, say). Zero: none.
	ConstLabels prometheus.Labels
	// Transitions, the listener set as the breakers'
	// core.Config.OnStateChange, gives casbreaker_transitions_total its
	// reason label. Zero: transitions come from each breaker's
	// core.Metrics, with an empty reason, and only with CollectMetrics.
	Transitions *observe.Transitions
}

// Collector is a prometheus.Collector over the breakers of an
// observe.Source. Make one with New. Collect reads the breakers on the
// scraping goroutine and may run concurrently with itself and with the
// breakers' calls, whose hot paths it adds nothing to.
type Collector struct {
	reader *observe.Reader
	descs  map[*observe.Metric]*prometheus.Desc
}

var _ prometheus.Collector = (*Collector)(nil)

// New returns a Collector over src. It returns an error matching
// core.ErrInvalidArgument if src is nil or Namespace or a constant label
// is not a valid Prometheus name.
func New(src observe.Source, o Options) (*Collector, error) {
	ns := o.Namespace
	if ns == "" {
		ns = "casbreaker"
	}
	c := &Collector{descs: make(map[*observe.Metric]*prometheus.Desc)}
	for _, m := range observe.Metrics {
		name := prometheus.BuildFQName(ns, "", m.Name)
		if m.Counter {
			name += "_total"
		}
		d := prometheus.NewDesc(name, m.Help+".", append([]string{"breaker"}, m.Labels...), o.ConstLabels)
		// NewDesc keeps a bad name or label as the Desc's error, which
		// only registration would report.
		if _, err := prometheus.NewConstMetric(d, prometheus.GaugeValue, 0, make([]string, 1+len(m.Labels))...); err != nil {
			return nil, fmt.Errorf("%w: prombreaker.New: %v", core.ErrInvalidArgument, err)
		}
		c.descs[m] = d
	}
	r, err := observe.NewReader(src, o.Transitions)
	if err != nil {
		return nil, fmt.Errorf("prombreaker.New: %w", err)
	}
	c.reader = r
	return c, nil
}

// Describe sends the descriptor of every family (prometheus.Collector).
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, m := range observe.Metrics {
		ch <- c.descs[m]
	}
}

// Collect reads every breaker of the Source and sends its series
// (prometheus.Collector). It never sends an error, which would fail the
// whole scrape (promhttp's default answers 500), the other collectors'
// series included: a breaker name that is not valid UTF-8 is reported
// as observe.LabelValue escapes it, and of breakers that share a name
// the first is reported and the others are counted in
// casbreaker_duplicate_breakers{breaker}.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	send := func(m *observe.Metric, name string, labels []string, v observe.Point) {
		typ, val := prometheus.GaugeValue, float64(v.Count)
		if m.Counter {
			typ = prometheus.CounterValue
		}
		if m.Ratio {
			val = v.Ratio
		}
		lv := make([]string, 0, 1+len(labels))
		ch <- prometheus.MustNewConstMetric(c.descs[m], typ, val, append(append(lv, name), labels...)...)
	}
	err := c.reader.Read(func(s observe.Sample) {
		s.Each(func(m *observe.Metric, labels []string, v observe.Point) { send(m, s.Name, labels, v) })
	})
	for name, n := range observe.Duplicates(err) {
		send(observe.DuplicateBreakers, name, nil, observe.Point{Count: uint64(n)})
	}
}
