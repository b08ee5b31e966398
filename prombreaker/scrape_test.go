package prombreaker_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/casbreaker/casbreaker/core"
	"github.com/casbreaker/casbreaker/internal/observetest"
	"github.com/casbreaker/casbreaker/observe"
	"github.com/casbreaker/casbreaker/prombreaker"
	"github.com/casbreaker/casbreaker/registry"
)

// scrapeWithGoCollector serves the series of src beside the Go runtime's
// with promhttp's default options (an error fails the scrape with 500),
// by each path of forEachPath, and calls check with the status and the
// body of one scrape.
func scrapeWithGoCollector(t *testing.T, src observe.Source, check func(t *testing.T, status int, body string)) {
	t.Helper()
	c, err := prombreaker.New(src, prombreaker.Options{})
	require.NoError(t, err)
	forEachPath(t, c, func(t *testing.T, g prometheus.Gatherer) {
		goRuntime := prometheus.NewRegistry()
		require.NoError(t, goRuntime.Register(collectors.NewGoCollector()))
		srv := httptest.NewServer(promhttp.HandlerFor(prometheus.Gatherers{g, goRuntime}, promhttp.HandlerOpts{}))
		defer srv.Close()
		resp, err := http.Get(srv.URL)
		require.NoError(t, err)
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		check(t, resp.StatusCode, string(body))
	})
}

// A breaker named with bytes that are not UTF-8 (a host parsed from
// "http://%ff.example/") is reported with those bytes escaped, and the
// scrape of everything else goes on.
func TestInvalidUTF8NameKeepsTheScrapeUp(t *testing.T) {
	b, err := core.New(core.Config{Name: "bad", ConsecutiveFailures: 1})
	require.NoError(t, err)
	bad := observetest.Named{Breaker: b, Name: "\xff.example"}
	good, err := core.New(core.Config{Name: "good.example", ConsecutiveFailures: 1})
	require.NoError(t, err)
	src, err := observe.Breakers(bad, good)
	require.NoError(t, err)
	scrapeWithGoCollector(t, src, func(t *testing.T, status int, body string) {
		require.Equal(t, http.StatusOK, status, body)
		assert.Contains(t, body, "go_goroutines ")
		assert.Contains(t, body, `casbreaker_state{breaker="good.example",state="closed"} 1`)
		assert.Contains(t, body, `casbreaker_state{breaker="\\xff.example",state="closed"} 1`)
	})
}

// Two breakers of one name: the first is reported, the scrape says how
// many were left out under that name, and the scrape of everything else
// goes on.
func TestDuplicateNamesKeepTheScrapeUp(t *testing.T) {
	a, err := core.New(core.Config{Name: "same", ConsecutiveFailures: 1})
	require.NoError(t, err)
	b, err := core.New(core.Config{Name: "same", ConsecutiveFailures: 1})
	require.NoError(t, err)
	require.NoError(t, b.ForceOpen(0))
	other, err := core.New(core.Config{Name: "other", ConsecutiveFailures: 1})
	require.NoError(t, err)
	src, err := observe.Breakers(a, b, other)
	require.NoError(t, err)
	scrapeWithGoCollector(t, src, func(t *testing.T, status int, body string) {
		require.Equal(t, http.StatusOK, status, body)
		assert.Contains(t, body, "go_goroutines ")
		assert.Contains(t, body, `casbreaker_state{breaker="same",state="closed"} 1`, "the first of the two")
		assert.Contains(t, body, `casbreaker_state{breaker="other",state="closed"} 1`)
		assert.Contains(t, body, `casbreaker_duplicate_breakers{breaker="same"} 1`)
		assert.NotContains(t, body, `casbreaker_duplicate_breakers{breaker="other"}`)
	})
}

// One Transitions shared by two collectors over different breakers (an
// HTTP and a gRPC registry, say): each collector's reads keep the
// other's counts.
func TestSharedTransitionsKeepEachCollectorsCounts(t *testing.T) {
	var tr observe.Transitions
	collector := func(name string) *prombreaker.Collector {
		b, err := core.New(core.Config{Name: name, ConsecutiveFailures: 1, OnStateChange: tr.Listener(nil)})
		require.NoError(t, err)
		require.NoError(t, b.ForceOpen(0))
		src, err := observe.Breakers(b)
		require.NoError(t, err)
		c, err := prombreaker.New(src, prombreaker.Options{Transitions: &tr})
		require.NoError(t, err)
		return c
	}
	a, b := collector("a"), collector("b")
	for range 3 {
		for _, c := range []*prombreaker.Collector{a, b} {
			assert.Equal(t, 1, testCount(t, c, "casbreaker_transitions_total"), "each read of one collector keeps the other's names")
		}
	}
}

// testCount is how many series of family c reports, failing the test if
// the collection fails.
func testCount(t *testing.T, c prometheus.Collector, family string) int {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	require.NoError(t, reg.Register(c))
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() == family {
			return len(mf.GetMetric())
		}
	}
	return 0
}

// Enough breakers that a scrape's series and label pairs fill several of
// its blocks, one breaker's series across two, two of one name and one
// named with bytes that are not UTF-8: every series has its own
// breaker's name and labels, Collect sends each family in the order the
// gather sorts it by, the Gatherer returns families already in that
// order that client_golang's checks accept, and both paths give one
// exposition text.
func TestScrapeOfManyBreakers(t *testing.T) {
	const n = 1000
	var tr observe.Transitions
	var bs []observe.Breaker
	for i := range n {
		// i%3 successes then a failure: the breakers with one success
		// trip (half their calls failed).
		b, err := core.New(core.Config{Name: fmt.Sprintf("b%d", n-i), WindowSize: 4, FailureRateThreshold: 50, CollectMetrics: true,
			MinimumNumberOfCalls: 2, OnStateChange: tr.Listener(nil)})
		require.NoError(t, err)
		for range i % 3 {
			require.NoError(t, observetest.Call(b, nil))
		}
		require.NoError(t, observetest.Call(b, observetest.ErrDown))
		bs = append(bs, b)
	}
	same, err := core.New(core.Config{Name: "b7", ConsecutiveFailures: 1})
	require.NoError(t, err)
	bad, err := core.New(core.Config{Name: "bad", ConsecutiveFailures: 1})
	require.NoError(t, err)
	bs = append(bs, same, observetest.Named{Breaker: bad, Name: "b\xff"})
	src, err := observe.Breakers(bs...)
	require.NoError(t, err)
	c, err := prombreaker.New(src, prombreaker.Options{ConstLabels: prometheus.Labels{"app": "a", "zone": "z"}, Transitions: &tr})
	require.NoError(t, err)

	ch := make(chan prometheus.Metric)
	go func() { c.Collect(ch); close(ch) }()
	byFamily := map[string][]*dto.Metric{}
	for m := range ch {
		var out dto.Metric
		require.NoError(t, m.Write(&out))
		name := m.Desc().String()
		byFamily[name] = append(byFamily[name], &out)
	}
	require.Len(t, byFamily, len(observe.Metrics())-1, "every family, the duplicates included, but the capped trips (no cap)")
	for name, ms := range byFamily {
		assert.True(t, sort.SliceIsSorted(ms, func(i, j int) bool { return lessByLabels(ms[i], ms[j]) }), name)
		per := map[string]int{}
		for _, m := range ms {
			assert.Equal(t, "app", m.GetLabel()[0].GetName())
			assert.Equal(t, "breaker", m.GetLabel()[1].GetName())
			assert.Equal(t, "zone", m.GetLabel()[len(m.GetLabel())-1].GetName())
			per[m.GetLabel()[1].GetValue()]++
		}
		switch {
		case strings.Contains(name, "duplicate_breakers"):
			assert.Equal(t, map[string]int{"b7": 1}, per)
		case strings.Contains(name, "transitions_total"):
			assert.Len(t, per, (n+1)/3, name)
		case strings.Contains(name, "_ratio"):
			assert.Len(t, per, n-(n+1)/3, "an open breaker's window holds no call: %s", name)
		default:
			assert.GreaterOrEqual(t, len(per), n, name)
		}
	}

	reg := prometheus.NewPedanticRegistry()
	require.NoError(t, reg.Register(c))
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() == "casbreaker_calls_total" {
			require.Len(t, mf.GetMetric(), 3*n)
			for _, m := range mf.GetMetric() {
				want := 0.0
				switch label(m, "kind") {
				case "failed":
					want = 1
				case "successful":
					k, err := strconv.Atoi(strings.TrimPrefix(label(m, "breaker"), "b"))
					require.NoError(t, err)
					want = float64((n - k) % 3)
				}
				assert.Equal(t, want, m.GetCounter().GetValue(), label(m, "breaker"))
			}
		}
	}

	gathered, err := c.Gatherer(nil).Gather()
	require.NoError(t, err)
	assert.True(t, slices.IsSortedFunc(gathered, func(a, b *dto.MetricFamily) int { return strings.Compare(a.GetName(), b.GetName()) }))
	for _, mf := range gathered {
		ms := mf.GetMetric()
		assert.True(t, sort.SliceIsSorted(ms, func(i, j int) bool { return lessByLabels(ms[i], ms[j]) }), mf.GetName())
	}
	_, err = prometheus.Gatherers{fixedFamilies(gathered)}.Gather()
	assert.NoError(t, err, "client_golang's checks of every series")
	assert.Equal(t, exposition(t, reg), exposition(t, c.Gatherer(nil)))
}

// fixedFamilies is a Gatherer of families gathered before.
type fixedFamilies []*dto.MetricFamily

func (f fixedFamilies) Gather() ([]*dto.MetricFamily, error) { return f, nil }

// exposition is the text exposition of what g gathers.
func exposition(t *testing.T, g prometheus.Gatherer) string {
	t.Helper()
	mfs, err := g.Gather()
	require.NoError(t, err)
	var b strings.Builder
	enc := expfmt.NewEncoder(&b, expfmt.NewFormat(expfmt.TypeTextPlain))
	for _, mf := range mfs {
		require.NoError(t, enc.Encode(mf))
	}
	return b.String()
}

// lessByLabels is client_golang's order of the series of a family: by
// label values, in the order of the labels' names.
func lessByLabels(a, b *dto.Metric) bool {
	for i, lp := range a.GetLabel() {
		if v, w := lp.GetValue(), b.GetLabel()[i].GetValue(); v != w {
			return v < w
		}
	}
	return false
}

// A scrape allocates per breaker, not per series: its series, their
// label pairs and values come from blocks, and the families' own pairs
// are made once per Collector (what client_golang's gather adds per
// series is its own); the Gatherer's dto.Metric values come from one
// block.
func TestCollectAllocatesPerBreaker(t *testing.T) {
	const n = 1000
	var bs []observe.Breaker
	for i := range n {
		b, err := core.New(core.Config{Name: fmt.Sprint(i), WindowSize: 4, FailureRateThreshold: 50, CollectMetrics: true})
		require.NoError(t, err)
		bs = append(bs, b)
	}
	src, err := observe.Breakers(bs...)
	require.NoError(t, err)
	c, err := prombreaker.New(src, prombreaker.Options{})
	require.NoError(t, err)
	ch := make(chan prometheus.Metric, 32*n)
	collect := func() {
		c.Collect(ch)
		for len(ch) > 0 {
			<-ch
		}
	}
	collect() // the families' label pairs
	allocs := testing.AllocsPerRun(3, collect)
	assert.LessOrEqual(t, allocs, 3.0*n, "%.0f allocations for %d breakers of 20 series", allocs, n)
	g := c.Gatherer(nil)
	allocs = testing.AllocsPerRun(3, func() {
		_, err := g.Gather()
		require.NoError(t, err)
	})
	assert.LessOrEqual(t, allocs, 3.0*n, "%.0f allocations for %d breakers of 20 series", allocs, n)
}

// Scrapes of one Collector at once (two Prometheus servers, say, one
// through a registry, one through the Gatherer), while calls run, under
// the race detector: each gathers every breaker in exactly one state.
func TestConcurrentScrapes(t *testing.T) {
	var tr observe.Transitions
	breakers, err := registry.New(registry.Options[int]{Config: core.Config{
		Name: "svc", ConsecutiveFailures: 2, OpenDuration: time.Millisecond, WindowSize: 4, FailureRateThreshold: 50,
		CollectMetrics: true, OnStateChange: tr.Listener(nil),
	}})
	require.NoError(t, err)
	src, err := observe.Registry(breakers)
	require.NoError(t, err)
	c, err := prombreaker.New(src, prombreaker.Options{Transitions: &tr})
	require.NoError(t, err)
	reg := prometheus.NewPedanticRegistry()
	require.NoError(t, reg.Register(c))
	stop := observetest.Traffic(breakers, 8, nil)
	defer stop()
	var wg sync.WaitGroup
	for _, g := range []prometheus.Gatherer{reg, reg, c.Gatherer(nil), c.Gatherer(nil)} {
		wg.Go(func() {
			for range 20 {
				mfs, err := g.Gather()
				if !assert.NoError(t, err) {
					return
				}
				in := map[string]float64{}
				for _, mf := range mfs {
					if mf.GetName() == "casbreaker_state" {
						for _, m := range mf.GetMetric() {
							in[label(m, "breaker")] += m.GetGauge().GetValue()
						}
					}
				}
				for name, n := range in {
					assert.Equal(t, 1.0, n, name)
				}
			}
		})
	}
	wg.Wait()
}
