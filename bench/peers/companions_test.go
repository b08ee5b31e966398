package peers

import (
	"os"
	"testing"

	"github.com/casbreaker/casbreaker/bench/suite"
)

// companionImpls is Companions, after package resilience's own
// (impl=lockfree) when BENCH_OURS is set, as impls does for the breakers.
func companionImpls() []suite.CompanionImpl {
	if os.Getenv("BENCH_OURS") != "" {
		return append(append([]suite.CompanionImpl{}, suite.OurCompanions...), Companions...)
	}
	return Companions
}

func BenchmarkCompanions(b *testing.B)         { suite.Companions(b, companionImpls()) }
func BenchmarkCompanionsParallel(b *testing.B) { suite.CompanionsParallel(b, companionImpls()) }

// TestCompanionsSmoke runs one call through every part of every peer.
func TestCompanionsSmoke(t *testing.T) {
	for _, im := range Companions {
		for _, part := range suite.CompanionParts {
			call, err := im.New(part)
			if err != nil {
				t.Fatalf("%s part=%s: %v", im.Name, part, err)
			}
			if err := call(); err != nil {
				t.Fatalf("%s part=%s: %v", im.Name, part, err)
			}
		}
	}
}
