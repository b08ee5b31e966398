package ops

import (
	"fmt"
	"maps"
	"slices"
	"testing"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
)

// checkQuery parses the PromQL query q and returns what is wrong with it
// against cat: a parse error; a series cat does not hold; a matcher on a
// label the series does not have, or one that selects none of the values
// an enumerated label takes; a label that a by, without, on, ignoring or
// label_replace names and no series selected (nor label_replace) makes.
func checkQuery(cat catalog, q string) []string {
	expr, err := parser.NewParser(parser.Options{}).ParseExpr(q)
	if err != nil {
		return []string{fmt.Sprintf("does not parse: %v", err)}
	}
	var problems []string
	have := map[string]bool{"__name__": true} // every label a selected series or label_replace gives
	var named []string                        // every label the query names outside a selector
	parser.Inspect(expr, func(n parser.Node, _ []parser.Node) error {
		switch n := n.(type) {
		case *parser.VectorSelector:
			problems = append(problems, checkSelector(cat, n, have)...)
		case *parser.AggregateExpr:
			named = append(named, n.Grouping...)
		case *parser.BinaryExpr:
			if n.VectorMatching != nil {
				named = append(named, n.VectorMatching.MatchingLabels...)
				named = append(named, n.VectorMatching.Include...)
			}
		case *parser.Call:
			if n.Func.Name == "label_replace" {
				have[n.Args[1].(*parser.StringLiteral).Val] = true
				named = append(named, n.Args[3].(*parser.StringLiteral).Val)
			}
		}
		return nil
	})
	for _, l := range named {
		if !have[l] {
			problems = append(problems, fmt.Sprintf("names label %q, which no series it selects has", l))
		}
	}
	return problems
}

// checkSelector checks one selector against cat and adds its series'
// labels to have.
func checkSelector(cat catalog, vs *parser.VectorSelector, have map[string]bool) []string {
	name := vs.Name
	for _, m := range vs.LabelMatchers {
		if m.Name == model.MetricNameLabel && m.Type == labels.MatchEqual {
			name = m.Value
		}
	}
	series, ok := cat[name]
	if !ok {
		return []string{fmt.Sprintf("selects %q, which the exporter does not emit (it emits %v)", name, slices.Sorted(maps.Keys(cat)))}
	}
	for l := range series {
		have[l] = true
	}
	var problems []string
	for _, m := range vs.LabelMatchers {
		if m.Name == model.MetricNameLabel {
			continue
		}
		values, ok := series[m.Name]
		switch {
		case !ok:
			problems = append(problems, fmt.Sprintf("%s has no label %q (it has %v)", name, m.Name, slices.Sorted(maps.Keys(series))))
		case values != nil && (m.Type == labels.MatchEqual || m.Type == labels.MatchRegexp) &&
			!slices.ContainsFunc(slices.Collect(maps.Keys(values)), m.Matches):
			problems = append(problems, fmt.Sprintf("%s never has %s (its %s is one of %v)", name, m, m.Name, slices.Sorted(maps.Keys(values))))
		}
	}
	return problems
}

// TestCheckQueryFinds shows that checkQuery catches each kind of mistake
// it is there for, and passes a query that has none.
func TestCheckQueryFinds(t *testing.T) {
	cat := exporterCatalog(t)
	cases := []struct {
		query string
		bad   bool
	}{
		{`sum by (breaker, kind) (rate(casbreaker_calls_total{kind="failed", job=~".+"}[5m]))`, false},
		{`label_replace(casbreaker_state, "registry", "$1", "breaker", "([^/]*).*")`, false},
		{`count by (registry) (label_replace(casbreaker_state, "registry", "$1", "breaker", "([^/]*).*"))`, false},
		{`up == 0 and on (job, instance) casbreaker_state`, false},
		{`sum(rate(casbreaker_calls_total[5m])`, true},                                   // does not parse
		{`casbreaker_call_total`, true},                                                  // no such series
		{`resilience4j_circuitbreaker_state`, true},                                      // nor that
		{`casbreaker_state{kind="failed"}`, true},                                        // a label of another family
		{`casbreaker_state{state="half-open"}`, true},                                    // a value spelt as String() does
		{`casbreaker_not_permitted_calls_total{reason=~"open_.*"}`, true},                // a regexp no value matches
		{`casbreaker_transitions_total{reason="retry-after"}`, true},                     // dashes again
		{`sum by (brekaer) (casbreaker_state)`, true},                                    // a grouping label no series has
		{`casbreaker_state * on (registry) casbreaker_failure_ratio`, true},              // a matching label none has
		{`label_replace(casbreaker_state, "registry", "$1", "name", "([^/]*).*")`, true}, // a source label none has
		{`count by (registry) (casbreaker_state)`, true},                                 // registry needs label_replace
		{`{__name__="casbreaker_slow_calls", breaker="x"}`, true},                        // without _total
		{`casbreaker_state{state!="open"} and casbreaker_state{state="metrics_only"}`, false},
	}
	for _, c := range cases {
		problems := checkQuery(cat, c.query)
		if got := len(problems) > 0; got != c.bad {
			t.Errorf("checkQuery(%s) = %q; want problems: %v", c.query, problems, c.bad)
		}
	}
}
