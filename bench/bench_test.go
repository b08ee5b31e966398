// Package bench holds casbreaker's benchmarks: the lock-free core.Breaker
// (impl=lockfree) against the mutex baseline (impl=mutex), with the physical
// floors measured in the same run. The bodies live in bench/suite and are
// shared with bench/peers, the nested module that runs the same names for
// other Go breakers. `make bench` runs both; docs/benchmarks.md reads the
// results.
package bench

import (
	"testing"
	"time"

	"github.com/casbreaker/casbreaker/baseline"
	"github.com/casbreaker/casbreaker/bench/suite"
	"github.com/casbreaker/casbreaker/core"
)

var impls = suite.Ours

func BenchmarkFloor(b *testing.B)                 { suite.Floor(b) }
func BenchmarkFloorParallel(b *testing.B)         { suite.FloorParallel(b) }
func BenchmarkClosedSuccess(b *testing.B)         { suite.ClosedSuccess(b, impls) }
func BenchmarkClosedSuccessParallel(b *testing.B) { suite.ClosedSuccessParallel(b, impls) }
func BenchmarkClosedMixed(b *testing.B)           { suite.ClosedMixed(b, impls) }
func BenchmarkOpenReject(b *testing.B)            { suite.OpenReject(b, impls) }
func BenchmarkProbeStorm(b *testing.B)            { suite.ProbeStorm(b, impls) }
func BenchmarkChurn(b *testing.B)                 { suite.Churn(b, impls) }
func BenchmarkSnapshot(b *testing.B)              { suite.Snapshot(b, impls) }
func BenchmarkNew(b *testing.B)                   { suite.New(b, impls) }
func BenchmarkMix(b *testing.B)                   { suite.Mix(b, impls) }

// BenchmarkAdapter/policy=P/call=C/impl=I is what the suite's adapter costs
// on the closed success path, one goroutine:
//   - call=direct: a loop in this function over Allow and Done of the
//     concrete *core.Breaker or *baseline.Breaker, as a service writes it;
//   - call=each: one interface call per operation, br.Run(1, ...).
//
// BenchmarkClosedSuccess itself runs the loop inside the adapter
// (suite.Breaker.Run): one interface call per benchmark, the same code as
// call=direct with the index into the outcome pattern added.
func BenchmarkAdapter(b *testing.B) {
	for _, p := range suite.Policies {
		b.Run("policy="+p.Name, func(b *testing.B) {
			b.Run("call=direct", func(b *testing.B) {
				for _, im := range impls {
					b.Run("impl="+im.Name, func(b *testing.B) {
						br, err := im.New(suite.Spec{Policy: p})
						if err != nil {
							b.Fatal(err)
						}
						switch a := br.(type) {
						case *suite.Lockfree:
							directLockfree(b, a.B)
						case *suite.Mutex:
							directMutex(b, a.B)
						default:
							b.Fatalf("no direct loop for %T", br)
						}
					})
				}
			})
			// call=reconfigured: call=direct on a lock-free breaker whose
			// rules Reconfigure replaced once: every call goes through to
			// the breaker that took over (docs/design.md, Reconfiguring a
			// live breaker).
			b.Run("call=reconfigured/impl=lockfree", func(b *testing.B) {
				c := suite.Spec{Policy: p}.Config()
				br, err := core.New(c)
				if err != nil {
					b.Fatal(err)
				}
				c.HalfOpenFullWait = time.Minute // a rule the closed path never reads
				if err := br.Reconfigure(c); err != nil {
					b.Fatal(err)
				}
				directLockfree(b, br)
			})
			b.Run("call=each", func(b *testing.B) {
				for _, im := range impls {
					b.Run("impl="+im.Name, func(b *testing.B) {
						br, err := im.New(suite.Spec{Policy: p})
						if err != nil {
							b.Fatal(err)
						}
						ok := []error{nil}
						b.ReportAllocs()
						b.ResetTimer()
						for range b.N {
							br.Run(1, ok)
						}
					})
				}
			})
		})
	}
}

func directLockfree(b *testing.B, br *core.Breaker) {
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if p, err := br.Allow(); err == nil {
			br.Done(p, nil)
		}
	}
}

func directMutex(b *testing.B, br *baseline.Breaker) {
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if p, err := br.Allow(); err == nil {
			br.Done(p, nil)
		}
	}
}

// TestSmoke runs both adapters through what the benchmark bodies rely on,
// fast enough for `make test`.
func TestSmoke(t *testing.T) { suite.Smoke(t, impls) }
