package baseline

import (
	"time"

	"github.com/casbreaker/casbreaker/core"
)

// Rejection reasons, for the rejection counters of Metrics.
const (
	open = iota
	halfOpenFull
	forcedOpen
	rampingUp
)

// rejection is the error Allow returns for a rejection: the reason's
// sentinel (through Unwrap) bound to the breaker, whose state says when to
// come back. It keeps the contract of the lock-free core's rejection with
// its own code: RetryAfter is the open duration's time left while open,
// the half-open-full wait while no probe slot is free, and 0 otherwise.
// One type per reason, each a struct of one pointer, so that returning one
// as an error allocates nothing.
type (
	openRejection         struct{ b *Breaker }
	halfOpenFullRejection struct{ b *Breaker }
	forcedOpenRejection   struct{ b *Breaker }
	rampingUpRejection    struct{ b *Breaker }
)

func (openRejection) Error() string         { return core.ErrOpen.Error() }
func (halfOpenFullRejection) Error() string { return core.ErrHalfOpenFull.Error() }
func (forcedOpenRejection) Error() string   { return core.ErrForcedOpen.Error() }
func (rampingUpRejection) Error() string    { return core.ErrRampingUp.Error() }

func (openRejection) Unwrap() error         { return core.ErrOpen }
func (halfOpenFullRejection) Unwrap() error { return core.ErrHalfOpenFull }
func (forcedOpenRejection) Unwrap() error   { return core.ErrForcedOpen }
func (rampingUpRejection) Unwrap() error    { return core.ErrRampingUp }

func (r openRejection) RetryAfter() time.Duration         { return r.b.retryAfter(0) }
func (r halfOpenFullRejection) RetryAfter() time.Duration { return r.b.retryAfter(0) }
func (r forcedOpenRejection) RetryAfter() time.Duration   { return r.b.retryAfter(0) }
func (r rampingUpRejection) RetryAfter() time.Duration    { return r.b.retryAfter(0) }

// rejectionFor is the error for reason.
func (b *Breaker) rejectionFor(reason int) error {
	switch reason {
	case open:
		return openRejection{b}
	case halfOpenFull:
		return halfOpenFullRejection{b}
	case forcedOpen:
		return forcedOpenRejection{b}
	}
	return rampingUpRejection{b}
}
