package ops

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/api"
	v1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"
)

var record = flag.String("record", "", "write what Prometheus recorded in TestEndToEnd to this JSON file (bench/plot -outage draws it)")

// The Prometheus of the end-to-end test: it scrapes and evaluates every
// 500 ms. Its target (%s) is a pass-through to the demo's /metrics on a
// listener of the test's own: Prometheus hands the targets it discovers
// to its scrapers at most every 5 s, its first ones too, so it must be
// scraping before the demo starts, whose breaker trips 3 s in; the
// pass-through answers 503 until the demo says where it serves them.
const e2eConfig = `global:
  scrape_interval: 500ms
  scrape_timeout: 400ms
  evaluation_interval: 500ms
rule_files: [rules.yml]
scrape_configs:
  - job_name: outage
    static_configs:
      - targets: [%q]
`

// The holds of the alerts the test waits for, short enough for the
// demo's outage (its flaky breaker is open or half-open from 3 s to about
// 9 s) and long enough to see pending first (four evaluations).
const (
	openTooLongFor   = 2 * time.Second
	scrapeFailingFor = time.Second
)

// What the demo prints first: its servers, then where it serves /metrics.
var (
	demoServers = regexp.MustCompile(`flaky http://(\S+)/ and steady http://(\S+)/`)
	demoMetrics = regexp.MustCompile(`^metrics: (http://\S+)`)
)

// TestEndToEnd runs the outage demo (examples/outage) under a real
// Prometheus on loopback, with the alert rules of alerts/ (two holds made
// short), and checks through Prometheus' HTTP API that the breakers'
// series arrive with the labels the exporter gives them, that the flaky
// host's breaker makes CasbreakerOpenTooLong go pending, then firing,
// then resolve when it closes, that the steady host's never does, that
// CasbreakerScrapeFailing fires once the demo has exited, and that every
// query of the dashboard runs on what was recorded and returns data. It
// takes the demo's 13 s and a few more; every wait is a poll bounded by
// the test's deadline.
func TestEndToEnd(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cat := exporterCatalog(t)
	dir := t.TempDir()
	demo := buildDemo(ctx, t, dir)

	groups := loadRules(t)
	rule(t, groups, "CasbreakerOpenTooLong").For = model.Duration(openTooLongFor)
	rule(t, groups, "CasbreakerScrapeFailing").For = model.Duration(scrapeFailingFor)
	writeRules(t, groups, filepath.Join(dir, "rules.yml"))
	var proxy passThrough
	srv := httptest.NewServer(&proxy)
	defer srv.Close()
	target := strings.TrimPrefix(srv.URL, "http://")
	promURL, prom := startPrometheus(ctx, t, dir, fmt.Sprintf(e2eConfig, target))
	client, err := api.NewClient(api.Config{Address: promURL})
	if err != nil {
		t.Fatal(err)
	}
	papi := v1.NewAPI(client)
	query := func(q string) (model.Vector, error) {
		v, _, _, err := papi.Query(ctx, q, time.Now())
		if err != nil {
			return nil, err
		}
		return v.(model.Vector), nil
	}
	poll(ctx, t, "Prometheus to scrape the target", func() (bool, error) {
		v, err := query(`up{job="outage"}`)
		return len(v) == 1, err
	}, prom)

	urls := make(chan [3]string, 1) // flaky, steady, metrics
	var servers []string
	began := time.Now()
	d := start(t, exec.CommandContext(ctx, demo), func(line string) {
		if m := demoServers.FindStringSubmatch(line); m != nil {
			servers = m[1:]
		}
		if m := demoMetrics.FindStringSubmatch(line); m != nil && servers != nil {
			select {
			case urls <- [3]string{servers[0], servers[1], m[1]}:
			default:
			}
		}
	})
	var flaky, steady string
	select {
	case u := <-urls:
		flaky, steady = "demo/"+u[0], "demo/"+u[1]
		metrics, err := url.Parse(u[2])
		if err != nil {
			t.Fatal(err)
		}
		to := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: metrics.Scheme, Host: metrics.Host})
		to.ErrorHandler = func(w http.ResponseWriter, _ *http.Request, err error) { // the demo has exited
			http.Error(w, err.Error(), http.StatusBadGateway)
		}
		proxy.to.Store(to)
	case <-d.done:
		t.Fatalf("the demo exited before it served /metrics: %v\n%s", d.status, d.out.String())
	case <-ctx.Done():
		t.Fatalf("the demo did not say where it serves /metrics: %v\n%s", ctx.Err(), d.out.String())
	}
	procs := []*process{prom, d}

	// The series arrive, with the exporter's labels and the target's.
	poll(ctx, t, "both breakers' series in Prometheus", func() (bool, error) {
		v, err := query(`casbreaker_state{job="outage"}`)
		if err != nil {
			return false, err
		}
		got := map[string]int{}
		for _, s := range v {
			got[string(s.Metric["breaker"])]++
		}
		return got[flaky] == 6 && got[steady] == 6, fmt.Errorf("state series by breaker: %v", got)
	}, procs...)
	all, err := query(`{job="outage", __name__=~"casbreaker_.*"}`)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range all {
		checkSeries(t, cat, s.Metric, target)
	}

	// The flaky breaker's outage takes the alert from pending to firing,
	// and its recovery resolves it.
	openTooLong := fmt.Sprintf(`ALERTS{alertname="CasbreakerOpenTooLong", breaker=%q`, flaky) // + "}" or more matchers
	poll(ctx, t, "CasbreakerOpenTooLong to fire for "+flaky, func() (bool, error) {
		v, err := query(openTooLong + `, alertstate="firing"}`)
		return len(v) == 1, err
	}, procs...)
	poll(ctx, t, flaky+" to close and its alert to resolve", func() (bool, error) {
		closed, err := query(fmt.Sprintf(`casbreaker_state{breaker=%q, state="closed"} == 1`, flaky))
		if err != nil {
			return false, err
		}
		alerts, err := query(openTooLong + "}")
		return len(closed) == 1 && len(alerts) == 0, err
	}, procs...)

	// The demo exits, and the failing scrape of what exported breakers
	// fires its alert.
	if err := d.wait(ctx); err != nil {
		t.Logf("the demo's own verdict failed (%v); its breakers' series were checked above:\n%s", err, d.out.String())
	}
	poll(ctx, t, "CasbreakerScrapeFailing to fire for the exited demo", func() (bool, error) {
		v, err := query(`ALERTS{alertname="CasbreakerScrapeFailing", alertstate="firing", job="outage"}`)
		return len(v) == 1, err
	}, procs...)
	ended := time.Now()

	// What Prometheus recorded: pending came before firing, and the
	// steady breaker never alerted.
	rng := v1.Range{Start: began, End: ended, Step: 250 * time.Millisecond}
	queryRange := func(q string) model.Matrix {
		t.Helper()
		v, _, _, err := papi.QueryRange(ctx, q, rng)
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		return v.(model.Matrix)
	}
	first := map[string]model.Time{}
	for _, s := range queryRange(openTooLong + "}") {
		first[string(s.Metric["alertstate"])] = s.Values[0].Timestamp
	}
	pending, wasPending := first["pending"]
	firing, fired := first["firing"]
	if !wasPending || !fired || !pending.Before(firing) {
		t.Errorf("CasbreakerOpenTooLong of %s: first pending at %v, first firing at %v; want pending, then firing", flaky, pending, firing)
	}
	if m := queryRange(fmt.Sprintf(`ALERTS{breaker=%q}`, steady)); len(m) > 0 {
		t.Errorf("the steady host's breaker alerted: %v", m)
	}

	// Every query of the dashboard runs on what the run recorded.
	dash, panels := loadDashboard(t)
	for _, p := range panels {
		for _, tg := range p.Targets {
			q, err := expand(tg.Expr, dash.Templating.List, ".*", "2s")
			if err != nil {
				t.Fatal(err)
			}
			if m := queryRange(q); len(m) == 0 {
				t.Errorf("panel %q: %s returns nothing over the run", p.Title, q)
			}
		}
	}

	if *record != "" {
		writeRecord(t, *record, began, flaky, queryRange)
	}
}

// checkSeries checks one series Prometheus scraped from the demo: a name
// of the exporter, its labels and no other, the target's job and
// instance, and the values the catalog knows.
func checkSeries(t *testing.T, cat catalog, m model.Metric, instance string) {
	t.Helper()
	name := string(m[model.MetricNameLabel])
	labels, ok := cat[name]
	if !ok {
		t.Errorf("Prometheus has %v, which the exporter does not emit", m)
		return
	}
	if m["job"] != "outage" || string(m["instance"]) != instance {
		t.Errorf("%v: want job outage and instance %s", m, instance)
	}
	for l, v := range m {
		if l == model.MetricNameLabel {
			continue
		}
		values, ok := labels[string(l)]
		switch {
		case !ok:
			t.Errorf("%v: %s has no label %s", m, name, l)
		case values != nil && !values[string(v)]:
			t.Errorf("%v: %s=%q is not a value the exporter gives", m, l, v)
		}
	}
	for l := range labels {
		if _, ok := m[model.LabelName(l)]; !ok {
			t.Errorf("%v: label %s is missing", m, l)
		}
	}
}

// buildDemo builds the outage demo into dir and returns the binary.
func buildDemo(ctx context.Context, t *testing.T, dir string) string {
	t.Helper()
	gobin, err := exec.LookPath("go") // go test puts its own first on PATH
	if err != nil {
		t.Fatalf("no go command to build the demo: %v", err)
	}
	bin := filepath.Join(dir, "outage")
	cmd := exec.CommandContext(ctx, gobin, "build", "-o", bin, ".")
	cmd.Dir = filepath.Join("..", "examples", "outage")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building examples/outage: %v\n%s", err, out)
	}
	return bin
}

// passThrough serves what its target serves, or 503 before it has one.
type passThrough struct {
	to atomic.Pointer[httputil.ReverseProxy]
}

func (p *passThrough) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if to := p.to.Load(); to != nil {
		to.ServeHTTP(w, r)
		return
	}
	http.Error(w, "the demo has not said where it serves /metrics yet", http.StatusServiceUnavailable)
}

// recording is what writeRecord writes and bench/plot -outage reads: the
// flaky breaker's series as Prometheus recorded them in one run, each
// query's matrix as the HTTP API gives it, times in Unix seconds.
type recording struct {
	About   string                  `json:"about"`
	Breaker string                  `json:"breaker"`
	Start   float64                 `json:"start"`
	Step    float64                 `json:"step"`
	Queries map[string]recordedPlot `json:"queries"`
}

type recordedPlot struct {
	Query  string       `json:"query"`
	Result model.Matrix `json:"result"`
}

// writeRecord writes the run's recording to path.
func writeRecord(t *testing.T, path string, began time.Time, flaky string, queryRange func(string) model.Matrix) {
	t.Helper()
	sel := fmt.Sprintf(`job="outage", breaker=%q`, flaky)
	queries := map[string]string{
		"state":   fmt.Sprintf(`casbreaker_state{%s}`, sel),
		"calls":   fmt.Sprintf(`sum by (kind) (rate(casbreaker_calls_total{%s}[2s]))`, sel),
		"refused": fmt.Sprintf(`sum by (reason) (rate(casbreaker_not_permitted_calls_total{%s}[2s]))`, sel),
		"alert":   fmt.Sprintf(`ALERTS{alertname="CasbreakerOpenTooLong", %s}`, sel),
	}
	rec := recording{
		About: fmt.Sprintf("examples/outage under Prometheus (ops/e2e_test.go, scrape and evaluation every 500 ms, "+
			"CasbreakerOpenTooLong held %v), recorded %s", openTooLongFor, began.UTC().Format(time.DateOnly)),
		Breaker: flaky, Start: float64(began.UnixMilli()) / 1000, Step: 0.25, Queries: map[string]recordedPlot{},
	}
	for name, q := range queries {
		rec.Queries[name] = recordedPlot{Query: q, Result: queryRange(q)}
	}
	raw, err := json.MarshalIndent(rec, "", " ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, append(raw, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote %s", path)
}
