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
}

// All lists every implementation, the lock-free core first.
var All = []Impl{
	{"lockfree", func(c core.Config) (core.CircuitBreaker, error) { return core.New(c) }},
	{"mutex", func(c core.Config) (core.CircuitBreaker, error) { return baseline.New(c) }},
}
