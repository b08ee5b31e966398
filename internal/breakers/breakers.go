// Package breakers is the one table of circuit-breaker implementations that
// every behavioural test, race test and fuzz target runs against (the
// uber-go/ratelimit pattern): the lock-free core and the mutex baseline,
// behind the core.CircuitBreaker contract. Adding an implementation here adds
// it to every test at once.
package breakers

import (
	"github.com/casbreaker/casbreaker/baseline"
	"github.com/casbreaker/casbreaker/core"
)

// Impl names one implementation and builds it from a Config.
type Impl struct {
	Name string
	New  func(core.Config) (core.CircuitBreaker, error)
	// Zero is the implementation's zero value, made without New (the
	// misuse every method must refuse with a panic that names New).
	Zero func() core.CircuitBreaker
}

// All lists every implementation, the lock-free core first.
var All = []Impl{
	{
		Name: "lockfree",
		New:  func(c core.Config) (core.CircuitBreaker, error) { return core.New(c) },
		Zero: func() core.CircuitBreaker { return new(core.Breaker) },
	},
	{
		Name: "mutex",
		New:  func(c core.Config) (core.CircuitBreaker, error) { return baseline.New(c) },
		Zero: func() core.CircuitBreaker { return new(baseline.Breaker) },
	},
}
