package resilience

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.uber.org/atomic"

	"github.com/casbreaker/casbreaker/core"
)

// Limits of BulkheadConfig.
const (
	MaxBulkheadConcurrent = 1 << 30                   // calls
	MaxBulkheadWait       = core.MaxOpenDurationLimit // a year, so that the wait's deadline never overflows
)

// BulkheadConfig describes a Bulkhead.
type BulkheadConfig struct {
	// MaxConcurrent is how many calls may be in flight at once,
	// 1..MaxBulkheadConcurrent. It has no default: zero is an error, as the
	// right bound depends on the dependency.
	MaxConcurrent int
	// MaxWait is how long a call may wait for a slot when all are taken
	// (the caller's context can end the wait sooner). Zero: no wait, a
	// full bulkhead refuses at once. 0..MaxBulkheadWait; anything else is
	// an error.
	MaxWait time.Duration
	// Timer bounds the wait. Zero: SystemTimer. Only waiting reads it.
	Timer Timer
}

// Bulkhead caps the calls in flight to one dependency, so that a slow
// dependency cannot take every goroutine, connection or file descriptor
// of the service. Use it as a layer of a Stack (WithBulkhead), or
// directly with Acquire (or TryAcquire) and Release.
//
// Admission is lock-free: one counter of calls in flight, taken by a
// compare-and-swap loop that never moves it past MaxConcurrent, so no
// contention admits one call too many. Only a call that has to wait
// (MaxWait > 0, every slot taken) uses the wake-up channel, a buffer of
// MaxConcurrent tokens that Release fills only while someone waits: the
// admission path never touches it. Acquire, TryAcquire and Release
// allocate nothing unless a call waits. All methods are safe for
// concurrent use.
//
// Make one with NewBulkhead; a zero Bulkhead panics with a message naming
// it.
type Bulkhead struct {
	// The atomic words first: 64-bit aligned on 32-bit platforms.
	inFlight atomic.Int64
	waiting  atomic.Int64

	max     int64
	maxWait time.Duration
	timer   Timer
	wake    chan struct{} // wake-up tokens for waiters; nil without MaxWait
}

// NewBulkhead returns an empty bulkhead for c. Its errors match
// ErrInvalidConfig and name each bad field; it never panics.
func NewBulkhead(c BulkheadConfig) (*Bulkhead, error) {
	var errs []error
	if c.MaxConcurrent < 1 || c.MaxConcurrent > MaxBulkheadConcurrent {
		errs = append(errs, configError("BulkheadConfig.MaxConcurrent", "%d is outside 1..%d (it has no default)", c.MaxConcurrent, MaxBulkheadConcurrent))
	}
	if c.MaxWait < 0 || c.MaxWait > MaxBulkheadWait {
		errs = append(errs, configError("BulkheadConfig.MaxWait", "%v is outside 0..%v (0: no wait)", c.MaxWait, MaxBulkheadWait))
	}
	if err := nilInside("BulkheadConfig.Timer", c.Timer); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if c.Timer == nil {
		c.Timer = SystemTimer{}
	}
	b := &Bulkhead{max: int64(c.MaxConcurrent), maxWait: c.MaxWait, timer: c.Timer}
	if c.MaxWait > 0 {
		b.wake = make(chan struct{}, c.MaxConcurrent)
	}
	return b, nil
}

func (b *Bulkhead) mustBeNew() {
	if b.max == 0 {
		panic("resilience: Bulkhead used without NewBulkhead")
	}
}

// TryAcquire takes a slot if one is free, without waiting, and reports
// whether it did. A true result must be matched by one Release.
func (b *Bulkhead) TryAcquire() bool {
	b.mustBeNew()
	for {
		n := b.inFlight.Load()
		if n >= b.max {
			return false
		}
		if b.inFlight.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

// Acquire takes a slot, waiting up to MaxWait for one when all are taken.
// It returns nil with a slot, which must be matched by one Release;
// ErrBulkheadFull when none came free in time (at once without MaxWait);
// and when ctx ended the wait, an error that matches both ErrBulkheadFull
// and ctx.Err() with errors.Is: the call never reached the dependency, so
// the breaker's default classification ignores it as it ignores a full
// bulkhead (a deadline alone would have counted as a failure, and cost a
// half-open probe). It does not look at ctx when a slot is free.
func (b *Bulkhead) Acquire(ctx context.Context) error {
	if b.TryAcquire() {
		return nil
	}
	if b.maxWait == 0 {
		return ErrBulkheadFull
	}
	return b.await(ctx)
}

// await waits for a slot until MaxWait has passed. It counts itself as a
// waiter before it looks at the slots again, so a Release that frees one
// after that look sees the waiter and leaves a token.
func (b *Bulkhead) await(ctx context.Context) error {
	b.waiting.Add(1)
	defer b.waiting.Add(-1)
	deadline := b.timer.Now() + b.maxWait
	for {
		if b.TryAcquire() {
			return nil
		}
		left := deadline - b.timer.Now()
		if left <= 0 {
			return ErrBulkheadFull
		}
		if err := b.timer.Sleep(ctx, left, b.wake); err != nil {
			return fmt.Errorf("%w: the wait ended: %w", ErrBulkheadFull, err)
		}
	}
}

// Release returns a slot taken by Acquire or TryAcquire and, if a call is
// waiting, leaves it a wake-up token. It panics, with the count restored,
// when no slot is taken: a Release without its Acquire.
func (b *Bulkhead) Release() {
	b.mustBeNew()
	if b.inFlight.Add(-1) < 0 {
		b.inFlight.Add(1)
		panic("resilience: Bulkhead.Release without a matching Acquire")
	}
	if b.wake != nil && b.waiting.Load() > 0 {
		select {
		case b.wake <- struct{}{}:
		default: // MaxConcurrent tokens are pending: enough for every free slot
		}
	}
}

// InFlight returns how many slots are taken now.
func (b *Bulkhead) InFlight() int {
	b.mustBeNew()
	return int(b.inFlight.Load())
}

// bulkheadCall runs next in a slot of b.
func bulkheadCall[T any](ctx context.Context, b *Bulkhead, next step[T]) (T, error) {
	if err := b.Acquire(ctx); err != nil {
		var zero T
		return zero, err
	}
	defer b.Release()
	return next.call(ctx)
}
