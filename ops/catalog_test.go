package ops

import (
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/casbreaker/casbreaker/core"
	"github.com/casbreaker/casbreaker/observe"
	"github.com/casbreaker/casbreaker/prombreaker"
)

// A catalog is what a query may select: for each series name, its label
// names, each with the values it takes, or nil for a label whose values
// are open (a breaker's name, a target's job and instance).
type catalog map[string]map[string]map[string]bool

// targetLabels are the labels Prometheus adds to every series it scrapes.
var targetLabels = []string{"job", "instance"}

// prometheusSeries are the series Prometheus makes itself, which a rule
// may watch: up is 0 for a target whose scrape failed.
var prometheusSeries = catalog{"up": {"job": nil, "instance": nil}}

// uncapped is an open gate that lets every trip open: a breaker with a
// gate has the capped-trips family.
type uncapped struct{}

func (uncapped) TryAcquire() bool { return true }
func (uncapped) Acquire()         {}
func (uncapped) Release()         {}

// exporterCatalog returns the series prombreaker emits, taken from the
// code: a Collector is registered, beside the error counter of promhttp's
// handler, over breakers made so that every family of observe.Metrics()
// shows up (a tripped breaker with an open gate for the transitions, the
// refusals and the capped trips, a window holding a call for the ratios,
// two breakers of one name for the duplicates), and the registry is
// gathered. The label values of the
// families whose values are an enumeration are those gathered, and for the
// transitions every state and reason observe spells; breaker, job and
// instance are open.
func exporterCatalog(t *testing.T) catalog {
	t.Helper()
	var tr observe.Transitions
	tripping, err := core.New(core.Config{Name: "pay/tripping", ConsecutiveFailures: 1, OpenDuration: time.Minute,
		CollectMetrics: true, OnStateChange: tr.Listener(nil), OpenGate: uncapped{}})
	if err != nil {
		t.Fatal(err)
	}
	window := core.Config{Name: "pay/windowed", WindowType: core.CountBased, WindowSize: 10, MinimumNumberOfCalls: 10,
		FailureRateThreshold: 50, SlowCallRateThreshold: 50, SlowCallDurationThreshold: time.Second,
		OpenDuration: time.Minute, CollectMetrics: true, OnStateChange: tr.Listener(nil)}
	windowed, err := core.New(window)
	if err != nil {
		t.Fatal(err)
	}
	twin, err := core.New(window)
	if err != nil {
		t.Fatal(err)
	}
	for range 2 { // the second call is refused: the breaker is open
		if p, err := tripping.Allow(); err == nil {
			tripping.Done(p, errors.New("down"))
		}
	}
	p, err := windowed.Allow()
	if err != nil {
		t.Fatal(err)
	}
	windowed.Done(p, nil)

	src, err := observe.Breakers(tripping, windowed, twin)
	if err != nil {
		t.Fatal(err)
	}
	c, err := prombreaker.New(src, prombreaker.Options{Transitions: &tr})
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(c)
	_ = promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}) // registers promhttp_metric_handler_errors_total
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}

	cat := catalog{}
	maps.Copy(cat, prometheusSeries)
	for _, mf := range mfs {
		labels := map[string]map[string]bool{}
		for _, l := range targetLabels {
			labels[l] = nil
		}
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if lp.GetName() == "breaker" {
					labels["breaker"] = nil
					continue
				}
				if labels[lp.GetName()] == nil {
					labels[lp.GetName()] = map[string]bool{}
				}
				labels[lp.GetName()][lp.GetValue()] = true
			}
		}
		cat[mf.GetName()] = labels
	}

	// Every family must be there, or a query of one missing would be
	// refused for the scenario's sake, not the exporter's.
	for _, m := range observe.Metrics() {
		name := "casbreaker_" + m.Name
		if m.Counter {
			name += "_total"
		}
		if cat[name] == nil {
			t.Fatalf("the scenario did not make the exporter emit %s: extend exporterCatalog", name)
		}
	}
	if cat["promhttp_metric_handler_errors_total"] == nil {
		t.Fatal("promhttp did not register promhttp_metric_handler_errors_total")
	}
	trans := cat["casbreaker_transitions_total"]
	for s := range core.State(core.NumStates) {
		trans["from"][observe.StateLabel(s)] = true
		trans["to"][observe.StateLabel(s)] = true
	}
	for r := core.Reason(1); r <= core.ReasonCapped; r++ {
		trans["reason"][observe.ReasonLabel(r)] = true
	}
	return cat
}

// TestCatalog pins what exporterCatalog gathers against the table of
// docs/observability.md, so that a scenario that stops making a family,
// or a label that changes, is seen here first.
func TestCatalog(t *testing.T) {
	cat := exporterCatalog(t)
	want := map[string]string{
		"casbreaker_state":                     "breaker instance job state",
		"casbreaker_calls_total":               "breaker instance job kind",
		"casbreaker_permitted_calls_total":     "breaker instance job",
		"casbreaker_not_permitted_calls_total": "breaker instance job reason",
		"casbreaker_slow_calls_total":          "breaker instance job",
		"casbreaker_dropped_outcomes_total":    "breaker instance job",
		"casbreaker_capped_trips_total":        "breaker instance job",
		"casbreaker_transitions_total":         "breaker from instance job reason to",
		"casbreaker_buffered_calls":            "breaker instance job kind",
		"casbreaker_buffered_slow_calls":       "breaker instance job kind",
		"casbreaker_failure_ratio":             "breaker instance job",
		"casbreaker_slow_call_ratio":           "breaker instance job",
		"casbreaker_duplicate_breakers":        "breaker instance job",
	}
	for name, labels := range want {
		if got := strings.Join(slices.Sorted(maps.Keys(cat[name])), " "); got != labels {
			t.Errorf("%s has labels %q, want %q", name, got, labels)
		}
	}
	if got := strings.Join(slices.Sorted(maps.Keys(cat["casbreaker_state"]["state"])), " "); got != "closed disabled forced_open half_open metrics_only open" {
		t.Errorf("casbreaker_state's states: %s", got)
	}
	if got := strings.Join(slices.Sorted(maps.Keys(cat["casbreaker_not_permitted_calls_total"]["reason"])), " "); got != "forced_open half_open_full open ramping_up" {
		t.Errorf("casbreaker_not_permitted_calls_total's reasons: %s", got)
	}
}
