package observe

import (
	"strings"

	"github.com/casbreaker/casbreaker/core"
)

// Metric is one of the series families every exporter reports, by the
// names of Resilience4j's Micrometer metrics where it has one. An exporter
// spells Name its own way (prombreaker: "casbreaker_" + Name, "_total"
// for a counter; otelbreaker: "casbreaker." + Name) and adds the breaker
// label to Labels.
type Metric struct {
	// Name is the family's name without a namespace or suffix, in
	// lower case with underscores: "state", "calls" and the rest.
	Name string
	// Help says what a series of the family counts, for a scrape's HELP.
	Help string
	// Counter is true for a cumulative count since the breaker was made
	// (reported only by a breaker with Config.CollectMetrics, except
	// transitions counted by a Transitions listener and the fleet
	// families); otherwise the family is a gauge, read from the breaker's
	// state at each read.
	Counter bool
	// Ratio is true for a value in 0..1 (Point.Ratio); otherwise the
	// values are whole numbers (Point.Count).
	Ratio bool
	// Unit is the unit as UCUM writes it: "{call}" and the like for
	// counts, "1" for ratios and the 0/1 state.
	Unit string
	// Labels are the label names besides breaker, in the order of
	// Sample.Each's values.
	Labels []string
}

// The metric set, in the order Metrics lists it. Exporters make their
// instruments from Metrics() and tell the families apart by pointer.
var (
	metricState = &Metric{Name: "state", Unit: "1", Labels: []string{"state"},
		Help: "1 for the state the breaker is in, 0 for each other state"}
	metricCalls = &Metric{Name: "calls", Counter: true, Unit: "{call}", Labels: []string{"kind"},
		Help: "outcomes the breaker acted on, by kind: successful, failed (retry-after hints included) or ignored"}
	metricPermittedCalls = &Metric{Name: "permitted_calls", Counter: true, Unit: "{call}",
		Help: "permits granted, half-open probes included"}
	metricNotPermittedCalls = &Metric{Name: "not_permitted_calls", Counter: true, Unit: "{call}", Labels: []string{"reason"},
		Help: "calls the breaker refused, by reason: open, half_open_full, forced_open or ramping_up"}
	metricSlowCalls = &Metric{Name: "slow_calls", Counter: true, Unit: "{call}",
		Help: "counted calls slower than the slow-call duration threshold"}
	metricDroppedOutcomes = &Metric{Name: "dropped_outcomes", Counter: true, Unit: "{outcome}",
		Help: "outcomes that changed nothing: stale permits of a passed generation, outcomes while disabled, probe outcomes with no probe in flight"}
	metricCappedTrips = &Metric{Name: "capped_trips", Counter: true, Unit: "{trip}",
		Help: "trips refused by a cap on open breakers (core.OpenGate, a registry's MaxOpenPercent): the breaker stayed closed"}
	metricTransitions = &Metric{Name: "transitions", Counter: true, Unit: "{transition}", Labels: []string{"from", "to", "reason"},
		Help: "committed state transitions, by from, to and reason (reason empty when not counted by reason)"}
	metricBufferedCalls = &Metric{Name: "buffered_calls", Unit: "{call}", Labels: []string{"kind"},
		Help: "calls in the sliding window now, by kind: successful or failed"}
	metricBufferedSlowCalls = &Metric{Name: "buffered_slow_calls", Unit: "{call}", Labels: []string{"kind"},
		Help: "slow calls in the sliding window now, by kind: successful or failed"}
	metricFailureRatio = &Metric{Name: "failure_ratio", Ratio: true, Unit: "1",
		Help: "failed over all calls in the sliding window, 0..1; absent while the window holds no call"}
	metricSlowCallRatio = &Metric{Name: "slow_call_ratio", Ratio: true, Unit: "1",
		Help: "slow over all calls in the sliding window, 0..1; absent while the window holds no call"}
)

// metricDuplicateBreakers is DuplicateBreakers' family.
var metricDuplicateBreakers = &Metric{Name: "duplicate_breakers", Unit: "{breaker}",
	Help: "breakers left out of the read because an earlier breaker has the same name (the breaker label): their series would be indistinguishable from its"}

// metricSet is the metric set, in Metrics' order.
var metricSet = [...]*Metric{metricState, metricCalls, metricPermittedCalls, metricNotPermittedCalls, metricSlowCalls, metricDroppedOutcomes,
	metricCappedTrips, metricTransitions, metricBufferedCalls, metricBufferedSlowCalls, metricFailureRatio, metricSlowCallRatio, metricDuplicateBreakers}

// DuplicateBreakers returns the family of breakers a read left out because
// an earlier breaker of the Source has the same name: one series per
// shared name (the breaker label), whose value is the number left out,
// from a read's DuplicateNamesError. It is a gauge; absent while no two
// breakers share a name. Sample.Each never reports it: the exporters do,
// after the read. It is the same pointer on every call, and one of
// Metrics'.
func DuplicateBreakers() *Metric { return metricDuplicateBreakers }

// Metrics returns the metric set, for an exporter to make its instruments
// or descriptors from: a new slice on every call, holding the same
// pointers, which Sample.Each passes back so that an exporter tells the
// families apart by pointer. The Metrics they point to are shared by every
// exporter of the process: read them, never modify them. The families of
// a fleet member's figures are not among them: FleetMetrics has those.
func Metrics() []*Metric { return append([]*Metric(nil), metricSet[:]...) }

// Point is one value of a series: Count for a whole-number metric, Ratio
// for a Metric.Ratio one.
type Point struct {
	Count uint64
	Ratio float64
}

// Each calls fn with every series of s: its metric, its label values
// besides the breaker's name (in the order of Metric.Labels; fn must not
// keep the slice) and its value. The state family has a series per state;
// the counter families only when s.Collecting (transitions also with a
// Transitions listener, capped trips only when s.Capped); the window families only when s.Windowed, the
// ratios only while the window holds a call; the fleet families
// (FleetMetrics) only when s.Fleet, after the others.
func (s Sample) Each(fn func(m *Metric, labels []string, v Point)) {
	var lv [3]string
	one := func(m *Metric, v Point, labels ...string) {
		fn(m, append(lv[:0], labels...), v)
	}
	for st := range core.State(core.NumStates) {
		var v uint64
		if st == s.State {
			v = 1
		}
		one(metricState, Point{Count: v}, StateLabel(st))
	}
	if s.Collecting {
		m := &s.Metrics
		one(metricCalls, Point{Count: m.Successes}, "successful")
		one(metricCalls, Point{Count: m.Failures}, "failed")
		one(metricCalls, Point{Count: m.Ignored}, "ignored")
		one(metricPermittedCalls, Point{Count: m.Admitted})
		one(metricNotPermittedCalls, Point{Count: m.RejectedOpen}, "open")
		one(metricNotPermittedCalls, Point{Count: m.RejectedHalfOpenFull}, "half_open_full")
		one(metricNotPermittedCalls, Point{Count: m.RejectedForcedOpen}, "forced_open")
		one(metricNotPermittedCalls, Point{Count: m.RejectedRampUp}, "ramping_up")
		one(metricSlowCalls, Point{Count: m.SlowCalls})
		one(metricDroppedOutcomes, Point{Count: m.Dropped})
		if s.Capped {
			one(metricCappedTrips, Point{Count: m.Capped})
		}
	}
	for _, t := range s.Transitions {
		one(metricTransitions, Point{Count: t.Count}, StateLabel(t.From), StateLabel(t.To), ReasonLabel(t.Reason))
	}
	if s.Windowed {
		c := &s.Counts
		one(metricBufferedCalls, Point{Count: c.Calls - c.Failures}, "successful")
		one(metricBufferedCalls, Point{Count: c.Failures}, "failed")
		one(metricBufferedSlowCalls, Point{Count: c.SlowCalls - c.SlowFailures}, "successful")
		one(metricBufferedSlowCalls, Point{Count: c.SlowFailures}, "failed")
		if r, ok := s.FailureRatio(); ok {
			one(metricFailureRatio, Point{Ratio: r})
		}
		if r, ok := s.SlowCallRatio(); ok {
			one(metricSlowCallRatio, Point{Ratio: r})
		}
	}
	if s.Fleet {
		s.eachFleet(one)
	}
}

// StateLabel is a state as a label value: its String with underscores for
// dashes ("half_open", "forced_open", "metrics_only"), as Resilience4j's
// metrics spell them.
func StateLabel(s core.State) string {
	if int(s) < len(stateLabels) {
		return stateLabels[s]
	}
	return underscore(s.String())
}

// ReasonLabel is a reason as a label value: its String with underscores
// for dashes ("failure_rate", "open_duration_elapsed"), and "" for the
// zero Reason (transitions not told apart by reason).
func ReasonLabel(r core.Reason) string {
	if r == 0 {
		return ""
	}
	if int(r) < len(reasonLabels) {
		return reasonLabels[r]
	}
	return underscore(r.String())
}

var stateLabels, reasonLabels = labels(core.NumStates, func(i int) string { return core.State(i).String() }),
	labels(int(core.ReasonReconfigured)+1, func(i int) string { return core.Reason(i).String() })

func labels(n int, name func(int) string) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = underscore(name(i))
	}
	return out
}

func underscore(s string) string { return strings.ReplaceAll(s, "-", "_") }
