package peers

import (
	"os"
	"testing"

	"github.com/casbreaker/casbreaker/bench/suite"
)

// The same benchmark names as bench/bench_test.go, for the peers. With
// BENCH_OURS set (to anything), casbreaker's own implementations run first
// in this process too: a same-process comparison, fairer on a noisy
// machine than two runs minutes apart. make bench leaves it unset, since
// bench/ already runs them.
func impls() []suite.Impl {
	if os.Getenv("BENCH_OURS") != "" {
		return append(append([]suite.Impl{}, suite.Ours...), Impls...)
	}
	return Impls
}

func BenchmarkClosedSuccess(b *testing.B)         { suite.ClosedSuccess(b, impls()) }
func BenchmarkClosedSuccessParallel(b *testing.B) { suite.ClosedSuccessParallel(b, impls()) }
func BenchmarkClosedMixed(b *testing.B)           { suite.ClosedMixed(b, impls()) }
func BenchmarkOpenReject(b *testing.B)            { suite.OpenReject(b, impls()) }
func BenchmarkProbeStorm(b *testing.B)            { suite.ProbeStorm(b, impls()) }
func BenchmarkChurn(b *testing.B)                 { suite.Churn(b, impls()) }
func BenchmarkSnapshot(b *testing.B)              { suite.Snapshot(b, impls()) }
func BenchmarkNew(b *testing.B)                   { suite.New(b, impls()) }
func BenchmarkMix(b *testing.B)                   { suite.Mix(b, impls()) }

// TestSmoke runs every peer adapter through what the bodies rely on.
func TestSmoke(t *testing.T) { suite.Smoke(t, Impls) }
