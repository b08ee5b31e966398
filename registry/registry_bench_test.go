package registry_test

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/casbreaker/casbreaker/core"
	"github.com/casbreaker/casbreaker/internal/cputime"
	"github.com/casbreaker/casbreaker/registry"
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

// BenchmarkNewKeyAtBound is a stream of new keys at the bound, every
// breaker closed and free to go: each Get makes a breaker and evicts one.
// Its cost per new key must not grow with the bound (the hand's amortized
// O(1)); with idle eviction on, each new key also examines four breakers
// for idleness (none is idle: the clock stands still); with every breaker
// open (open=true), each new key is refused with ErrFull, after a look at
// 8 breakers once the registry is full. Besides ns/op it
// reports cpu-ns/op, the process's CPU time (user and system, the garbage
// collector's included) per new key, which a machine shared with other
// work disturbs less than the wall clock.
func BenchmarkNewKeyAtBound(b *testing.B) {
	for _, bound := range []int{1_000, 10_000, 100_000} {
		for _, v := range []struct {
			name string
			idle time.Duration
			open bool
		}{{"idle=false", 0, false}, {"idle=true", time.Minute, false}, {"open=true", time.Minute, true}} {
			b.Run(fmt.Sprintf("bound=%d/%s", bound, v.name), func(b *testing.B) {
				r, err := registry.New(registry.Options[int]{
					Config:      core.Config{ConsecutiveFailures: 1, OpenDuration: time.Hour, Clock: core.NewManualClock(0)},
					MaxBreakers: bound, IdleAfter: v.idle,
				})
				if err != nil {
					b.Fatal(err)
				}
				for k := range bound {
					br, err := r.Get(k)
					if err != nil {
						b.Fatal(err)
					}
					if v.open {
						p, _ := br.Allow()
						br.Done(p, errors.New("down"))
					}
				}
				b.ReportAllocs()
				k := bound
				start := cputime.Now()
				for b.Loop() {
					// Every breaker open: each new key is refused.
					if _, err := r.Get(k); (err != nil) != v.open {
						b.Fatal(err)
					}
					k++
				}
				b.ReportMetric(float64(cputime.Now()-start)/float64(b.N), "cpu-ns/op")
			})
		}
	}
}

// BenchmarkNewKeyFloor is what any registry keyed by a sync.Map pays for a
// new key at a bound: a missed lookup, a store and a delete of the oldest
// key, with the map at the bound, and no breaker made. It grows with the
// bound as BenchmarkNewKeyAtBound does: the map's lookups miss the caches
// at 100,000 keys.
func BenchmarkNewKeyFloor(b *testing.B) {
	for _, bound := range []int{1_000, 10_000, 100_000} {
		b.Run(fmt.Sprintf("bound=%d", bound), func(b *testing.B) {
			var m sync.Map
			for k := range bound {
				m.Store(k, &struct{ p *int }{})
			}
			k := bound
			start := cputime.Now()
			for b.Loop() {
				if _, ok := m.Load(k); ok {
					b.Fatal("found a new key")
				}
				m.Store(k, &struct{ p *int }{})
				m.Delete(k - bound)
				k++
			}
			b.ReportMetric(float64(cputime.Now()-start)/float64(b.N), "cpu-ns/op")
		})
	}
}

// BenchmarkMemoryPerKey reports the heap a registry keeps per string key
// (B/key), beside the same breakers made by core.New and held in a slice
// (core-B/key), and the difference, the registry's own share
// (registry-B/key). The keys' bytes are made beforehand and not counted.
// Run it with -benchtime=1x: each iteration makes 100,000 breakers twice.
func BenchmarkMemoryPerKey(b *testing.B) {
	const n = 100_000
	cfg := core.Config{Name: "api", ConsecutiveFailures: 5, Clock: core.NewManualClock(0)}
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("host-%d.example", i)
	}
	heap := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	var perKey, perBreaker float64
	for b.Loop() {
		before := heap()
		r, err := registry.New(registry.Options[string]{Config: cfg, MaxBreakers: 10 * n, IdleAfter: time.Minute})
		if err != nil {
			b.Fatal(err)
		}
		for _, k := range keys {
			if _, err := r.Get(k); err != nil {
				b.Fatal(err)
			}
		}
		perKey = float64(heap()-before) / n
		runtime.KeepAlive(r)

		before = heap()
		held := make([]*core.Breaker, n)
		for i, k := range keys {
			c := cfg
			c.Name = cfg.Name + "/" + k
			if held[i], err = core.New(c); err != nil {
				b.Fatal(err)
			}
		}
		perBreaker = float64(heap()-before) / n
		runtime.KeepAlive(held)
	}
	b.ReportMetric(perKey, "B/key")
	b.ReportMetric(perBreaker, "core-B/key")
	b.ReportMetric(perKey-perBreaker, "registry-B/key")
}
