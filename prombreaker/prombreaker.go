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
// casbreaker_failure_ratio and the rest of observe.Metrics(), and for a
// fleet member (observe.FleetMember) the families of observe.FleetMetrics(),
// casbreaker_fleet_mode{mode}, casbreaker_fleet_leases_total{result} and the
// rest; docs/observability.md has the table. A breaker adds up to 22 series
// and one per kind of transition it has made (a fleet member 9 more), so a
// registry's MaxBreakers bounds the label cardinality. For several registries (an
// HTTP and a gRPC one, say) give one Collector their observe.Join.
//
// A scrape through a registry costs what client_golang's own gathering
// of that many series costs, plus about 1 KB per breaker of 10 series. Served
// through the Collector's Gatherer instead, beside the registry and not
// registered in it,
//
//	http.Handle("/metrics", promhttp.HandlerFor(c.Gatherer(prometheus.DefaultGatherer), promhttp.HandlerOpts{}))
//
// the breakers' series skip that gathering and cost about half the CPU
// at 1,000 breakers and under two fifths at 10,000 and more: the path for
// many breakers. docs/observability.md has the figures.
package prombreaker

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

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
	// reason label. It may serve other Collectors and otelbreaker
	// registrations too, over the same breakers or others. Zero:
	// transitions come from each breaker's core.Metrics, with an empty
	// reason, and only with CollectMetrics.
	Transitions *observe.Transitions
}

// Collector is a prometheus.Collector over the breakers of an
// observe.Source. Make one with New: registering the zero value, or a
// nil *Collector, fails with an error that names New, and it collects
// nothing. For many
// breakers serve its Gatherer rather than registering it. Collect reads
// the breakers on the scraping goroutine and may run concurrently with
// itself and with the breakers' calls, whose hot paths it adds nothing
// to; it holds a scrape's series until every breaker is read, to send
// them in the order the gather sorts them by.
type Collector struct {
	reader   *observe.Reader
	families map[*observe.Metric]*family
	byName   []*family // families sorted by name
	pairs    labelPairs
	// breakers is how many breakers the latest scrape read: the next
	// one's first guess.
	breakers atomic.Int64
}

var _ prometheus.Collector = (*Collector)(nil)

var errZero = errors.New("prombreaker: the Collector is a zero value or nil: make one with prombreaker.New and check its error")

// zero reports whether c is a zero value or nil, which collects nothing.
func (c *Collector) zero() bool { return c == nil || c.reader == nil }

// New returns a Collector over src. It returns an error matching
// core.ErrInvalidArgument if src is nil, if Namespace or a constant
// label's name is not a valid Prometheus name, if a constant label's
// value is not valid UTF-8, or if a constant label is named like a
// variable one (breaker, state, ...).
func New(src observe.Source, o Options) (*Collector, error) {
	ns := o.Namespace
	if ns == "" {
		ns = "casbreaker"
	}
	c := &Collector{families: make(map[*observe.Metric]*family)}
	for i, m := range slices.Concat(observe.Metrics(), observe.FleetMetrics()) {
		name := prometheus.BuildFQName(ns, "", m.Name)
		if m.Counter {
			name += "_total"
		}
		f, err := newFamily(i, m, name, m.Help+".", o.ConstLabels)
		if err != nil {
			return nil, fmt.Errorf("%w: prombreaker.New: %v", core.ErrInvalidArgument, err)
		}
		c.families[m] = f
		c.byName = append(c.byName, f)
	}
	slices.SortFunc(c.byName, func(a, b *family) int { return strings.Compare(a.name, b.name) })
	for i, f := range c.byName {
		f.rank = i
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
	if c.zero() {
		ch <- prometheus.NewInvalidDesc(errZero)
		return
	}
	for _, f := range c.byName {
		ch <- f.desc
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
	if c.zero() {
		return
	}
	c.read().send(ch)
}

// read reads every breaker of the Source into a scrape, the series of
// the breakers left out as duplicates included, sorted.
func (c *Collector) read() *scrape {
	sc := &scrape{breakers: make([]breakerSeries, 0, c.breakers.Load())}
	err := c.reader.Read(func(s observe.Sample) {
		breaker := newBreakerPair(s.Name)
		s.Each(func(m *observe.Metric, labels []string, v observe.Point) {
			sc.add(c.series(c.families[m], breaker, labels, v, sc))
		})
		sc.endBreaker(s.Name)
	})
	c.breakers.Store(int64(len(sc.breakers)))
	for name, n := range observe.Duplicates(err) {
		sc.add(c.series(c.families[observe.DuplicateBreakers()], newBreakerPair(name), nil, observe.Point{Count: uint64(n)}, sc))
		sc.endBreaker(name)
	}
	sc.sort()
	return sc
}

// series returns one series of family f for the breaker whose label pair
// is breaker, with the family's other label values and value v.
func (c *Collector) series(f *family, breaker *dto.LabelPair, labels []string, v observe.Point, sc *scrape) series {
	lps := sc.labels(len(f.layout))
	copy(lps, f.layout)
	lps[f.slots[0]] = breaker
	for i, l := range labels {
		lps[f.slots[1+i]] = c.pairs.get(f.names[i], l)
	}
	s := series{f: f, labels: lps}
	if f.counter {
		s.counter = sc.values.counter(v.Count)
	} else if f.ratio {
		s.gauge = sc.values.gauge(v.Ratio, false, 0)
	} else {
		s.gauge = sc.values.gauge(float64(v.Count), true, v.Count)
	}
	return s
}
