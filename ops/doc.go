// Package ops holds no code: it is the home of what the people on call
// copy, tested here against the exporter and a real Prometheus.
//
//   - alerts/casbreaker-rules.yml: Prometheus alerting rules (a breaker
//     open too long, flapping, refusing most calls, many breakers of one
//     registry open at once, and the exporter's own trouble), and
//     alerts/casbreaker-rules_test.yml, their promtool unit tests;
//   - grafana/casbreaker-dashboard.json: a Grafana dashboard of the
//     breakers, with variables for the job, the registry and the breaker.
//
// Its tests run promtool on the rules (and on copies with a threshold
// moved, each of which a near miss must catch), check that every query of
// the rules and the dashboard parses and uses only series, labels and
// label values that prombreaker really emits (gathered from the code),
// and run the outage demo (examples/outage) under a real Prometheus on
// loopback, which must see its series and take the open-too-long alert
// from pending to firing. They need prometheus and promtool on PATH:
// scripts/prometheus.sh installs them (make test runs it), and the tests
// fail, never skip, without them. docs/observability.md shows how to load
// the rules and the dashboard.
//
// It is a nested module so that the PromQL parser (Prometheus' own
// module) never enters casbreaker's or prombreaker's go.mod.
package ops
