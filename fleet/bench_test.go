package fleet

import (
	"testing"

	"github.com/casbreaker/casbreaker/core"
)

// BenchmarkClosed is the closed success path, Allow then Done, of a plain
// core breaker (impl=core) and of a fleet member (impl=fleet), for an A/B
// with benchstat -col /impl: the member adds a nil check and a probe test
// to core's path. make test runs no benchmark.
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
		name string
		g    core.Guard
	}{{"core", plain}, {"fleet", m}} {
		b.Run("impl="+impl.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				p, _ := impl.g.Allow()
				impl.g.Done(p, nil)
			}
		})
	}
}
