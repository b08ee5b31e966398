package peers

import (
	"fmt"
	"time"

	"github.com/failsafe-go/failsafe-go"
	"github.com/failsafe-go/failsafe-go/budget"
	"github.com/failsafe-go/failsafe-go/bulkhead"
	"github.com/failsafe-go/failsafe-go/retrypolicy"
	"github.com/failsafe-go/failsafe-go/timeout"

	"github.com/casbreaker/casbreaker/bench/suite"
)

// Companions is failsafe-go's policies for the parts of
// suite.CompanionParts, each run through failsafe.Executor.Get (impl=failsafe-exec),
// configured as close to package resilience's as failsafe-go allows: a retry
// policy of 3 attempts backing off from 100 ms to 10 s; the same with
// failsafe-go's budget (at most 10 % of the executions in flight retries,
// at least 10), which limits retries in flight rather than over time; a
// bulkhead of 25; a timeout of 1 s; the count-rate breaker of the other
// benchmarks; and the stacks in the same order, outermost first.
var Companions = []suite.CompanionImpl{{Name: "failsafe-exec", New: newFailsafeCompanion}}

func succeed() (struct{}, error) { return struct{}{}, nil }

func newFailsafeCompanion(part string) (func() error, error) {
	policies, err := failsafePolicies(part)
	if err != nil {
		return nil, err
	}
	ex := failsafe.With(policies...)
	return func() error {
		_, err := ex.Get(succeed)
		return err
	}, nil
}

func failsafePolicies(part string) ([]failsafe.Policy[struct{}], error) {
	retry := func() retrypolicy.Builder[struct{}] {
		return retrypolicy.NewBuilder[struct{}]().WithMaxAttempts(3).WithBackoff(100*time.Millisecond, 10*time.Second)
	}
	bh := bulkhead.New[struct{}](25)
	to := timeout.New[struct{}](time.Second)
	cb, err := failsafeBreaker(suite.Spec{Policy: suite.CountRate})
	if err != nil {
		return nil, err
	}
	switch part {
	case "retry":
		return []failsafe.Policy[struct{}]{retry().Build()}, nil
	case "retry-budget":
		b := budget.NewBuilder().WithMaxRate(0.1).WithMinConcurrency(10).Build()
		return []failsafe.Policy[struct{}]{retry().WithBudget(b).Build()}, nil
	case "bulkhead":
		return []failsafe.Policy[struct{}]{bh}, nil
	case "timelimiter":
		return []failsafe.Policy[struct{}]{to}, nil
	case "breaker":
		return []failsafe.Policy[struct{}]{cb}, nil
	case "stack":
		return []failsafe.Policy[struct{}]{retry().Build(), cb, bh, to}, nil
	case "stack-no-timelimiter":
		return []failsafe.Policy[struct{}]{retry().Build(), cb, bh}, nil
	}
	return nil, fmt.Errorf("no companion part %q", part)
}
