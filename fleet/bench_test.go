package fleet

import (
	"testing"

	"github.com/casbreaker/casbreaker/core"
)

// BenchmarkClosed is the closed success path, Allow then Done, of a plain
// core breaker (impl=core) and of a fleet member (impl=fleet), for an A/B
// with benchstat -col /impl: called through core.Guard (via=guard, as
// core.Do calls them), through core.Guard holding the member's breaker
// (via=breaker: the fleet is in the breaker, so m.Breaker is the member
// for every call) and on the concrete types (via=direct). A member's
// methods are its embedded breaker's. make test runs no benchmark.
func BenchmarkClosed(b *testing.B) {
	cfg := core.Config{ConsecutiveFailures: 5}
	plain, err := core.New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	srv := startRedis(b)
	m, err := New(cfg, Options{Client: srv.client(b), Key: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { m.Close() })
	for _, impl := range []struct {
		via, name string
		g         core.Guard
	}{{"guard", "core", plain}, {"guard", "fleet", m}, {"breaker", "core", plain}, {"breaker", "fleet", m.Breaker}} {
		b.Run("via="+impl.via+"/impl="+impl.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				p, _ := impl.g.Allow()
				impl.g.Done(p, nil)
			}
		})
	}
	b.Run("via=direct/impl=core", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			p, _ := plain.Allow()
			plain.Done(p, nil)
		}
	})
	b.Run("via=direct/impl=fleet", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			p, _ := m.Allow()
			m.Done(p, nil)
		}
	})
}
