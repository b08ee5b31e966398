package otelbreaker_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/casbreaker/casbreaker/core"
	"github.com/casbreaker/casbreaker/observe"
	"github.com/casbreaker/casbreaker/otelbreaker"
)

// A breaker's instruments on an SDK MeterProvider; here a manual reader
// collects them, where a service would have a periodic reader and an
// exporter.
func Example() {
	reader := sdkmetric.NewManualReader()
	provider := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer provider.Shutdown(context.Background())

	var transitions observe.Transitions
	b, err := core.New(core.Config{
		Name:                "inventory",
		ConsecutiveFailures: 1,
		OpenDuration:        10 * time.Second,
		CollectMetrics:      true,
		OnStateChange:       transitions.Listener(nil),
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	src, _ := observe.Breakers(b)
	reg, err := otelbreaker.Register(provider, src, otelbreaker.Options{Transitions: &transitions})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer reg.Unregister()

	p, _ := b.Allow()
	b.Done(p, errors.New("timeout"))

	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		fmt.Println(err)
		return
	}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if sum, ok := m.Data.(metricdata.Sum[int64]); ok {
				for _, dp := range sum.DataPoints {
					if dp.Value > 0 {
						fmt.Println(m.Name, dp.Attributes.Encoded(attribute.DefaultEncoder()), dp.Value)
					}
				}
			}
		}
	}
	// Output:
	// casbreaker.state breaker=inventory,state=open 1
	// casbreaker.calls breaker=inventory,kind=failed 1
	// casbreaker.permitted_calls breaker=inventory 1
	// casbreaker.transitions breaker=inventory,from=closed,reason=consecutive_failures,to=open 1
}
