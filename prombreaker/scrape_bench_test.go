package prombreaker_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/casbreaker/casbreaker/core"
	"github.com/casbreaker/casbreaker/observe"
	"github.com/casbreaker/casbreaker/prombreaker"
)

// benchSizes are the numbers of breakers a scrape reads in the benchmarks.
var benchSizes = []int{1000, 10000, 100000}

// benchBreakers returns n breakers with a window of 10 and no cumulative
// counters: 10 series each (6 states, 4 window counts).
func benchBreakers(b *testing.B, n int) observe.Source {
	b.Helper()
	bs := make([]observe.Breaker, n)
	for i := range bs {
		br, err := core.New(core.Config{Name: "host-" + strconv.Itoa(i) + ".example", WindowSize: 10, FailureRateThreshold: 50})
		if err != nil {
			b.Fatal(err)
		}
		bs[i] = br
	}
	src, err := observe.Breakers(bs...)
	if err != nil {
		b.Fatal(err)
	}
	return src
}

// discard is a ResponseWriter that keeps nothing of the body.
type discard struct{ h http.Header }

func (d *discard) Header() http.Header         { return d.h }
func (d *discard) Write(p []byte) (int, error) { return len(p), nil }
func (d *discard) WriteHeader(int)             {}

// scrapeBench serves reg's text exposition with promhttp's defaults to a
// writer that discards it, as a scrape would, b.N times.
func scrapeBench(b *testing.B, reg *prometheus.Registry, series int) {
	h := promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
	req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
	b.ReportAllocs()
	cpu := cpuTime()
	for b.Loop() {
		w := &discard{h: http.Header{}}
		h.ServeHTTP(w, req)
	}
	b.ReportMetric(float64(cpuTime()-cpu)/1e9/float64(b.N), "cpu-sec/op")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(series), "ns/series")
}

// BenchmarkScrape is a whole scrape of n breakers (10 series each): the
// collector's read, client_golang's gather and the text encoding.
func BenchmarkScrape(b *testing.B) {
	for _, n := range benchSizes {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			c, err := prombreaker.New(benchBreakers(b, n), prombreaker.Options{})
			if err != nil {
				b.Fatal(err)
			}
			reg := prometheus.NewRegistry()
			reg.MustRegister(c)
			scrapeBench(b, reg, 10*n)
		})
	}
}

// constCollector sends metrics made before the scrape: what a scrape of
// that many series costs in client_golang alone, the floor under any
// collector.
type constCollector struct {
	desc    *prometheus.Desc
	metrics []prometheus.Metric
}

func (c *constCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *constCollector) Collect(ch chan<- prometheus.Metric) {
	for _, m := range c.metrics {
		ch <- m
	}
}

// BenchmarkScrapeFloor is BenchmarkScrape's series, made before the
// scrape with prometheus.MustNewConstMetric and sent in the order the
// gather sorts them by: client_golang's gather and encoding alone.
func BenchmarkScrapeFloor(b *testing.B) {
	for _, n := range benchSizes {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			c := &constCollector{desc: prometheus.NewDesc("casbreaker_state", "state", []string{"breaker", "state"}, nil)}
			for i := range n {
				name := fmt.Sprintf("host-%06d.example", i)
				for s := range 10 {
					c.metrics = append(c.metrics, prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, 0, name, strconv.Itoa(s)))
				}
			}
			reg := prometheus.NewRegistry()
			reg.MustRegister(c)
			scrapeBench(b, reg, 10*n)
		})
	}
}
