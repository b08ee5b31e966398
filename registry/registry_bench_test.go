package registry_test

import (
	"testing"
	"time"

	"github.com/casbreaker/casbreaker/core"
)

// BenchmarkGet is the read path for a key that has a breaker, beside the
// call it guards: Allow and Done alone, then Get, Allow and Done with
// eviction off and on. A count window with no failures, the breaker's
// cheapest path, so the registry's share shows.
func BenchmarkGet(b *testing.B) {
	cfg := core.Config{WindowSize: 100, FailureRateThreshold: 50}
	b.Run("path=allow-done", func(b *testing.B) {
		br, err := core.New(cfg)
		if err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				p, _ := br.Allow()
				br.Done(p, nil)
			}
		})
	})
	for _, tc := range []struct {
		name string
		idle time.Duration
	}{{"get-allow-done/evict=off", 0}, {"get-allow-done/evict=on", time.Minute}} {
		b.Run("path="+tc.name, func(b *testing.B) {
			r, err := newRegFor(cfg, tc.idle)
			if err != nil {
				b.Fatal(err)
			}
			for _, k := range []string{"a", "b", "c", "d"} {
				if _, err := r.Get(k); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					br, _ := r.Get("b")
					p, _ := br.Allow()
					br.Done(p, nil)
				}
			})
		})
	}
}
