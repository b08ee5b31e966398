package prombreaker_test

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/casbreaker/casbreaker/core"
	"github.com/casbreaker/casbreaker/internal/observetest"
	"github.com/casbreaker/casbreaker/observe"
	"github.com/casbreaker/casbreaker/prombreaker"
	"github.com/casbreaker/casbreaker/registry"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// tripped returns a collector over observetest.Tripped's breaker, "api",
// with o, counting transitions by reason if listen.
func tripped(t *testing.T, o prombreaker.Options, listen bool) *prombreaker.Collector {
	t.Helper()
	var tr observe.Transitions
	var listener func(core.Transition)
	if listen {
		listener, o.Transitions = tr.Listener(nil), &tr
	}
	b, err := observetest.Tripped(listener)
	require.NoError(t, err)
	src, err := observe.Breakers(b)
	require.NoError(t, err)
	c, err := prombreaker.New(src, o)
	require.NoError(t, err)
	return c
}

// forEachPath runs f on each way to serve c's series: c registered in a
// pedantic registry, and c's Gatherer beside an empty one.
func forEachPath(t *testing.T, c *prombreaker.Collector, f func(t *testing.T, g prometheus.Gatherer)) {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	require.NoError(t, reg.Register(c))
	t.Run("collector", func(t *testing.T) { f(t, reg) })
	t.Run("gatherer", func(t *testing.T) { f(t, c.Gatherer(prometheus.NewPedanticRegistry())) })
}

func TestGatherAndCompare(t *testing.T) {
	c := tripped(t, prombreaker.Options{}, true)
	want := `
# HELP casbreaker_state 1 for the state the breaker is in, 0 for each other state.
# TYPE casbreaker_state gauge
casbreaker_state{breaker="api",state="closed"} 0
casbreaker_state{breaker="api",state="disabled"} 0
casbreaker_state{breaker="api",state="forced_open"} 0
casbreaker_state{breaker="api",state="half_open"} 0
casbreaker_state{breaker="api",state="metrics_only"} 0
casbreaker_state{breaker="api",state="open"} 1
# HELP casbreaker_calls_total outcomes the breaker acted on, by kind: successful, failed (retry-after hints included) or ignored.
# TYPE casbreaker_calls_total counter
casbreaker_calls_total{breaker="api",kind="failed"} 1
casbreaker_calls_total{breaker="api",kind="ignored"} 0
casbreaker_calls_total{breaker="api",kind="successful"} 1
# HELP casbreaker_not_permitted_calls_total calls the breaker refused, by reason: open, half_open_full, forced_open or ramping_up.
# TYPE casbreaker_not_permitted_calls_total counter
casbreaker_not_permitted_calls_total{breaker="api",reason="forced_open"} 0
casbreaker_not_permitted_calls_total{breaker="api",reason="half_open_full"} 0
casbreaker_not_permitted_calls_total{breaker="api",reason="open"} 1
casbreaker_not_permitted_calls_total{breaker="api",reason="ramping_up"} 0
# HELP casbreaker_transitions_total committed state transitions, by from, to and reason (reason empty when not counted by reason).
# TYPE casbreaker_transitions_total counter
casbreaker_transitions_total{breaker="api",from="closed",reason="failure_rate",to="open"} 1
`
	forEachPath(t, c, func(t *testing.T, g prometheus.Gatherer) {
		assert.NoError(t, testutil.GatherAndCompare(g, strings.NewReader(want),
			"casbreaker_state", "casbreaker_calls_total", "casbreaker_not_permitted_calls_total", "casbreaker_transitions_total",
			"casbreaker_failure_ratio"), "an open breaker's fresh window has no failure ratio")
		// Every family but the ratios: an open breaker's window holds no call.
		n, err := testutil.GatherAndCount(g)
		require.NoError(t, err)
		assert.Equal(t, 6+3+1+4+1+1+1+2+2, n)
	})
}

func TestTransitionsWithoutAListenerHaveNoReason(t *testing.T) {
	c := tripped(t, prombreaker.Options{}, false)
	want := `
# HELP casbreaker_transitions_total committed state transitions, by from, to and reason (reason empty when not counted by reason).
# TYPE casbreaker_transitions_total counter
casbreaker_transitions_total{breaker="api",from="closed",reason="",to="open"} 1
`
	forEachPath(t, c, func(t *testing.T, g prometheus.Gatherer) {
		assert.NoError(t, testutil.GatherAndCompare(g, strings.NewReader(want), "casbreaker_transitions_total"))
	})
}

func TestNamespaceAndConstLabels(t *testing.T) {
	c := tripped(t, prombreaker.Options{Namespace: "svc_breaker", ConstLabels: prometheus.Labels{"service": "checkout"}}, true)
	want := `
# HELP svc_breaker_permitted_calls_total permits granted, half-open probes included.
# TYPE svc_breaker_permitted_calls_total counter
svc_breaker_permitted_calls_total{breaker="api",service="checkout"} 2
`
	forEachPath(t, c, func(t *testing.T, g prometheus.Gatherer) {
		assert.NoError(t, testutil.GatherAndCompare(g, strings.NewReader(want), "svc_breaker_permitted_calls_total"))
	})
}

func TestLint(t *testing.T) {
	forEachPath(t, tripped(t, prombreaker.Options{}, true), func(t *testing.T, g prometheus.Gatherer) {
		problems, err := testutil.GatherAndLint(g)
		require.NoError(t, err)
		assert.Empty(t, problems)
	})
}

// A pedantic registry checks that every collected series was described
// and is consistent with its family; prometheus.Gatherers checks the
// Gatherer's series as it checks any gatherer's.
func TestPedanticRegistry(t *testing.T) {
	forEachPath(t, tripped(t, prombreaker.Options{}, true), func(t *testing.T, g prometheus.Gatherer) {
		mfs, err := prometheus.Gatherers{g}.Gather()
		require.NoError(t, err)
		assert.Len(t, mfs, len(observe.Metrics())-4, "all families but the two ratios, the duplicates and the capped trips (no cap)")
	})
}

func TestWindowSeries(t *testing.T) {
	clock := core.NewManualClock(0)
	b, err := core.New(core.Config{Name: "db", WindowSize: 10, FailureRateThreshold: 90,
		SlowCallDurationThreshold: time.Second, SlowCallRateThreshold: 90, Clock: clock})
	require.NoError(t, err)
	require.NoError(t, observetest.Call(b, observetest.ErrDown))
	p, err := b.Allow()
	require.NoError(t, err)
	clock.Advance(2 * time.Second)
	b.Done(p, nil) // slow
	require.NoError(t, observetest.Call(b, nil))
	require.NoError(t, observetest.Call(b, nil))
	src, err := observe.Breakers(b)
	require.NoError(t, err)
	c, err := prombreaker.New(src, prombreaker.Options{})
	require.NoError(t, err)
	want := `
# HELP casbreaker_buffered_calls calls in the sliding window now, by kind: successful or failed.
# TYPE casbreaker_buffered_calls gauge
casbreaker_buffered_calls{breaker="db",kind="failed"} 1
casbreaker_buffered_calls{breaker="db",kind="successful"} 3
# HELP casbreaker_buffered_slow_calls slow calls in the sliding window now, by kind: successful or failed.
# TYPE casbreaker_buffered_slow_calls gauge
casbreaker_buffered_slow_calls{breaker="db",kind="failed"} 0
casbreaker_buffered_slow_calls{breaker="db",kind="successful"} 1
# HELP casbreaker_failure_ratio failed over all calls in the sliding window, 0..1; absent while the window holds no call.
# TYPE casbreaker_failure_ratio gauge
casbreaker_failure_ratio{breaker="db"} 0.25
# HELP casbreaker_slow_call_ratio slow over all calls in the sliding window, 0..1; absent while the window holds no call.
# TYPE casbreaker_slow_call_ratio gauge
casbreaker_slow_call_ratio{breaker="db"} 0.25
`
	forEachPath(t, c, func(t *testing.T, g prometheus.Gatherer) {
		assert.NoError(t, testutil.GatherAndCompare(g, strings.NewReader(want),
			"casbreaker_buffered_calls", "casbreaker_buffered_slow_calls", "casbreaker_failure_ratio", "casbreaker_slow_call_ratio"))
		n, err := testutil.GatherAndCount(g, "casbreaker_calls_total")
		require.NoError(t, err)
		assert.Equal(t, 0, n, "no CollectMetrics: no counters")
	})
}

// Values around those a scrape shares among its series (the whole
// numbers below 64) are each their own: a gauge and a counter of 63, 64
// and 65, and ratios.
func TestValuesAroundTheSharedOnes(t *testing.T) {
	var bs []observe.Breaker
	for _, calls := range []struct {
		name              string
		failed, succeeded int
	}{{"a", 0, 64}, {"b", 63, 65}} {
		b, err := core.New(core.Config{Name: calls.name, WindowSize: 200, FailureRateThreshold: 100, CollectMetrics: true})
		require.NoError(t, err)
		for range calls.failed {
			require.NoError(t, observetest.Call(b, observetest.ErrDown))
		}
		for range calls.succeeded {
			require.NoError(t, observetest.Call(b, nil))
		}
		bs = append(bs, b)
	}
	src, err := observe.Breakers(bs...)
	require.NoError(t, err)
	c, err := prombreaker.New(src, prombreaker.Options{})
	require.NoError(t, err)
	want := `
# HELP casbreaker_buffered_calls calls in the sliding window now, by kind: successful or failed.
# TYPE casbreaker_buffered_calls gauge
casbreaker_buffered_calls{breaker="a",kind="failed"} 0
casbreaker_buffered_calls{breaker="a",kind="successful"} 64
casbreaker_buffered_calls{breaker="b",kind="failed"} 63
casbreaker_buffered_calls{breaker="b",kind="successful"} 65
# HELP casbreaker_calls_total outcomes the breaker acted on, by kind: successful, failed (retry-after hints included) or ignored.
# TYPE casbreaker_calls_total counter
casbreaker_calls_total{breaker="a",kind="failed"} 0
casbreaker_calls_total{breaker="a",kind="ignored"} 0
casbreaker_calls_total{breaker="a",kind="successful"} 64
casbreaker_calls_total{breaker="b",kind="failed"} 63
casbreaker_calls_total{breaker="b",kind="ignored"} 0
casbreaker_calls_total{breaker="b",kind="successful"} 65
# HELP casbreaker_failure_ratio failed over all calls in the sliding window, 0..1; absent while the window holds no call.
# TYPE casbreaker_failure_ratio gauge
casbreaker_failure_ratio{breaker="a"} 0
casbreaker_failure_ratio{breaker="b"} 0.4921875
# HELP casbreaker_permitted_calls_total permits granted, half-open probes included.
# TYPE casbreaker_permitted_calls_total counter
casbreaker_permitted_calls_total{breaker="a"} 64
casbreaker_permitted_calls_total{breaker="b"} 128
`
	forEachPath(t, c, func(t *testing.T, g prometheus.Gatherer) {
		assert.NoError(t, testutil.GatherAndCompare(g, strings.NewReader(want),
			"casbreaker_buffered_calls", "casbreaker_calls_total", "casbreaker_failure_ratio", "casbreaker_permitted_calls_total"))
	})
}

func TestBadOptions(t *testing.T) {
	_, err := prombreaker.New(nil, prombreaker.Options{})
	assert.ErrorIs(t, err, core.ErrInvalidArgument)
	assert.ErrorContains(t, err, "the Source is nil")
	src, err := observe.Breakers()
	require.NoError(t, err)
	_, err = prombreaker.New(src, prombreaker.Options{Namespace: "bad\xff"})
	assert.ErrorIs(t, err, core.ErrInvalidArgument)
	assert.ErrorContains(t, err, `"bad\xff_state" is not a valid metric name`)
	_, err = prombreaker.New(src, prombreaker.Options{ConstLabels: prometheus.Labels{"": "x"}})
	assert.ErrorIs(t, err, core.ErrInvalidArgument)
	_, err = prombreaker.New(src, prombreaker.Options{ConstLabels: prometheus.Labels{"service": "bad\xff"}})
	assert.ErrorIs(t, err, core.ErrInvalidArgument)
	_, err = prombreaker.New(src, prombreaker.Options{ConstLabels: prometheus.Labels{"breaker": "x"}})
	assert.ErrorIs(t, err, core.ErrInvalidArgument, "a constant label may not shadow a variable one")
}

func TestZeroCollector(t *testing.T) {
	var c prombreaker.Collector
	err := prometheus.NewRegistry().Register(&c)
	assert.ErrorContains(t, err, "make one with prombreaker.New")
	ch := make(chan prometheus.Metric, 1)
	c.Collect(ch)
	assert.Empty(t, ch)

	others := prometheus.NewRegistry()
	others.MustRegister(prometheus.NewGauge(prometheus.GaugeOpts{Name: "app_up", Help: "1."}))
	mfs, err := c.Gatherer(others).Gather()
	assert.ErrorContains(t, err, "make one with prombreaker.New")
	require.Len(t, mfs, 1, "the others' families are gathered")
	assert.Equal(t, "app_up", mfs[0].GetName())

	// A nil *Collector (a New whose error went unchecked) is a zero one.
	var none *prombreaker.Collector
	err = prometheus.NewRegistry().Register(none)
	assert.ErrorContains(t, err, "make one with prombreaker.New")
	none.Collect(ch)
	assert.Empty(t, ch)
	_, err = none.Gatherer(nil).Gather()
	assert.ErrorContains(t, err, "make one with prombreaker.New")
}

// serve serves reg's /metrics on a loopback listener until the test ends.
func serve(t *testing.T, reg *prometheus.Registry) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorHandling: promhttp.HTTPErrorOnError}))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: time.Minute}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	t.Cleanup(func() {
		require.NoError(t, srv.Close())
		assert.ErrorIs(t, <-done, http.ErrServerClosed)
		http.DefaultClient.CloseIdleConnections()
	})
	return "http://" + ln.Addr().String() + "/metrics"
}

// serveRegistry serves the series of a registry made with o, whose
// transitions a Transitions listener counts by reason, on a loopback
// /metrics until the test ends, and returns the registry and the URL.
func serveRegistry(t *testing.T, o registry.Options[int]) (*registry.Registry[int], string) {
	t.Helper()
	var tr observe.Transitions
	o.Config.OnStateChange = tr.Listener(nil)
	breakers, err := registry.New(o)
	require.NoError(t, err)
	src, err := observe.Registry(breakers)
	require.NoError(t, err)
	c, err := prombreaker.New(src, prombreaker.Options{Transitions: &tr})
	require.NoError(t, err)
	reg := prometheus.NewRegistry()
	require.NoError(t, reg.Register(c))
	return breakers, serve(t, reg)
}

// scrape GETs url and parses the text exposition.
func scrape(t *testing.T, url string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	parser := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := parser.TextToMetricFamilies(resp.Body)
	require.NoError(t, err)
	return mfs
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// Scrapes over HTTP while calls run: every breaker is in exactly one
// state, and every counter only grows from one scrape to the next.
func TestScrapeOverHTTPWhileTrafficRuns(t *testing.T) {
	clock := core.NewManualClock(0)
	breakers, url := serveRegistry(t, registry.Options[int]{Config: core.Config{
		Name: "svc", WindowSize: 10, FailureRateThreshold: 30, MinimumNumberOfCalls: 5,
		OpenDuration: 5 * time.Millisecond, CollectMetrics: true, Clock: clock,
	}})

	// Key 0's calls always fail (observetest.Traffic): trip it before the traffic
	// starts, so that a transition is there to scrape whatever the
	// scheduler does.
	b0, err := breakers.Get(0)
	require.NoError(t, err)
	for range 5 {
		require.NoError(t, observetest.Call(b0, observetest.ErrDown))
	}
	stop := observetest.Traffic(breakers, 3, clock)
	last := map[string]float64{} // counter series -> value
	for range 20 {
		mfs := scrape(t, url)
		inState := map[string]float64{}
		for _, m := range mfs["casbreaker_state"].GetMetric() {
			inState[label(m, "breaker")] += m.GetGauge().GetValue()
		}
		for name, n := range inState {
			assert.Equal(t, 1.0, n, "breaker %s is in exactly one state", name)
		}
		assert.LessOrEqual(t, len(inState), 3)
		for name, mf := range mfs {
			if mf.GetType() != dto.MetricType_COUNTER {
				continue
			}
			for _, m := range mf.GetMetric() {
				key := name + fmt.Sprint(m.GetLabel())
				v := m.GetCounter().GetValue()
				assert.GreaterOrEqual(t, v, last[key], key)
				last[key] = v
			}
		}
		assert.NotEmpty(t, mfs["casbreaker_transitions_total"].GetMetric())
	}
	stop()
	mfs := scrape(t, url)
	var calls float64
	for _, m := range mfs["casbreaker_calls_total"].GetMetric() {
		if label(m, "breaker") == "svc/0" && label(m, "kind") == "failed" {
			calls += m.GetCounter().GetValue()
		}
	}
	assert.GreaterOrEqual(t, calls, 5.0)
}

// With more keys than MaxBreakers, a scrape after the traffic reports at
// most MaxBreakers breakers, transitions included.
func TestCardinalityIsBoundedByTheRegistry(t *testing.T) {
	clock := core.NewManualClock(0)
	breakers, url := serveRegistry(t, registry.Options[int]{Config: core.Config{
		Name: "svc", ConsecutiveFailures: 1, OpenDuration: time.Millisecond, CollectMetrics: true, Clock: clock,
	}, MaxBreakers: 4})
	stop := observetest.Traffic(breakers, 20, clock)
	for range 10 {
		scrape(t, url)
	}
	stop()
	scrape(t, url) // forgets the transitions of breakers evicted before it
	names := map[string]bool{}
	for _, mf := range scrape(t, url) {
		for _, m := range mf.GetMetric() {
			names[label(m, "breaker")] = true
		}
	}
	assert.LessOrEqual(t, len(names), 4, "%v", names)
}

func TestScrapeAndCompare(t *testing.T) {
	reg := prometheus.NewRegistry()
	require.NoError(t, reg.Register(tripped(t, prombreaker.Options{}, true)))
	want := `
# HELP casbreaker_dropped_outcomes_total outcomes that changed nothing: stale permits of a passed generation, outcomes while disabled, probe outcomes with no probe in flight.
# TYPE casbreaker_dropped_outcomes_total counter
casbreaker_dropped_outcomes_total{breaker="api"} 0
`
	assert.NoError(t, testutil.ScrapeAndCompare(serve(t, reg), strings.NewReader(want), "casbreaker_dropped_outcomes_total"))
}

// A registry with MaxOpenPercent: each breaker has a capped-trips series
// (a breaker without a cap has none), and the refused trips are closed ->
// closed transitions with reason capped.
func TestCappedTrips(t *testing.T) {
	breakers, url := serveRegistry(t, registry.Options[int]{Config: core.Config{
		Name: "svc", ConsecutiveFailures: 1, CollectMetrics: true, Clock: core.NewManualClock(0),
	}, MaxOpenPercent: 50})
	for k := range 4 {
		_, err := breakers.Get(k) // all four first: two may open
		require.NoError(t, err)
	}
	for k := range 4 {
		b, err := breakers.Get(k)
		require.NoError(t, err)
		p, err := b.Allow()
		require.NoError(t, err)
		b.Done(p, errors.New("down"))
	}
	want := `
# HELP casbreaker_capped_trips_total trips refused by a cap on open breakers (core.OpenGate, a registry's MaxOpenPercent): the breaker stayed closed.
# TYPE casbreaker_capped_trips_total counter
casbreaker_capped_trips_total{breaker="svc/0"} 0
casbreaker_capped_trips_total{breaker="svc/1"} 0
casbreaker_capped_trips_total{breaker="svc/2"} 1
casbreaker_capped_trips_total{breaker="svc/3"} 1
`
	assert.NoError(t, testutil.ScrapeAndCompare(url, strings.NewReader(want), "casbreaker_capped_trips_total"))
	capped := 0.0
	for _, m := range scrape(t, url)["casbreaker_transitions_total"].GetMetric() {
		if label(m, "reason") == "capped" {
			assert.Equal(t, []string{"closed", "closed"}, []string{label(m, "from"), label(m, "to")})
			capped += m.GetCounter().GetValue()
		}
	}
	assert.Equal(t, 2.0, capped)
	assert.NotContains(t, scrape(t, tripped0(t)), "casbreaker_capped_trips_total", "no cap, no series")
}

// tripped0 serves tripped's breaker, which has no cap, and returns the URL.
func tripped0(t *testing.T) string {
	reg := prometheus.NewRegistry()
	require.NoError(t, reg.Register(tripped(t, prombreaker.Options{}, false)))
	return serve(t, reg)
}

// A fleet member (observe.FleetMember) has the fleet families, described
// to a pedantic registry and clean for the linter; a breaker that is no
// member has none of them.
func TestFleetSeries(t *testing.T) {
	src, err := observetest.FleetAndPlain()
	require.NoError(t, err)
	c, err := prombreaker.New(src, prombreaker.Options{})
	require.NoError(t, err)
	want := `
# HELP casbreaker_fleet_mode 1 for the mode the fleet member runs in, 0 for the other: fleet (it shares the fleet's open state and probe budget) or local (its last store call failed: a plain local breaker).
# TYPE casbreaker_fleet_mode gauge
casbreaker_fleet_mode{breaker="pay",mode="fleet"} 0
casbreaker_fleet_mode{breaker="pay",mode="local"} 1
# HELP casbreaker_fleet_store_errors_total store calls of the fleet member that failed or timed out.
# TYPE casbreaker_fleet_store_errors_total counter
casbreaker_fleet_store_errors_total{breaker="pay"} 1
# HELP casbreaker_fleet_published_trips_total trips of the fleet member's breaker that the store recorded.
# TYPE casbreaker_fleet_published_trips_total counter
casbreaker_fleet_published_trips_total{breaker="pay"} 2
# HELP casbreaker_fleet_adoptions_total shared states the fleet member adopted, by state: open (a quorum's trip or the fleet's re-open) or closed (the fleet's close).
# TYPE casbreaker_fleet_adoptions_total counter
casbreaker_fleet_adoptions_total{breaker="pay",state="closed"} 4
casbreaker_fleet_adoptions_total{breaker="pay",state="open"} 3
# HELP casbreaker_fleet_leases_total half-open probes of a fleet open period, by result: granted a lease by the store, or refused without one (with a wait).
# TYPE casbreaker_fleet_leases_total counter
casbreaker_fleet_leases_total{breaker="pay",result="granted"} 5
casbreaker_fleet_leases_total{breaker="pay",result="refused"} 6
# HELP casbreaker_fleet_dropped_reports_total probe outcomes the fleet member could not report to the store: their leases run out after their time-to-live.
# TYPE casbreaker_fleet_dropped_reports_total counter
casbreaker_fleet_dropped_reports_total{breaker="pay"} 7
`
	var names []string
	for _, m := range observe.FleetMetrics() {
		name := "casbreaker_" + m.Name
		if m.Counter {
			name += "_total"
		}
		names = append(names, name)
	}
	forEachPath(t, c, func(t *testing.T, g prometheus.Gatherer) {
		assert.NoError(t, testutil.GatherAndCompare(g, strings.NewReader(want), names...))
		problems, err := testutil.GatherAndLint(g)
		require.NoError(t, err)
		assert.Empty(t, problems)
	})
}
