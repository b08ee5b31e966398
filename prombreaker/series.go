package prombreaker

import (
	"cmp"
	"slices"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/casbreaker/casbreaker/observe"
)

// A scrape sends a series per breaker and family state (a few million
// for 100,000 breakers), so a series costs what client_golang's own
// gathering costs and little more: it is a prometheus.Metric whose Write
// fills the dto.Metric with label pairs made once per breaker (the
// breaker label) or once per Collector (the families' own label values
// and the constant labels), already in the order client_golang sorts
// them by, and the series are sent in the order a gathered family is
// sorted by, so that its sort has nothing to move.

// family is one family of observe.Metrics() or observe.FleetMetrics() as
// a Collector reports it.
type family struct {
	index int // in observe.Metrics() then observe.FleetMetrics(): the order of one breaker's families
	rank  int // in the Collector's families sorted by name
	desc  *prometheus.Desc
	// name, help and typ are the gathered family's (desc's, which does
	// not give them back).
	name, help string
	typ        dto.MetricType
	// counter and ratio are the Metric's Counter and Ratio.
	counter, ratio bool
	// names are the family's labels besides breaker (Metric.Labels).
	names []string
	// layout is the family's label pairs in client_golang's order, by
	// name: a constant label's pair, or nil where a variable label goes.
	layout []*dto.LabelPair
	// slots are where in layout the variable labels go: breaker's, then
	// those of names.
	slots []int
}

// newFamily returns the family of m, the index-th of observe.Metrics()
// followed by observe.FleetMetrics(), named name, with help text help;
// the error is that of its descriptor, a bad name or constant label.
func newFamily(index int, m *observe.Metric, name, help string, constLabels prometheus.Labels) (*family, error) {
	d := prometheus.NewDesc(name, help, append([]string{breakerLabel}, m.Labels...), constLabels)
	// client_golang places the labels: a constant metric of d has them
	// where Write puts them (and NewConstMetric reports d's error).
	pm, err := prometheus.NewConstMetric(d, prometheus.GaugeValue, 0, make([]string, 1+len(m.Labels))...)
	if err != nil {
		return nil, err
	}
	var out dto.Metric
	_ = pm.Write(&out) // a constant gauge's Write has no error to return
	f := &family{index: index, desc: d, name: name, help: help, typ: dto.MetricType_GAUGE,
		counter: m.Counter, ratio: m.Ratio, names: m.Labels,
		layout: make([]*dto.LabelPair, len(out.Label)), slots: make([]int, 1+len(m.Labels))}
	if m.Counter {
		f.typ = dto.MetricType_COUNTER
	}
	variable := append([]string{breakerLabel}, m.Labels...)
	for i, lp := range out.Label {
		if k := slices.Index(variable, lp.GetName()); k >= 0 {
			f.slots[k] = i
		} else {
			f.layout[i] = lp
		}
	}
	return f, nil
}

// breakerLabel is the name of the label that names the breaker; its pairs
// point at it.
var breakerLabel = "breaker"

// newBreakerPair returns the breaker label's pair for value, in one
// allocation.
func newBreakerPair(value string) *dto.LabelPair {
	p := &struct {
		lp    dto.LabelPair
		value string
	}{value: value}
	p.lp.Name, p.lp.Value = &breakerLabel, &p.value
	return &p.lp
}

// labelPairs are the pairs of the families' own labels, made at their
// first use and shared by every series and scrape after it: their
// values are the few Sample.Each gives (states, kinds, reasons).
type labelPairs struct {
	mu    sync.Mutex
	pairs map[[2]string]*dto.LabelPair
}

func (p *labelPairs) get(name, value string) *dto.LabelPair {
	p.mu.Lock()
	defer p.mu.Unlock()
	k := [2]string{name, value}
	lp := p.pairs[k]
	if lp == nil {
		if p.pairs == nil {
			p.pairs = make(map[[2]string]*dto.LabelPair)
		}
		n, v := name, value // the pair's own: the parameters stay on the stack
		lp = &dto.LabelPair{Name: &n, Value: &v}
		p.pairs[k] = lp
	}
	return lp
}

// series is one series of a scrape (prometheus.Metric). Its labels and
// value are set before it is sent and never change after.
type series struct {
	f      *family
	labels []*dto.LabelPair // in layout's order
	// The value: gauge, or counter if f.counter.
	gauge   *dto.Gauge
	counter *dto.Counter
}

var _ prometheus.Metric = (*series)(nil)

func (s *series) Desc() *prometheus.Desc { return s.f.desc }

// Write fills out with the series' pairs and value, which out shares: a
// dto.Metric is immutable once written, by client_golang's contract.
func (s *series) Write(out *dto.Metric) error {
	s.fill(out)
	return nil
}

// fill fills m (a Collector's Write, or a dto.Metric of a family the
// Gatherer builds) with the series.
func (s *series) fill(m *dto.Metric) {
	m.Label, m.Gauge, m.Counter = s.labels, s.gauge, s.counter
}

// smallValues is how many whole values, from 0, a scrape shares one
// dto.Gauge or dto.Counter for among its series: a state's series are 0
// or 1, and a window's counts are mostly small.
const smallValues = 64

// values are the dto.Gauge and dto.Counter values of one scrape's
// series, each small value's shared, the others taken from blocks.
type values struct {
	gauges   valueCells[dto.Gauge]
	counters valueCells[dto.Counter]
}

// gauge returns a gauge of value v, and of count if v is whole.
func (vs *values) gauge(v float64, whole bool, count uint64) *dto.Gauge {
	return vs.gauges.get(v, whole, count, func(g *dto.Gauge) **float64 { return &g.Value })
}

// counter returns a counter of count.
func (vs *values) counter(count uint64) *dto.Counter {
	return vs.counters.get(float64(count), true, count, func(c *dto.Counter) **float64 { return &c.Value })
}

// valueCells are the values of one type, T a dto.Gauge or dto.Counter.
type valueCells[T any] struct {
	small [smallValues]*T
	block []valueCell[T]
}

// valueCell is a value and the float64 its Value field points at.
type valueCell[T any] struct {
	m T
	v float64
}

// get returns a T whose Value field, which field gives, points at v; of
// count if v is whole, shared if that is below smallValues.
func (vc *valueCells[T]) get(v float64, whole bool, count uint64, field func(*T) **float64) *T {
	small := whole && count < smallValues
	if small && vc.small[count] != nil {
		return vc.small[count]
	}
	if len(vc.block) == cap(vc.block) {
		vc.block = make([]valueCell[T], 0, valuesBlock)
	}
	vc.block = vc.block[:len(vc.block)+1]
	cell := &vc.block[len(vc.block)-1]
	cell.v = v
	*field(&cell.m) = &cell.v
	if small {
		vc.small[count] = &cell.m
	}
	return &cell.m
}

// compareSeries orders one breaker's series as a gathered family is
// sorted (by label values, in layout's order), families apart.
func compareSeries(a, b series) int {
	if c := cmp.Compare(a.f.index, b.f.index); c != 0 {
		return c
	}
	for i, lp := range a.labels {
		if c := strings.Compare(lp.GetValue(), b.labels[i].GetValue()); c != 0 {
			return c
		}
	}
	return 0
}

// Sizes of the blocks a scrape takes its series and label pairs from, so
// that it allocates a few large blocks rather than one small object per
// series.
const (
	seriesBlock = 4096
	labelsBlock = 4 * seriesBlock
	valuesBlock = 1024
)

// scrape holds the series of one scrape until every breaker is read, so
// that it can hand them over in order.
type scrape struct {
	block    []series // the current breaker's series end it
	start    int      // where the current breaker's series begin in block
	lblock   []*dto.LabelPair
	values   values
	breakers []breakerSeries
	n        int // series in breakers
}

// breakerSeries are the series of one breaker, ordered.
type breakerSeries struct {
	name   string
	series []series
}

// labels returns n label pairs to fill.
func (sc *scrape) labels(n int) []*dto.LabelPair {
	if len(sc.lblock)+n > cap(sc.lblock) {
		sc.lblock = make([]*dto.LabelPair, 0, max(labelsBlock, n))
	}
	l := len(sc.lblock)
	sc.lblock = sc.lblock[:l+n]
	return sc.lblock[l : l+n : l+n]
}

// add adds a series of the current breaker.
func (sc *scrape) add(s series) {
	if len(sc.block) == cap(sc.block) {
		mine := sc.block[sc.start:]
		sc.block = make([]series, len(mine), max(seriesBlock, 2*len(mine)))
		copy(sc.block, mine)
		sc.start = 0
	}
	sc.block = append(sc.block, s)
}

// endBreaker ends the series of the breaker named name.
func (sc *scrape) endBreaker(name string) {
	mine := sc.block[sc.start:len(sc.block):len(sc.block)]
	slices.SortFunc(mine, compareSeries)
	sc.breakers = append(sc.breakers, breakerSeries{name: name, series: mine})
	sc.start = len(sc.block)
	sc.n += len(mine)
}

// sort orders the breakers by name: each family's series are then in the
// order a gathered family is sorted by.
func (sc *scrape) sort() {
	slices.SortFunc(sc.breakers, func(a, b breakerSeries) int { return strings.Compare(a.name, b.name) })
}

// send sends every series, in order.
func (sc *scrape) send(ch chan<- prometheus.Metric) {
	for _, b := range sc.breakers {
		for i := range b.series {
			ch <- &b.series[i]
		}
	}
}
