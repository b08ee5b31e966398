package bench

import (
	"testing"

	"github.com/casbreaker/casbreaker/bench/suite"
)

// BenchmarkCompanions/part=P/impl=lockfree: package resilience's parts and
// stacks on a call that succeeds at once (bench/suite/companions.go); bench/peers
// runs the same names for failsafe-go.
func BenchmarkCompanions(b *testing.B)         { suite.Companions(b, suite.OurCompanions) }
func BenchmarkCompanionsParallel(b *testing.B) { suite.CompanionsParallel(b, suite.OurCompanions) }
