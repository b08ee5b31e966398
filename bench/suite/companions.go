package suite

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/casbreaker/casbreaker/core"
	"github.com/casbreaker/casbreaker/resilience"
)

// The companion parts, one /part= key each: a call that succeeds at once
// through a retry (3 attempts, 100 ms backoff to 10 s), a retry with a retry
// budget, a bulkhead of 25, a time limiter of 1 s, the count-rate breaker
// (CountRate), and the stacks Retry(Breaker(Bulkhead(TimeLimiter(call))))
// and the same without the time limiter.
var CompanionParts = []string{"retry", "retry-budget", "bulkhead", "timelimiter", "breaker", "stack", "stack-no-timelimiter"}

// CompanionImpl is one library's way of running a call through a part.
type CompanionImpl struct {
	Name string
	// New returns a function that runs one call that succeeds through part,
	// or Unsupported for a part the library lacks.
	New func(part string) (func() error, error)
}

// Companions is BenchmarkCompanions/part=P/impl=I: one goroutine calling
// through part P of library I, allocations reported.
func Companions(b *testing.B, impls []CompanionImpl) {
	companions(b, impls, func(b *testing.B, call func() error) {
		for b.Loop() {
			if err := call(); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// CompanionsParallel is Companions under RunParallel (GOMAXPROCS
// goroutines sharing the part).
func CompanionsParallel(b *testing.B, impls []CompanionImpl) {
	companions(b, impls, func(b *testing.B, call func() error) {
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if err := call(); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
}

func companions(b *testing.B, impls []CompanionImpl, loop func(*testing.B, func() error)) {
	for _, part := range CompanionParts {
		b.Run("part="+part, func(b *testing.B) {
			for _, im := range impls {
				b.Run("impl="+im.Name, func(b *testing.B) {
					call, err := im.New(part)
					if err != nil {
						b.Skip(err)
					}
					b.ReportAllocs()
					loop(b, call)
				})
			}
		})
	}
}

// OurCompanions is package resilience around the lock-free core.Breaker,
// impl=lockfree.
var OurCompanions = []CompanionImpl{{Name: "lockfree", New: newOurCompanion}}

// succeed is the call every part runs: it succeeds at once.
func succeed(context.Context) (struct{}, error) { return struct{}{}, nil }

func newOurCompanion(part string) (func() error, error) {
	layers, err := ourLayers(part)
	if err != nil {
		return nil, err
	}
	s, err := resilience.NewStack(layers...)
	if err != nil {
		return nil, err
	}
	ctx := context.Background()
	return func() error {
		_, err := resilience.Do(ctx, s, succeed)
		return err
	}, nil
}

func ourLayers(part string) ([]resilience.Layer, error) {
	retry, err := resilience.NewRetry(resilience.RetryConfig{MaxAttempts: 3, BaseDelay: 100 * time.Millisecond, MaxDelay: 10 * time.Second})
	if err != nil {
		return nil, err
	}
	budget, err := resilience.NewBudget(resilience.BudgetConfig{})
	if err != nil {
		return nil, err
	}
	budgeted, err := resilience.NewRetry(resilience.RetryConfig{MaxAttempts: 3, BaseDelay: 100 * time.Millisecond, MaxDelay: 10 * time.Second, Budget: budget})
	if err != nil {
		return nil, err
	}
	bulkhead, err := resilience.NewBulkhead(resilience.BulkheadConfig{MaxConcurrent: 25})
	if err != nil {
		return nil, err
	}
	limiter, err := resilience.NewTimeLimiter(resilience.TimeLimiterConfig{Timeout: time.Second})
	if err != nil {
		return nil, err
	}
	breaker, err := core.New(CountRate.Config)
	if err != nil {
		return nil, err
	}
	switch part {
	case "retry":
		return []resilience.Layer{resilience.WithRetry(retry)}, nil
	case "retry-budget":
		return []resilience.Layer{resilience.WithRetry(budgeted)}, nil
	case "bulkhead":
		return []resilience.Layer{resilience.WithBulkhead(bulkhead)}, nil
	case "timelimiter":
		return []resilience.Layer{resilience.WithTimeLimiter(limiter)}, nil
	case "breaker":
		return []resilience.Layer{resilience.WithBreaker(breaker)}, nil
	case "stack":
		return []resilience.Layer{resilience.WithRetry(retry), resilience.WithBreaker(breaker), resilience.WithBulkhead(bulkhead), resilience.WithTimeLimiter(limiter)}, nil
	case "stack-no-timelimiter":
		return []resilience.Layer{resilience.WithRetry(retry), resilience.WithBreaker(breaker), resilience.WithBulkhead(bulkhead)}, nil
	}
	return nil, fmt.Errorf("no companion part %q", part)
}
