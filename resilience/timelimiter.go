package resilience

import (
	"context"
	"time"
)

// TimeLimiterConfig describes a TimeLimiter.
type TimeLimiterConfig struct {
	// Timeout bounds each call, on the Timer's clock. It has no default:
	// zero or negative is an error.
	Timeout time.Duration
	// Timer makes the deadline context. Zero: SystemTimer
	// (context.WithTimeout).
	Timer Timer
}

// TimeLimiter bounds a call with a context deadline and turns a call that
// its deadline ended into a distinct error, ErrTimeout, which the breaker's
// default classifier counts as a failure: without it a hung dependency
// produces no failure to count, and the breaker stays closed while the
// callers queue.
//
// The call runs on the caller's goroutine: the limiter starts none, so it
// can leak none, and its deadline context is cancelled before it returns.
// The deadline works by cancelling the context: a call that honours its
// context returns at the deadline; a call that ignores it runs to its own
// end, holding the caller (and any bulkhead slot around it) the whole
// time, and only then reports ErrTimeout if it failed. The limiter cannot
// stop code that does not listen. A call that returns nil after the
// deadline succeeded late and is reported as a success (a breaker's slow
// call rule can count it).
//
// Each call costs what the Timer's WithTimeout costs: with SystemTimer,
// the allocations of context.WithTimeout (its context and timer). Use it
// as a layer of a Stack (WithTimeLimiter). It is safe for concurrent use.
// Make one with NewTimeLimiter; a zero TimeLimiter panics with a message
// naming it.
type TimeLimiter struct {
	timeout time.Duration
	timer   Timer
}

// NewTimeLimiter returns a TimeLimiter for c. Its error matches
// ErrInvalidConfig and names the field; it never panics.
func NewTimeLimiter(c TimeLimiterConfig) (*TimeLimiter, error) {
	if c.Timeout <= 0 {
		return nil, configError("TimeLimiterConfig.Timeout", "%v is not positive (it has no default)", c.Timeout)
	}
	if err := nilInside("TimeLimiterConfig.Timer", c.Timer); err != nil {
		return nil, err
	}
	if c.Timer == nil {
		c.Timer = SystemTimer{}
	}
	return &TimeLimiter{timeout: c.Timeout, timer: c.Timer}, nil
}

// limitCall runs next under tl's deadline. The call's error becomes a
// timeout error when the call failed, its deadline context is done and the
// caller's context is not: the limiter's own deadline ended it.
func limitCall[T any](ctx context.Context, tl *TimeLimiter, next step[T]) (T, error) {
	if tl.timer == nil {
		panic("resilience: TimeLimiter used without NewTimeLimiter")
	}
	tctx, cancel := tl.timer.WithTimeout(ctx, tl.timeout)
	defer cancel()
	v, err := next.call(tctx)
	if err != nil && tctx.Err() != nil && ctx.Err() == nil {
		return v, &timeoutError{after: tl.timeout, cause: err}
	}
	return v, err
}
