package ops

import (
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/prometheus/promql/parser"
)

const dashboardFile = "grafana/casbreaker-dashboard.json"

// dashboard is the part of a Grafana dashboard's JSON the checks read.
type dashboard struct {
	Title      string  `json:"title"`
	UID        string  `json:"uid"`
	Panels     []panel `json:"panels"`
	Templating struct {
		List []variable `json:"list"`
	} `json:"templating"`
}

type panel struct {
	ID         int             `json:"id"`
	Type       string          `json:"type"`
	Title      string          `json:"title"`
	Datasource json.RawMessage `json:"datasource"`
	Targets    []struct {
		Expr string `json:"expr"`
	} `json:"targets"`
	Panels []panel `json:"panels"` // a row's
}

type variable struct {
	Name  string          `json:"name"`
	Type  string          `json:"type"`
	Query json.RawMessage `json:"query"` // a string, or {"query": "..."} for Prometheus'
	// Current's value is what a custom variable stands for in a check.
	Current struct {
		Value any `json:"value"`
	} `json:"current"`
}

// queryText is a variable's query, in either of its shapes.
func (v variable) queryText() string {
	var s string
	if json.Unmarshal(v.Query, &s) == nil {
		return s
	}
	var q struct {
		Query string `json:"query"`
	}
	_ = json.Unmarshal(v.Query, &q) // neither shape: the query is empty, and the checks say so
	return q.Query
}

// loadDashboard reads the dashboard and returns it with its panels
// flattened (a row's inside it included).
func loadDashboard(t *testing.T) (dashboard, []panel) {
	t.Helper()
	raw, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	var all []panel
	var walk func([]panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			all = append(all, p)
			walk(p.Panels)
		}
	}
	walk(d.Panels)
	return d, all
}

// variableRef is a reference to a dashboard variable in a query: $name,
// ${name} or ${name:format}, or [[name]].
var variableRef = regexp.MustCompile(`\$\{(\w+)(?::\w+)?\}|\$(\w+)|\[\[(\w+)\]\]`)

// expand replaces the variables of query by values that Grafana could
// give them: the durations for Grafana's own, the current value of a
// custom or constant variable, and for one whose values come from the
// series, open, the value open (a regexp matching anything, as Grafana's
// All gives where allValue is .*). It returns an error naming a variable
// the dashboard does not define.
func expand(query string, vars []variable, open, duration string) (string, error) {
	var err error
	out := variableRef.ReplaceAllStringFunc(query, func(ref string) string {
		m := variableRef.FindStringSubmatch(ref)
		name := m[1] + m[2] + m[3]
		switch name {
		case "__rate_interval", "__interval", "__range":
			return duration
		}
		i := slices.IndexFunc(vars, func(v variable) bool { return v.Name == name })
		if i < 0 {
			err = fmt.Errorf("uses $%s, which the dashboard does not define", name)
			return ref
		}
		switch vars[i].Type {
		case "custom", "constant", "textbox":
			return fmt.Sprint(vars[i].Current.Value)
		}
		return open
	})
	return out, err
}

// labelValuesQuery is a Prometheus variable's query of a label's values.
var labelValuesQuery = regexp.MustCompile(`^label_values\((.+),\s*(\w+)\)$`)

// TestDashboardQueries checks that every query of the dashboard, its
// variables' included, parses and uses only the series, labels and label
// values the exporter emits.
func TestDashboardQueries(t *testing.T) {
	cat := exporterCatalog(t)
	d, panels := loadDashboard(t)
	vars := d.Templating.List
	for _, p := range panels {
		for _, target := range p.Targets {
			q, err := expand(target.Expr, vars, ".*", "5m")
			if err != nil {
				t.Errorf("panel %q: %v", p.Title, err)
				continue
			}
			for _, problem := range checkQuery(cat, q) {
				t.Errorf("panel %q: %s\n\t%s", p.Title, problem, q)
			}
		}
	}
	for _, v := range vars {
		if v.Type != "query" {
			continue
		}
		m := labelValuesQuery.FindStringSubmatch(v.queryText())
		if m == nil {
			t.Errorf("variable %s: query %q is not label_values(selector, label)", v.Name, v.queryText())
			continue
		}
		q, err := expand(m[1], vars, ".*", "5m")
		if err != nil {
			t.Errorf("variable %s: %v", v.Name, err)
			continue
		}
		for _, problem := range checkQuery(cat, fmt.Sprintf("group by (%s) (%s)", m[2], q)) {
			t.Errorf("variable %s: %s", v.Name, problem)
		}
	}
}

// TestDashboardShape checks what the dashboard must show and how it must
// be wired: the families a reader of the breakers needs, the variables,
// the data source, and that every panel is filtered by them.
func TestDashboardShape(t *testing.T) {
	d, panels := loadDashboard(t)
	if d.Title == "" || d.UID == "" {
		t.Errorf("the dashboard has no title or uid: %q, %q", d.Title, d.UID)
	}
	for _, name := range []string{"datasource", "job", "registry", "breaker"} {
		if !slices.ContainsFunc(d.Templating.List, func(v variable) bool { return v.Name == name }) {
			t.Errorf("the dashboard has no variable %s", name)
		}
	}
	used := map[string]bool{}
	ids := map[int]bool{}
	for _, p := range panels {
		if ids[p.ID] {
			t.Errorf("panel %q: id %d is taken", p.Title, p.ID)
		}
		ids[p.ID] = true
		if p.Type == "row" {
			continue
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		if !strings.Contains(string(p.Datasource), "${datasource}") {
			t.Errorf("panel %q does not use the datasource variable: %s", p.Title, p.Datasource)
		}
		for _, target := range p.Targets {
			q, err := expand(target.Expr, d.Templating.List, ".*", "5m")
			if err != nil {
				continue // TestDashboardQueries reports it
			}
			expr, err := parser.NewParser(parser.Options{}).ParseExpr(q)
			if err != nil {
				continue
			}
			selects := false
			parser.Inspect(expr, func(n parser.Node, _ []parser.Node) error {
				if vs, ok := n.(*parser.VectorSelector); ok {
					used[vs.Name] = true
					selects = true
				}
				return nil
			})
			if selects && !strings.Contains(target.Expr, `job=~"$job"`) {
				t.Errorf("panel %q: a query is not filtered by the job variable: %s", p.Title, target.Expr)
			}
		}
	}
	for _, family := range []string{"casbreaker_state", "casbreaker_calls_total", "casbreaker_not_permitted_calls_total",
		"casbreaker_failure_ratio", "casbreaker_slow_call_ratio", "casbreaker_transitions_total"} {
		if !used[family] {
			t.Errorf("no panel shows %s", family)
		}
	}
}
