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
	src   observe.Source
	tr    *observe.Transitions
	descs map[*observe.Metric]*prometheus.Desc
	// first describes every scrape error: a scrape must name a Desc.
	first *prometheus.Desc
}

var _ prometheus.Collector = (*Collector)(nil)

// New returns a Collector over src. It returns an error matching
// core.ErrInvalidArgument if src is nil or Namespace or a constant label
// is not a valid Prometheus name.
func New(src observe.Source, o Options) (*Collector, error) {
	if src == nil {
		return nil, fmt.Errorf("%w: prombreaker.New: the Source is nil (make one with observe.Breakers or observe.Registry)", core.ErrInvalidArgument)
	}
	ns := o.Namespace
	if ns == "" {
		ns = "casbreaker"
	}
	c := &Collector{src: src, tr: o.Transitions, descs: make(map[*observe.Metric]*prometheus.Desc)}
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
		if c.first == nil {
			c.first = d
		}
	}
	return c, nil
}

// Describe sends the descriptor of every family (prometheus.Collector).
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, m := range observe.Metrics {
		ch <- c.descs[m]
	}
}

// Collect reads every breaker of the Source and sends its series
// (prometheus.Collector). Breakers with the same name are reported once,
// and the scrape gets an error that names the name; so does a breaker
// whose name is not valid UTF-8, whose series are left out.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	err := observe.Read(c.src, c.tr, func(s observe.Sample) {
		s.Each(func(m *observe.Metric, labels []string, v observe.Point) {
			typ, val := prometheus.GaugeValue, float64(v.Count)
			if m.Counter {
				typ = prometheus.CounterValue
			}
			if m.Ratio {
				val = v.Ratio
			}
			lv := make([]string, 0, 1+len(labels))
			pm, err := prometheus.NewConstMetric(c.descs[m], typ, val, append(append(lv, s.Name), labels...)...)
			if err != nil {
				// A name that is not valid UTF-8: the scrape says which.
				pm = prometheus.NewInvalidMetric(c.descs[m], fmt.Errorf("prombreaker: breaker %q: %w", s.Name, err))
			}
			ch <- pm
		})
	})
	if err != nil {
		ch <- prometheus.NewInvalidMetric(c.first, err)
	}
}
