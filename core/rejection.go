package core

import "time"

// Rejection reasons, for the rejection counters of Metrics.
const (
	rejectOpen = iota
	rejectHalfOpenFull
	rejectForcedOpen
	rejectRampingUp
)

// reason is a rejection reason as a type without data: its sentinel.
type reason interface{ sentinel() error }

type (
	openReason         struct{}
	halfOpenFullReason struct{}
	forcedOpenReason   struct{}
	rampingUpReason    struct{}
)

func (openReason) sentinel() error         { return ErrOpen }
func (halfOpenFullReason) sentinel() error { return ErrHalfOpenFull }
func (forcedOpenReason) sentinel() error   { return ErrForcedOpen }
func (rampingUpReason) sentinel() error    { return ErrRampingUp }

// boundRejection is the error Allow and Do return for a rejection: the
// reason R's sentinel (ErrOpen and the rest, through Unwrap, so errors.Is
// tells them apart and matches ErrRejected) bound to the breaker that
// refused, so that RetryAfter can say when to come back.
//
// It is a struct of one pointer, which Go stores in an interface value
// directly: returning one as an error allocates nothing, and two compare
// equal exactly when they have the same breaker and reason.
type boundRejection[R reason] struct{ b *Breaker }

func (r boundRejection[R]) Error() string { return r.Unwrap().Error() }

// Unwrap returns the reason's sentinel.
func (r boundRejection[R]) Unwrap() error {
	var why R
	return why.sentinel()
}

// RetryAfter is how long from the moment of the call until the breaker
// that refused may admit a call (RetryAfterHint): the time left of the
// open duration while open, HalfOpenFullWait (bounded by the max wait's
// time left) while every half-open probe slot is taken, and 0 otherwise,
// in particular when forced open (only a manual control ends it) or when
// shed by the ramp-up (the next call may be admitted). It is computed from
// the breaker's state when called, so an error kept for later still tells
// the truth; at the clock reading of the Allow that returned it, it equals
// that Allow's Permit.RetryAfter. It reads the clock, changes nothing and
// allocates nothing.
func (r boundRejection[R]) RetryAfter() time.Duration { return r.b.retryAfter(0) }
