package prombreaker_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/casbreaker/casbreaker/prombreaker"
)

// brokenCollector sends one good series and two errors, as a collector
// that failed to read something does.
type brokenCollector struct{ desc *prometheus.Desc }

func (b brokenCollector) Describe(ch chan<- *prometheus.Desc) { ch <- b.desc }

func (b brokenCollector) Collect(ch chan<- prometheus.Metric) {
	ch <- prometheus.MustNewConstMetric(b.desc, prometheus.GaugeValue, 1)
	ch <- prometheus.NewInvalidMetric(b.desc, errors.New("the database did not answer"))
	ch <- prometheus.NewInvalidMetric(b.desc, errors.New("the cache did not answer"))
}

// A Collector's Gatherer beside another gatherer gives the families and
// errors prometheus.Gatherers gives for the two: the others' families
// merged with the breakers' by name, the others' errors, and a family
// both gather merged and checked series by series.
func TestGathererBesideOthers(t *testing.T) {
	for _, tt := range []struct {
		name    string
		others  func(t *testing.T, c *prombreaker.Collector) *prometheus.Registry
		wantErr string
	}{{
		name: "families of other names",
		others: func(t *testing.T, _ *prombreaker.Collector) *prometheus.Registry {
			reg := prometheus.NewRegistry()
			reg.MustRegister(
				prometheus.NewGauge(prometheus.GaugeOpts{Name: "app_up", Help: "1 while up."}),
				prometheus.NewGauge(prometheus.GaugeOpts{Name: "casbreaker_permitted", Help: "between two of the breakers' families."}),
				prometheus.NewGauge(prometheus.GaugeOpts{Name: "zz_last", Help: "after them."}))
			return reg
		},
	}, {
		name: "an error of the others",
		others: func(t *testing.T, _ *prombreaker.Collector) *prometheus.Registry {
			reg := prometheus.NewRegistry()
			reg.MustRegister(brokenCollector{prometheus.NewDesc("db_up", "1 while the database answers.", nil, nil)})
			return reg
		},
		wantErr: "did not answer",
	}, {
		name: "errors of the others and a family of the same name",
		others: func(t *testing.T, _ *prombreaker.Collector) *prometheus.Registry {
			reg := prometheus.NewRegistry()
			reg.MustRegister(brokenCollector{prometheus.NewDesc("db_up", "1 while the database answers.", nil, nil)},
				prometheus.NewGauge(prometheus.GaugeOpts{Name: "casbreaker_state", Help: "something else."}))
			return reg
		},
		wantErr: "did not answer",
	}, {
		name: "the Collector registered in the others too",
		others: func(t *testing.T, c *prombreaker.Collector) *prometheus.Registry {
			reg := prometheus.NewRegistry()
			reg.MustRegister(c)
			return reg
		},
		wantErr: "was collected before with the same name and label values",
	}, {
		name: "a family of the same name and another help",
		others: func(t *testing.T, _ *prombreaker.Collector) *prometheus.Registry {
			reg := prometheus.NewRegistry()
			reg.MustRegister(prometheus.NewGauge(prometheus.GaugeOpts{Name: "casbreaker_state", Help: "something else."}))
			return reg
		},
		wantErr: `gathered metric family casbreaker_state has help "1 for the state`,
	}} {
		t.Run(tt.name, func(t *testing.T) {
			c := tripped(t, prombreaker.Options{}, true)
			others := tt.others(t, c)
			got, gotErr := gatheredText(t, c.Gatherer(others))
			want, wantErr := gatheredText(t, prometheus.Gatherers{others, c.Gatherer(nil)})
			assert.Equal(t, want, got)
			assert.Contains(t, got, "casbreaker_calls_total{")
			if tt.wantErr == "" {
				assert.NoError(t, gotErr)
				assert.NoError(t, wantErr)
				return
			}
			require.Error(t, gotErr)
			require.Error(t, wantErr)
			assert.ErrorContains(t, gotErr, tt.wantErr)
			assert.Equal(t, strings.Count(wantErr.Error(), tt.wantErr), strings.Count(gotErr.Error(), tt.wantErr))
			var wantErrs, gotErrs prometheus.MultiError
			if errors.As(wantErr, &wantErrs) {
				require.ErrorAs(t, gotErr, &gotErrs)
				assert.Len(t, gotErrs, len(wantErrs), "one list of errors: %v", gotErr)
			}
		})
	}
}

// gatheredText is the text exposition of what g gathers, and the
// gather's error.
func gatheredText(t *testing.T, g prometheus.Gatherer) (string, error) {
	t.Helper()
	mfs, err := g.Gather()
	var b strings.Builder
	enc := expfmt.NewEncoder(&b, expfmt.NewFormat(expfmt.TypeTextPlain))
	for _, mf := range mfs {
		require.NoError(t, enc.Encode(mf))
	}
	return b.String(), err
}
