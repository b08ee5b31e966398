package ops

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"
	"go.yaml.in/yaml/v3"
)

const (
	rulesFile     = "alerts/casbreaker-rules.yml"
	rulesTestFile = "alerts/casbreaker-rules_test.yml"
)

// loadRules parses the rules file as Prometheus does (its expressions,
// templates and durations checked).
func loadRules(t *testing.T) *rulefmt.RuleGroups {
	t.Helper()
	groups, errs := rulefmt.ParseFile(rulesFile, false, model.UTF8Validation, parser.NewParser(parser.Options{}), nil)
	for _, err := range errs {
		t.Error(err)
	}
	if len(errs) > 0 {
		t.FailNow()
	}
	return groups
}

// rule returns the alerting rule named alert of groups.
func rule(t *testing.T, groups *rulefmt.RuleGroups, alert string) *rulefmt.Rule {
	t.Helper()
	for i := range groups.Groups {
		for j := range groups.Groups[i].Rules {
			if r := &groups.Groups[i].Rules[j]; r.Alert == alert {
				return r
			}
		}
	}
	t.Fatalf("%s has no alert %s", rulesFile, alert)
	return nil
}

// writeRules writes groups as a rules file at path.
func writeRules(t *testing.T, groups *rulefmt.RuleGroups, path string) {
	t.Helper()
	out, err := yaml.Marshal(groups)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, out, 0o644); err != nil {
		t.Fatal(err)
	}
}

// promtool runs promtool test rules on the test file in dir.
func promtool(t *testing.T, dir string) (string, error) {
	t.Helper()
	out, err := exec.Command(binary(t, "promtool"), "test", "rules", filepath.Join(dir, filepath.Base(rulesTestFile))).CombinedOutput()
	return string(out), err
}

// TestRulesPromtool runs the rules' promtool unit tests: each alert fires
// where it must and not on its near miss.
func TestRulesPromtool(t *testing.T) {
	if out, err := promtool(t, filepath.Dir(rulesTestFile)); err != nil {
		t.Fatalf("promtool test rules %s: %v\n%s", rulesTestFile, err, out)
	}
}

// TestRulesNearMissesBite runs the promtool tests on copies of the rules
// with one threshold or condition moved towards the near miss: each copy
// must fail, on the alert moved, or that near miss proves nothing.
func TestRulesNearMissesBite(t *testing.T) {
	test, err := os.ReadFile(rulesTestFile)
	if err != nil {
		t.Fatal(err)
	}
	expr := func(old, new string) func(*testing.T, *rulefmt.Rule) {
		return func(t *testing.T, r *rulefmt.Rule) {
			if strings.Count(r.Expr, old) != 1 {
				t.Fatalf("%s's expression has %q %d times, not once", r.Alert, old, strings.Count(r.Expr, old))
			}
			r.Expr = strings.Replace(r.Expr, old, new, 1)
		}
	}
	hold := func(d time.Duration) func(*testing.T, *rulefmt.Rule) {
		return func(_ *testing.T, r *rulefmt.Rule) { r.For = model.Duration(d) }
	}
	mutants := []struct {
		alert, what string
		change      func(*testing.T, *rulefmt.Rule)
	}{
		{"CasbreakerOpenTooLong", "held 30 s", hold(30 * time.Second)},
		{"CasbreakerOpenTooLong", "open only", expr(`state=~"open|half_open"`, `state="open"`)},
		{"CasbreakerFlapping", "2 trips", expr(">= 3", ">= 2")},
		{"CasbreakerFlapping", "failed probes counted", expr(`from="closed", to="open"`, `to="open"`)},
		{"CasbreakerRejectingCalls", "30 %", expr("> 0.5", "> 0.3")},
		{"CasbreakerRejectingCalls", "held 1 m", hold(time.Minute)},
		{"CasbreakerManyOpen", "2 breakers", expr(`)) >= 3`, `)) >= 2`)},
		{"CasbreakerManyOpen", "30 % of them", expr(">= 0.5", ">= 0.3")},
		{"CasbreakerManyOpen", "held 1 m", hold(time.Minute)},
		{"CasbreakerScrapeFailing", "any target", expr(" and on (job, instance) group by (job, instance) (last_over_time(casbreaker_state[1h]))", "")},
		{"CasbreakerScrapeFailing", "held 30 s", hold(30 * time.Second)},
		{"CasbreakerMetricsErrors", "any target", expr(" and on (job, instance) group by (job, instance) (casbreaker_state)", "")},
		{"CasbreakerMetricsErrors", "no error", expr("> 0", ">= 0")},
		{"CasbreakerDuplicateNames", "held 2 m", hold(2 * time.Minute)},
	}
	for _, m := range mutants {
		t.Run(m.alert+"/"+m.what, func(t *testing.T) {
			groups := loadRules(t)
			m.change(t, rule(t, groups, m.alert))
			dir := t.TempDir()
			writeRules(t, groups, filepath.Join(dir, filepath.Base(rulesFile)))
			if err := os.WriteFile(filepath.Join(dir, filepath.Base(rulesTestFile)), test, 0o644); err != nil {
				t.Fatal(err)
			}
			out, err := promtool(t, dir)
			if err == nil {
				t.Fatalf("promtool passed the rules with %s %s: no near miss catches it\n%s", m.alert, m.what, out)
			}
			if !strings.Contains(out, "alertname: "+m.alert+",") {
				t.Fatalf("promtool failed the rules with %s %s, but not on that alert:\n%s", m.alert, m.what, out)
			}
		})
	}
}

// TestRulesUseExportedSeries checks every rule's expression against the
// series the exporter emits (and Prometheus' own up).
func TestRulesUseExportedSeries(t *testing.T) {
	cat := exporterCatalog(t)
	for _, g := range loadRules(t).Groups {
		for _, r := range g.Rules {
			for _, p := range checkQuery(cat, r.Expr) {
				t.Errorf("%s: %s", r.Alert, p)
			}
		}
	}
}

// TestRulesNameTheBreaker checks that every alert says what it is about
// in its annotations: the breaker, or the registry or target it watches.
func TestRulesNameTheBreaker(t *testing.T) {
	for _, g := range loadRules(t).Groups {
		for _, r := range g.Rules {
			if r.Labels["severity"] == "" {
				t.Errorf("%s has no severity label", r.Alert)
			}
			for _, a := range []string{"summary", "description"} {
				text := r.Annotations[a]
				if !strings.Contains(text, "$labels.breaker") && !strings.Contains(text, "$labels.registry") &&
					!strings.Contains(text, "$labels.instance") {
					t.Errorf("%s's %s names neither the breaker, the registry nor the target: %q", r.Alert, a, text)
				}
			}
			if !strings.Contains(r.Annotations["description"], "Check") {
				t.Errorf("%s's description does not say what to check", r.Alert)
			}
		}
	}
}
