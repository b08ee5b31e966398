package prombreaker_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/casbreaker/casbreaker/internal/cputime"
	"github.com/casbreaker/casbreaker/internal/observetest"
	"github.com/casbreaker/casbreaker/prombreaker"
)

// discard is a ResponseWriter that keeps nothing of the body.
type discard struct{ h http.Header }

func (d *discard) Header() http.Header         { return d.h }
func (d *discard) Write(p []byte) (int, error) { return len(p), nil }
func (d *discard) WriteHeader(int)             {}

// scrapeBench serves g's text exposition with promhttp's defaults to a
// writer that discards it, as a scrape would, b.N times after one scrape
// not counted: Prometheus scrapes a process again and again, and a
// Collector's first scrape has no count of breakers to size its blocks.
// A garbage collection before the count keeps the setup's out of the
// CPU time.
func scrapeBench(b *testing.B, g prometheus.Gatherer, series int) {
	h := promhttp.HandlerFor(g, promhttp.HandlerOpts{})
	req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
	h.ServeHTTP(&discard{h: http.Header{}}, req)
	runtime.GC()
	b.ReportAllocs()
	cpu := cputime.Now()
	for b.Loop() {
		w := &discard{h: http.Header{}}
		h.ServeHTTP(w, req)
	}
	b.ReportMetric(float64(cputime.Now()-cpu)/1e9/float64(b.N), "cpu-sec/op")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(series), "ns/series")
}

// BenchmarkScrape is a whole scrape of n breakers (10 series each): the
// breakers' read, the gather and the text encoding, by four paths. In
// path=collector the Collector is registered in the registry promhttp
// serves; in path=gatherer promhttp serves the Collector's Gatherer beside
// that (empty) registry; in path=gatherers it serves
// prometheus.Gatherers{registry, the Gatherer alone}, which checks every
// series again; path=floor is the same number of series made before the
// scrape with prometheus.MustNewConstMetric and sent in the order the
// gather sorts them by: client_golang's gather and encoding alone, the
// floor under any Collector.
func BenchmarkScrape(b *testing.B) {
	for _, n := range observetest.ScrapeSizes {
		for _, path := range []string{"collector", "gatherer", "gatherers", "floor"} {
			b.Run(fmt.Sprintf("n=%d/path=%s", n, path), func(b *testing.B) {
				reg := prometheus.NewRegistry()
				var g prometheus.Gatherer = reg
				switch path {
				case "floor":
					reg.MustRegister(newConstCollector(n))
				default:
					c, err := prombreaker.New(observetest.ManyBreakers(b, n), prombreaker.Options{})
					if err != nil {
						b.Fatal(err)
					}
					switch path {
					case "collector":
						reg.MustRegister(c)
					case "gatherer":
						g = c.Gatherer(reg)
					default:
						g = prometheus.Gatherers{reg, c.Gatherer(nil)}
					}
				}
				scrapeBench(b, g, 10*n)
			})
		}
	}
}

// constCollector sends metrics made before the scrape.
type constCollector struct {
	desc    *prometheus.Desc
	metrics []prometheus.Metric
}

// newConstCollector returns a constCollector of n breakers' 10 series
// each, in the order the gather sorts them by.
func newConstCollector(n int) *constCollector {
	c := &constCollector{desc: prometheus.NewDesc("casbreaker_state", "state", []string{"breaker", "state"}, nil)}
	for i := range n {
		name := fmt.Sprintf("host-%06d.example", i)
		for s := range 10 {
			c.metrics = append(c.metrics, prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, 0, name, strconv.Itoa(s)))
		}
	}
	return c
}

func (c *constCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *constCollector) Collect(ch chan<- prometheus.Metric) {
	for _, m := range c.metrics {
		ch <- m
	}
}
