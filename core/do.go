package core

import "context"

// CircuitBreaker is the contract both implementations keep: the lock-free
// Breaker in this package and the mutex baseline in package baseline. Every
// behavioural test runs against both through it.
type CircuitBreaker interface {
	Allow() (Permit, error)
	Done(p Permit, err error)
	Record(p Permit, o Outcome)
	State() State
	Counts() Counts
}

// Recorder is the part of CircuitBreaker that RecordError needs.
type Recorder interface {
	Record(p Permit, o Outcome)
}

// RecordError classifies err and records the outcome for p. If classify
// panics, p is recorded as Ignored, so no half-open slot leaks, and the panic
// propagates unchanged (R10, regression B07). Implementations of
// CircuitBreaker use it for Done.
func RecordError(r Recorder, classify func(error) Outcome, p Permit, err error) {
	o := Ignored
	defer func() { r.Record(p, o) }()
	o = classify(err)
}

// Do runs fn under b, the common case of the two-step API. It returns
// ctx.Err() without calling fn (and without taking a permit) if ctx is
// already done, the rejection error if b refuses the call, and otherwise
// fn's result and error. fn's error is classified by the breaker's
// classifier: by default context.Canceled is neutral (R9) and every other
// error a failure. A panic in fn is recorded as a failure and re-panics with
// the same value (R10).
func Do[T any](ctx context.Context, b CircuitBreaker, fn func(context.Context) (T, error)) (T, error) {
	var zero T
	if err := ctx.Err(); err != nil {
		return zero, err
	}
	p, err := b.Allow()
	if err != nil {
		return zero, err
	}
	finished := false
	defer func() {
		if !finished {
			b.Record(p, Failure)
		}
	}()
	v, err := fn(ctx)
	finished = true
	b.Done(p, err)
	return v, err
}
