package resilience

import (
	"context"
	"errors"
	"math/bits"
	"math/rand/v2"
	"time"

	"go.uber.org/atomic"

	"github.com/casbreaker/casbreaker/core"
)

// Jitter says how a retry's backoff is randomized, as the AWS Architecture
// Blog's "Exponential Backoff And Jitter" names the schemes. The zero value
// is FullJitter.
type Jitter uint8

const (
	// FullJitter waits a uniformly random time in [0, backoff]: the
	// scheme that spreads a crowd of retrying callers best.
	FullJitter Jitter = iota
	// EqualJitter waits half the backoff plus a uniformly random time in
	// [0, backoff/2]: never much shorter than the backoff.
	EqualJitter
	// NoJitter waits the backoff itself.
	NoJitter
)

// String returns "full", "equal" or "none".
func (j Jitter) String() string {
	switch j {
	case FullJitter:
		return "full"
	case EqualJitter:
		return "equal"
	case NoJitter:
		return "none"
	}
	return "jitter(?)"
}

// RetryConfig describes a Retry. Every field's zero value is documented;
// the zero RetryConfig is valid: 3 attempts, 100 ms doubling up to 10 s,
// full jitter, the default predicate, no budget, the system timer.
type RetryConfig struct {
	// MaxAttempts is how many attempts a call makes at most, the first one
	// included, so 1 never retries. Zero: 3. Negative is an error.
	MaxAttempts int
	// BaseDelay is the backoff before the first retry; it doubles for
	// each further retry up to MaxDelay, before jitter. Zero: 100 ms.
	BaseDelay time.Duration
	// MaxDelay caps the backoff, and the rejection wait honoured with
	// WaitOnRejection. Zero: 10 s, or BaseDelay if that is longer. It
	// must not be below BaseDelay.
	MaxDelay time.Duration
	// Jitter randomizes each backoff. Zero: FullJitter.
	Jitter Jitter
	// Retryable decides whether an attempt's error is worth another
	// attempt. It is not asked about breaker rejections when
	// WaitOnRejection is set. It runs on the caller's goroutine and must
	// be safe for concurrent use. Zero: DefaultRetryable.
	Retryable func(error) bool
	// WaitOnRejection honours a breaker's rejection instead of stopping at
	// it: an attempt rejected with a wait (core.RetryAfterOf: the time left
	// of the open duration, or the half-open-full wait) of at most MaxDelay
	// is retried after exactly that wait; a rejection with no wait (forced
	// open, shed by the ramp-up) or a longer one still stops the loop.
	// Zero: false, rejections stop the loop (DefaultRetryable).
	WaitOnRejection bool
	// Budget, when set, must grant every retry (Budget.TryWithdraw), and
	// every call deposits into it (Budget.Deposit): share one budget among
	// every Retry of a dependency. Zero: no budget.
	Budget *Budget
	// Timer waits the backoff. Zero: SystemTimer.
	Timer Timer
	// Seed starts the jitter's random sequence, for reproducible tests.
	// Zero: a random seed (so a test that wants a fixed sequence picks any
	// other value; every nonzero seed gives a different one).
	Seed uint64
}

// DefaultRetryable is the default retry predicate: nil is not retried, nor
// is a breaker rejection (core.ErrRejected: the breaker has concluded that
// the dependency is down, so retrying it as a transient error would only
// spin) or a cancelled call (context.Canceled); every other error is,
// ErrTimeout and ErrBulkheadFull included.
func DefaultRetryable(err error) bool {
	return err != nil && !errors.Is(err, core.ErrRejected) && !errors.Is(err, context.Canceled)
}

// Retry retries a failed call with capped exponential backoff and jitter,
// as its RetryConfig says. Use it as a layer of a Stack (WithRetry); it is
// safe for concurrent use by any number of calls and holds no per-call
// state. A call that succeeds at once takes no lock, reads no clock and
// allocates nothing; with a Budget it deposits into it.
//
// A call ends with the first success, with the last attempt's result when
// the attempts are spent or an error is not retryable, with an error
// matching ErrRetryBudgetExhausted and the last error when the budget
// refuses a retry, and with an error matching ctx.Err() and the last error
// when ctx ends during a backoff wait (at once: the wait is not finished).
// No attempt starts once ctx is done: a call whose ctx is done before its
// first attempt returns ctx.Err() and deposits nothing.
//
// Make one with NewRetry; a zero Retry panics with a message naming it.
type Retry struct {
	rng atomic.Uint64 // splitmix64 state, one atomic add per random draw; first: 64-bit aligned on 32-bit platforms

	attempts        int
	base, max       time.Duration
	jitter          Jitter
	retryable       func(error) bool
	waitOnRejection bool
	budget          *Budget
	timer           Timer
}

// NewRetry returns a Retry for c. Its errors match ErrInvalidConfig and
// name each bad field; it never panics.
func NewRetry(c RetryConfig) (*Retry, error) {
	var errs []error
	if c.MaxAttempts < 0 {
		errs = append(errs, configError("RetryConfig.MaxAttempts", "%d is negative (0: 3)", c.MaxAttempts))
	} else if c.MaxAttempts == 0 {
		c.MaxAttempts = 3
	}
	if c.BaseDelay < 0 {
		errs = append(errs, configError("RetryConfig.BaseDelay", "%v is negative (0: 100ms)", c.BaseDelay))
	} else if c.BaseDelay == 0 {
		c.BaseDelay = 100 * time.Millisecond
	}
	if c.MaxDelay < 0 {
		errs = append(errs, configError("RetryConfig.MaxDelay", "%v is negative (0: 10s)", c.MaxDelay))
	} else if c.MaxDelay == 0 {
		c.MaxDelay = max(10*time.Second, c.BaseDelay)
	} else if c.MaxDelay < c.BaseDelay {
		errs = append(errs, configError("RetryConfig.MaxDelay", "%v is below BaseDelay %v", c.MaxDelay, c.BaseDelay))
	}
	if c.Jitter > NoJitter {
		errs = append(errs, configError("RetryConfig.Jitter", "%d is not FullJitter, EqualJitter or NoJitter", c.Jitter))
	}
	if err := nilInside("RetryConfig.Timer", c.Timer); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if c.Retryable == nil {
		c.Retryable = DefaultRetryable
	}
	if c.Timer == nil {
		c.Timer = SystemTimer{}
	}
	if c.Seed == 0 {
		c.Seed = rand.Uint64()
	}
	r := &Retry{
		attempts: c.MaxAttempts, base: c.BaseDelay, max: c.MaxDelay, jitter: c.Jitter,
		retryable: c.Retryable, waitOnRejection: c.WaitOnRejection, budget: c.Budget, timer: c.Timer,
	}
	r.rng.Store(c.Seed)
	return r, nil
}

// retryCall runs next under r.
func retryCall[T any](ctx context.Context, r *Retry, next step[T]) (T, error) {
	if r.timer == nil {
		panic("resilience: Retry used without NewRetry")
	}
	if err := ctx.Err(); err != nil {
		var zero T
		return zero, err
	}
	if r.budget != nil {
		r.budget.Deposit()
	}
	for attempt := 1; ; attempt++ {
		v, err := next.call(ctx)
		if err == nil || attempt >= r.attempts || ctx.Err() != nil {
			return v, err
		}
		d, ok := r.wait(attempt, err)
		if !ok {
			return v, err
		}
		if r.budget != nil && !r.budget.TryWithdraw() {
			return v, &stopped{why: ErrRetryBudgetExhausted, last: err}
		}
		serr := r.timer.Sleep(ctx, d, nil)
		if serr == nil {
			// A deadline that fell due as the wait ended (both ready at
			// once) ends the loop too: no attempt starts on a done context.
			serr = ctx.Err()
		}
		if serr != nil {
			return v, &stopped{why: serr, last: err}
		}
	}
}

// wait is how long to wait after the retry-th failed attempt ended with
// err, and whether to retry at all.
func (r *Retry) wait(retry int, err error) (time.Duration, bool) {
	if r.waitOnRejection && errors.Is(err, core.ErrRejected) {
		w := core.RetryAfterOf(err)
		return w, w > 0 && w <= r.max
	}
	if !r.retryable(err) {
		return 0, false
	}
	return jittered(backoff(r.base, r.max, retry), r.jitter, r.random()), true
}

// random returns the next number of the splitmix64 sequence: lock-free,
// allocation-free, and reproducible from the seed on one goroutine.
func (r *Retry) random() uint64 {
	z := r.rng.Add(0x9e3779b97f4a7c15)
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}

// backoff is base * 2^(retry-1), capped at ceiling, for 0 <= base <=
// ceiling and retry >= 1, computed without overflow for any retry.
func backoff(base, ceiling time.Duration, retry int) time.Duration {
	shift := retry - 1
	if shift >= 63 || base > ceiling>>shift {
		return ceiling
	}
	return base << shift
}

// jittered applies j to d >= 0 with the random number rnd: full jitter is
// uniform in [0, d], equal jitter in [d-d/2, d], none is d.
func jittered(d time.Duration, j Jitter, rnd uint64) time.Duration {
	switch j {
	case FullJitter:
		return uniform(d, rnd)
	case EqualJitter:
		return d - d/2 + uniform(d/2, rnd)
	}
	return d
}

// uniform maps rnd onto [0, d] for d >= 0 (Lemire's multiply-high: no
// division, no overflow, as d+1 <= 2^63).
func uniform(d time.Duration, rnd uint64) time.Duration {
	hi, _ := bits.Mul64(rnd, uint64(d)+1)
	return time.Duration(hi)
}
