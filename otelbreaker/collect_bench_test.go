package otelbreaker_test

import (
	"context"
	"fmt"
	"strconv"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/casbreaker/casbreaker/internal/cputime"
	"github.com/casbreaker/casbreaker/internal/observetest"
	"github.com/casbreaker/casbreaker/otelbreaker"
)

// collectBench collects reader b.N times, into one ResourceMetrics as a
// PeriodicReader does.
func collectBench(b *testing.B, reader *sdkmetric.ManualReader, points int) {
	var rm metricdata.ResourceMetrics
	b.ReportAllocs()
	cpu := cputime.Now()
	for b.Loop() {
		if err := reader.Collect(context.Background(), &rm); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(cputime.Now()-cpu)/1e9/float64(b.N), "cpu-sec/op")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(points), "ns/point")
}

// BenchmarkCollect is a collection of n breakers (10 data points each):
// the callback's read and the SDK's aggregation.
func BenchmarkCollect(b *testing.B) {
	for _, n := range observetest.ScrapeSizes {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			reader := sdkmetric.NewManualReader()
			mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
			defer func() { _ = mp.Shutdown(context.Background()) }()
			if _, err := otelbreaker.Register(mp, observetest.ManyBreakers(b, n), otelbreaker.Options{}); err != nil {
				b.Fatal(err)
			}
			collectBench(b, reader, 10*n)
		})
	}
}

// BenchmarkCollectFloor observes BenchmarkCollect's data points from
// attribute sets made before the collection, in one callback: the SDK's
// aggregation alone, the floor under any callback.
func BenchmarkCollectFloor(b *testing.B) {
	for _, n := range observetest.ScrapeSizes {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			reader := sdkmetric.NewManualReader()
			mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
			defer func() { _ = mp.Shutdown(context.Background()) }()
			meter := mp.Meter("floor")
			g, err := meter.Int64ObservableUpDownCounter("casbreaker.state")
			if err != nil {
				b.Fatal(err)
			}
			sets := make([]metric.ObserveOption, 0, 10*n)
			for i := range n {
				name := "host-" + strconv.Itoa(i) + ".example"
				for s := range 10 {
					sets = append(sets, metric.WithAttributeSet(attribute.NewSet(attribute.String("breaker", name), attribute.String("state", strconv.Itoa(s)))))
				}
			}
			if _, err := meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
				for _, s := range sets {
					o.ObserveInt64(g, 0, s)
				}
				return nil
			}, g); err != nil {
				b.Fatal(err)
			}
			collectBench(b, reader, 10*n)
		})
	}
}
