package resilience_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/casbreaker/casbreaker/core"
	"github.com/casbreaker/casbreaker/resilience"
)

// The recommended stack, Retry(Breaker(Bulkhead(TimeLimiter(call)))), in
// front of a dependency that is down. A stepping timer on the breaker's
// manual clock lets the example wait its backoffs in no time; a service
// leaves Timer and Clock unset.
func Example() {
	clock := core.NewManualClock(0)
	timer := resilience.NewSteppingTimer(clock)

	breaker, _ := core.New(core.Config{ConsecutiveFailures: 3, OpenDuration: 10 * time.Second, Clock: clock})
	budget, _ := resilience.NewBudget(resilience.BudgetConfig{Percent: 10, Clock: clock})
	retry, _ := resilience.NewRetry(resilience.RetryConfig{MaxAttempts: 4, Budget: budget, Timer: timer})
	bulkhead, _ := resilience.NewBulkhead(resilience.BulkheadConfig{MaxConcurrent: 16})
	limiter, _ := resilience.NewTimeLimiter(resilience.TimeLimiterConfig{Timeout: 2 * time.Second, Timer: timer})
	stack, err := resilience.DefaultStack(retry, breaker, bulkhead, limiter)
	if err != nil {
		fmt.Println(err)
		return
	}

	attempts := 0
	fetch := func(ctx context.Context) (string, error) {
		attempts++
		return "", errors.New("connection refused")
	}
	for call := 1; call <= 3; call++ {
		_, err := resilience.Do(context.Background(), stack, fetch)
		fmt.Printf("call %d: rejected=%v attempts so far=%d\n", call, errors.Is(err, core.ErrRejected), attempts)
	}
	// Output:
	// call 1: rejected=true attempts so far=3
	// call 2: rejected=true attempts so far=3
	// call 3: rejected=true attempts so far=3
}

// A shared retry budget: 10 % of the calls may be retried, with a floor of
// two retries a second for quiet periods.
func ExampleNewBudget() {
	clock := core.NewManualClock(0)
	budget, _ := resilience.NewBudget(resilience.BudgetConfig{Percent: 10, MinPerSecond: 2, Clock: clock})
	for range 50 { // 50 calls pay for 5 retries
		budget.Deposit()
	}
	granted := 0
	for budget.TryWithdraw() {
		granted++
	}
	fmt.Println(granted, "retries granted: 2 from the floor, 5 from the calls")
	// Output: 7 retries granted: 2 from the floor, 5 from the calls
}

// A bulkhead of two slots refuses the third call in flight; the breaker does
// not count the refusal.
func ExampleBulkhead() {
	bulkhead, _ := resilience.NewBulkhead(resilience.BulkheadConfig{MaxConcurrent: 2})
	fmt.Println(bulkhead.TryAcquire(), bulkhead.TryAcquire(), bulkhead.TryAcquire())
	err := bulkhead.Acquire(context.Background())
	fmt.Println(err)
	fmt.Println(core.DefaultClassifier(err))
	bulkhead.Release()
	fmt.Println(bulkhead.Acquire(context.Background()))
	// Output:
	// true true false
	// resilience: bulkhead is full
	// ignored
	// <nil>
}

// A time limiter turns a call that its deadline ended into ErrTimeout, a
// failure for the breaker. The dependency here hangs for a minute of the
// manual clock, and honours its context.
func ExampleNewTimeLimiter() {
	timer := resilience.NewManualTimer(core.NewManualClock(0))
	limiter, _ := resilience.NewTimeLimiter(resilience.TimeLimiterConfig{Timeout: 2 * time.Second, Timer: timer})
	stack, _ := resilience.NewStack(resilience.WithTimeLimiter(limiter))
	_, err := resilience.Do(context.Background(), stack, func(ctx context.Context) (int, error) {
		timer.Advance(time.Minute) // the deadline passes while the call hangs
		<-ctx.Done()
		return 0, ctx.Err()
	})
	fmt.Println(err)
	fmt.Println(errors.Is(err, resilience.ErrTimeout), core.DefaultClassifier(err))
	// Output:
	// resilience: call timed out after 2s: context deadline exceeded
	// true failure
}

// With WaitOnRejection, a call that finds the breaker open waits out the
// open duration's time left, then probes.
func ExampleRetryConfig_waitOnRejection() {
	clock := core.NewManualClock(0)
	timer := resilience.NewSteppingTimer(clock)
	breaker, _ := core.New(core.Config{ConsecutiveFailures: 1, OpenDuration: 3 * time.Second, Clock: clock})
	_ = breaker.ForceOpen(3 * time.Second)
	retry, _ := resilience.NewRetry(resilience.RetryConfig{WaitOnRejection: true, Timer: timer})
	stack, _ := resilience.NewStack(resilience.WithRetry(retry), resilience.WithBreaker(breaker))
	v, err := resilience.Do(context.Background(), stack, func(context.Context) (string, error) { return "ok", nil })
	fmt.Println(v, err, timer.Slept(), breaker.State())
	// Output: ok <nil> [3s] closed
}
