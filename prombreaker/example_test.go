package prombreaker_test

import (
	"bufio"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/casbreaker/casbreaker/core"
	"github.com/casbreaker/casbreaker/observe"
	"github.com/casbreaker/casbreaker/prombreaker"
	"github.com/casbreaker/casbreaker/registry"
)

// Every breaker of a registry on /metrics: a tenant's breaker trips, and
// the scrape shows its state, the refused call and why it opened.
func Example() {
	var transitions observe.Transitions // the reason label of casbreaker_transitions_total
	breakers, err := registry.New(registry.Options[string]{
		Config: core.Config{
			Name:                "billing",
			ConsecutiveFailures: 2,
			OpenDuration:        30 * time.Second,
			CollectMetrics:      true, // the counter series
			OnStateChange:       transitions.Listener(nil),
		},
		MaxBreakers: 1000, // bounds the label cardinality too
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	src, _ := observe.Registry(breakers)
	collector, err := prombreaker.New(src, prombreaker.Options{Transitions: &transitions})
	if err != nil {
		fmt.Println(err)
		return
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collector)
	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	defer srv.Close()

	acme, _ := breakers.Get("acme")
	for range 3 {
		p, err := acme.Allow()
		if err == nil {
			acme.Done(p, errors.New("payment backend down"))
		}
	}

	resp, err := http.Get(srv.URL)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer resp.Body.Close()
	for sc := bufio.NewScanner(resp.Body); sc.Scan(); {
		line := sc.Text()
		if strings.HasPrefix(line, "casbreaker_") && !strings.HasSuffix(line, " 0") {
			fmt.Println(line)
		}
	}
	// Output:
	// casbreaker_calls_total{breaker="billing/acme",kind="failed"} 2
	// casbreaker_not_permitted_calls_total{breaker="billing/acme",reason="open"} 1
	// casbreaker_permitted_calls_total{breaker="billing/acme"} 2
	// casbreaker_state{breaker="billing/acme",state="open"} 1
	// casbreaker_transitions_total{breaker="billing/acme",from="closed",reason="consecutive_failures",to="open"} 1
}

// One breaker of its own, without a registry.
func ExampleNew() {
	b, err := core.New(core.Config{Name: "search", ConsecutiveFailures: 5})
	if err != nil {
		fmt.Println(err)
		return
	}
	src, _ := observe.Breakers(b)
	c, err := prombreaker.New(src, prombreaker.Options{ConstLabels: prometheus.Labels{"service": "frontend"}})
	if err != nil {
		fmt.Println(err)
		return
	}
	prometheus.MustRegister(c) // on the default registry, which promhttp.Handler serves
	defer prometheus.Unregister(c)

	mfs, err := prometheus.DefaultGatherer.Gather()
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			if mf.GetName() == "casbreaker_state" && m.GetGauge().GetValue() == 1 {
				for _, l := range m.GetLabel() {
					fmt.Printf("%s=%s ", l.GetName(), l.GetValue())
				}
				fmt.Println()
			}
		}
	}
	// Output:
	// breaker=search service=frontend state=closed
}

// Many breakers served beside the application's own metrics, through the
// Collector's Gatherer rather than a registry's gather of each series.
func ExampleCollector_Gatherer() {
	breakers, err := registry.New(registry.Options[string]{
		Config:      core.Config{Name: "api", ConsecutiveFailures: 5},
		MaxBreakers: 100000,
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	src, _ := observe.Registry(breakers)
	c, err := prombreaker.New(src, prombreaker.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	reg := prometheus.NewRegistry() // the application's metrics, c not among them
	up := prometheus.NewGauge(prometheus.GaugeOpts{Name: "app_up", Help: "1 while the application runs."})
	up.Set(1)
	reg.MustRegister(up)
	srv := httptest.NewServer(promhttp.HandlerFor(c.Gatherer(reg), promhttp.HandlerOpts{}))
	defer srv.Close()

	for _, host := range []string{"a.example", "b.example"} {
		if _, err := breakers.Get(host); err != nil {
			fmt.Println(err)
			return
		}
	}
	resp, err := http.Get(srv.URL)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer resp.Body.Close()
	for sc := bufio.NewScanner(resp.Body); sc.Scan(); {
		if line := sc.Text(); !strings.HasPrefix(line, "#") && !strings.HasSuffix(line, " 0") {
			fmt.Println(line)
		}
	}
	// Output:
	// app_up 1
	// casbreaker_state{breaker="api/a.example",state="closed"} 1
	// casbreaker_state{breaker="api/b.example",state="closed"} 1
}
