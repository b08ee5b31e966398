package main

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/casbreaker/casbreaker/observe"
	"github.com/casbreaker/casbreaker/prombreaker"
	"github.com/casbreaker/casbreaker/registry"
)

// shownFamilies are the series the end of the demo prints from its last
// scrape: what a dashboard of the breakers would plot. The dropped
// outcomes are there so that the client's failure count adds up: an
// outcome of a permit whose generation had passed (a probe that lost its
// race, a call that outlived a trip) is dropped, not counted as failed.
var shownFamilies = []string{
	"casbreaker_state",
	"casbreaker_calls_total",
	"casbreaker_dropped_outcomes_total",
	"casbreaker_not_permitted_calls_total",
	"casbreaker_transitions_total",
}

// serveMetrics serves the Prometheus series of every breaker of reg on
// /metrics of a loopback listener, with transitions told apart by reason
// as tr counted them, and returns the server and the URL to scrape.
func serveMetrics(reg *registry.Registry[string], tr *observe.Transitions) (*server, string, error) {
	src, err := observe.Registry(reg)
	if err != nil {
		return nil, "", err
	}
	c, err := prombreaker.New(src, prombreaker.Options{Transitions: tr})
	if err != nil {
		return nil, "", err
	}
	pr := prometheus.NewRegistry()
	if err := pr.Register(c); err != nil {
		return nil, "", err
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(pr, promhttp.HandlerOpts{ErrorHandling: promhttp.HTTPErrorOnError}))
	srv, url, err := serve(mux)
	return srv, url + "metrics", err
}

// scrape GETs the metrics URL and returns the lines of shownFamilies
// about breaker whose value is not zero.
func scrape(client *http.Client, url, breaker string) ([]string, error) {
	resp, err := client.Get(url)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
		return nil, fmt.Errorf("GET %s: %s: %s", url, resp.Status, body)
	}
	return shownLines(resp.Body, breaker)
}

// shownLines picks from a text exposition the series of shownFamilies
// whose breaker label is breaker and whose value is not zero.
func shownLines(r io.Reader, breaker string) ([]string, error) {
	label := fmt.Sprintf("breaker=%q", breaker)
	var out []string
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := sc.Text()
		name, rest, ok := strings.Cut(line, "{")
		if !ok || !strings.Contains(rest, label) || strings.HasSuffix(line, " 0") {
			continue
		}
		for _, f := range shownFamilies {
			if name == f {
				out = append(out, line)
			}
		}
	}
	return out, sc.Err()
}
